"""selfcheck / `make gpu-check`: the refusal without a GPU, the checks on the CPU
(GPU-only parts skipped with the reason), the report format, and the
verification record that only a passed GPU run may write."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from conftest import hang_limit  # noqa: E402
from rocm_dl_guide.selfcheck.record import (  # noqa: E402
    RecordError,
    latest_record,
    stamp,
    write_record,
)
from rocm_dl_guide.selfcheck.report import (  # noqa: E402
    Outcome,
    Report,
    load_report,
    peak_throughput,
)
from rocm_dl_guide.selfcheck.runner import CHECK_NAMES, run  # noqa: E402

NO_GPU = not torch.cuda.is_available()


def _cli(*args: str, cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rocm_dl_guide", "selfcheck", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
    )


@pytest.mark.skipif(not NO_GPU, reason="this machine has a GPU: nothing to refuse")
def test_gpu_check_refuses_at_once_without_a_gpu(tmp_path):
    # "At once": one line and exit 3, no check run and no report written.
    done = _cli("--gpu", "--report", str(tmp_path / "report"), cwd=tmp_path, timeout=hang_limit(40))
    assert done.returncode == 3, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("selfcheck --gpu: no GPU: PyTorch")
    assert "sees no GPU" in lines[0] and "Traceback" not in done.stderr
    assert not (tmp_path / "report").exists() and done.stdout == ""


def _make_gpu_check(python: str, report: Path) -> subprocess.CompletedProcess:
    """``make -s gpu-check`` with ``python`` as the Python it starts from."""
    return subprocess.run(
        ["make", "-s", "gpu-check", f"PYTHON={python}", f"GPU_CHECK_REPORT={report}"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[1],
    )


@pytest.mark.skipif(not NO_GPU, reason="this machine has a GPU")
def test_make_gpu_check_refuses_clearly(tmp_path):
    done = _make_gpu_check(sys.executable, tmp_path / "r")
    assert done.returncode != 0
    assert "no GPU" in done.stderr, done.stderr[-2000:]
    assert not (tmp_path / "r").exists()


def test_make_gpu_check_on_a_python_with_only_the_standard_library(tmp_path):
    """The preflight runs before any install, in the Python the reader names: one
    without PyTorch or the package's dependencies (filelock, ...) gets one line,
    not a traceback (a venv without site packages stands in for such a Python)."""
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    done = _make_gpu_check(f"{bare}/bin/python", tmp_path / "r")
    assert done.returncode != 0
    mine = [line for line in done.stderr.splitlines() if not line.startswith("make")]
    assert len(mine) == 1 and mine[0].startswith("selfcheck --gpu: no GPU usable"), done.stderr
    assert "has no PyTorch" in mine[0] and "Traceback" not in done.stderr
    assert not (tmp_path / "r").exists()


def test_gpu_check_venv_reaches_the_pytorch_of_a_virtual_environment(tmp_path):
    """gpu-check's venv on top of a Python that is itself a venv (this test's own,
    as in NVIDIA's image, where --system-site-packages alone loses PyTorch) still
    imports that Python's torch (found by make gpu-check on an H100)."""
    root = Path(__file__).resolve().parents[1]
    venv = tmp_path / "v"
    done = subprocess.run(
        ["make", "-s", "gpu-check-venv", f"PYTHON={sys.executable}", f"GPU_CHECK_VENV={venv}"],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=root,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    found = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import torch; print(torch.__file__)"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert found.returncode == 0, found.stderr[-2000:]
    import torch

    assert Path(found.stdout.strip()) == Path(torch.__file__)


def test_cpu_run_passes_and_reports_the_gpu_parts_as_skipped(tmp_path):
    only = ["train:cifar10", "speed:cifar10", "dataloader", "checkpoint-resume", "ddp"]
    done = _cli(
        "--steps",
        "2",
        "--only",
        ",".join(only),
        "--json",
        "--report",
        str(tmp_path / "report"),
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    data = json.loads(done.stdout.strip().splitlines()[-1])
    assert data["passed"] is True and data["mode"] == "cpu" and data["format"] == 1
    assert data["data_source"] == "fixtures" and data["profile"] == "smoke"
    assert data["device"]["type"] == "cpu"
    assert torch.__version__.startswith(data["versions"]["PyTorch"].split("+")[0])
    checks = {c["name"]: c for c in data["checks"]}
    assert list(checks) == only
    assert checks["train:cifar10"]["status"] == "pass"
    assert "1 epoch of 2 steps on cpu" in checks["train:cifar10"]["detail"]
    assert checks["checkpoint-resume"]["status"] == "pass"
    for name in ("dataloader", "ddp"):
        assert checks[name]["status"] == "skip" and "GPU" in checks[name]["detail"]
    figs = data["figures"]["cifar10"]  # the training sweep at the CPU's small plan
    assert figs["float32_img_per_s"] > 0 and figs["amp-float16_img_per_s"] is None
    assert figs["best"]["batch"] in (2, 4) and figs["best"]["images_per_s"] > 0
    assert {tuple(r[:2]) for r in figs["rows"]} >= {(2, "fp32"), (4, "fp32"), (4, "bf16")}
    assert figs["busy_fraction"] is None and figs["gflops_per_sample"] > 0
    assert checks["speed:cifar10"]["detail"].startswith(f"best {figs['best']['variant']} at")
    # the written report reads back; the text report says the same
    report = load_report(tmp_path / "report" / "selfcheck.json")
    assert report.passed and [c.name for c in report.checks] == only
    text = (tmp_path / "report" / "selfcheck.txt").read_text()
    assert "PASSED" in text and "[skip] ddp" in text


def test_cpu_run_profiles_a_step_and_skips_tunableop(tmp_path):
    done = _cli(
        "--steps",
        "2",
        "--only",
        "profiler,tunableop",
        "--json",
        "--report",
        str(tmp_path / "report"),
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    checks = {c["name"]: c for c in json.loads(done.stdout.strip().splitlines()[-1])["checks"]}
    assert checks["profiler"]["status"] == "pass", checks["profiler"]
    assert "ms per step" in checks["profiler"]["detail"]
    assert (tmp_path / "report" / "profile" / "trace.json").is_file()
    assert checks["tunableop"]["status"] == "skip" and "GPU" in checks["tunableop"]["detail"]


def test_record_without_gpu_is_a_usage_error_before_any_check(tmp_path):
    done = _cli("--record", "--report", str(tmp_path / "r"), cwd=tmp_path, timeout=120)
    assert done.returncode == 2 and "--record needs --gpu" in done.stderr
    assert not (tmp_path / "r").exists()


def test_a_failing_check_fails_the_run_and_is_reported(tmp_path, monkeypatch):
    def broken(ctx):
        raise RuntimeError("HIP error: invalid device function")

    monkeypatch.setattr("rocm_dl_guide.selfcheck.checks.check_loader", broken)
    report = run(False, tmp_path, steps=1, only=["dataloader"], log=lambda _l: None)
    assert not report.passed
    (check,) = report.checks
    assert check.status == "fail" and "invalid device function" in check.detail
    with pytest.raises(ValueError, match="unknown check"):
        run(False, tmp_path, only=["train:alexnet"], log=lambda _l: None)


def _gpu_report(status: str = "pass") -> Report:
    checks = [Outcome(n, status, "ok", 1.0) for n in CHECK_NAMES[:6]]
    checks[3].figures = {
        "float32_img_per_s": 1000.0,
        "amp+channels_last_img_per_s": 2500.0,
        "amp_speedup": 2.5,
    }
    return Report(
        mode="gpu",
        device={
            "type": "cuda",
            "name": "AMD Instinct MI300X",
            "arch": "gfx942",
            "runtime": "ROCm/HIP 7.0",
            "count": 8,
        },
        versions={"PyTorch": "2.9.0+rocm7.0"},
        profile="gpu",
        data_source="fixtures",
        steps=20,
        started="2026-11-23 10:00 UTC",
        checks=checks,
        commit="0123456789abcdef",
    )


def test_only_a_passed_gpu_run_writes_the_record(tmp_path):
    path = tmp_path / "record.json"
    assert "not yet" in stamp(path=path)
    cpu = run(False, tmp_path, steps=1, only=["ddp"], log=lambda _l: None)
    with pytest.raises(RecordError, match="only from `selfcheck --gpu` on a GPU"):
        write_record(cpu, path)
    with pytest.raises(RecordError, match="failed run"):
        write_record(_gpu_report("fail"), path)
    partial = _gpu_report()
    partial.checks = partial.checks[:2]
    with pytest.raises(RecordError, match="partial run"):
        write_record(partial, path)
    assert not path.exists()
    write_record(_gpu_report(), path)
    record = latest_record(path)
    assert record["device"]["name"] == "AMD Instinct MI300X" and record["commit"]
    text = stamp("mnist-pytorch", path=path)
    assert (
        "passed on 2026-11-23 10:00 UTC, on an AMD Instinct MI300X (ROCm/HIP 7.0, gfx942)" in text
    )
    assert "No AMD GPU" not in text  # an AMD record needs no warning
    assert "amp+channels_last 2,500 img/s" in text and "amp speedup 2.50x" in text


def test_language_model_figures_go_into_the_summary():
    report = _gpu_report()
    report.checks.append(Outcome("lm:bf16", "pass", "ok", 1.0, figures={"tokens_per_s": 15000.0}))
    report.checks.append(Outcome("lm:lora", "fail", "broke", 1.0, figures={"tokens_per_s": 9.0}))
    report.checks.append(
        Outcome("lm:attention", "pass", "ok", 1.0, figures={"picked": "flash", "flash_ms": 0.458})
    )
    figures = report.figures()
    assert figures["lm:bf16"] == {"tokens_per_s": 15000.0}
    assert "lm:lora" not in figures and figures["mnist-pytorch"]["amp_speedup"] == 2.5
    # the text report shows them as they are recorded, not "no figures"
    text = report.summary()
    assert "  lm:bf16: tokens per s 15,000" in text
    assert "  lm:attention: picked flash; flash ms 0.458" in text
    assert "no figures" not in text


def test_kernel_figures_go_into_the_record_and_read_with_their_units(tmp_path):
    report = _gpu_report()
    figs = {"softmax_vs_unfused": 4.66, "softmax_vs_torch": 1.82}
    report.checks.append(Outcome("kernels:softmax", "pass", "ok", 1.0, figures=figs))
    mm = {"tflops": 428.4, "matmul_vs_torch": 0.79}
    report.checks.append(Outcome("kernels:matmul", "pass", "ok", 1.0, figures=mm))
    report.checks.append(Outcome("kernels:compile", "skip", "no GPU", 0.0, figures={"x": 1.0}))
    assert report.figures()["kernels:softmax"] == figs and "kernels:compile" not in report.figures()
    path = write_record(report, tmp_path / "record.json")
    text = stamp("kernels:softmax", path=path)
    assert text.endswith(
        "The Triton softmax on the AMD Instinct MI300X: 4.66 times the throughput of the "
        "unfused operators; 1.82 times that of torch.softmax."
    )
    assert "428 TFLOP/s; 0.79 times the TFLOP/s of torch.matmul" in stamp(
        "kernels:matmul", path=path
    )


def test_a_record_from_another_vendor_names_it_and_says_no_amd_gpu_was_measured(tmp_path):
    """A record from an NVIDIA GPU names it in the stamp and in :func:`where`, and
    says that no AMD GPU has been measured; its sweep reads as words, not keys."""
    from rocm_dl_guide.selfcheck.record import where

    report = _gpu_report()
    report.device = {"type": "cuda", "name": "NVIDIA H200", "arch": "sm_90",
                     "runtime": "CUDA 13.0", "count": 1}  # fmt: skip
    sweep = {"best": {"variant": "bf16+cl", "batch": 256, "images_per_s": 2417.3,
                      "fraction_of_peak": 0.0836, "busy_fraction": 0.984},
             "amp_speedup_at_best_batch": 2.023,
             "end_to_end": [{"loader": "DataLoader, 4 workers", "fraction": 0.48}]}  # fmt: skip
    report.check("speed:inception-v3").figures = sweep
    path = write_record(report, tmp_path / "record.json")
    text = stamp("inception-v3", path=path)
    assert "on an NVIDIA H200 (CUDA 13.0, sm_90)" in text
    assert "No AMD GPU has been measured yet" in text
    assert (
        "Inception v3 on the NVIDIA H200: fastest setting was bf16 autocast with channels-last "
        "at batch 256, at 2,417 images/s; 8.4% of the peak 16-bit matrix throughput of the GPU; "
        "the GPU busy 98.4% of the time; autocast 2.02 times as fast as float32 at that batch; "
        "fed by the real data loader (DataLoader), 48% of the rate on batches already on the GPU."
    ) in text
    assert "bf16+cl" not in text and "img/s" not in text
    # The loader's share names its own batch and rate, where the record has them:
    # 48% of 1,204 images/s at batch 64, not of the fastest setting's 2,417.
    sweep["end_to_end"][0] |= {"batch": 64, "model_img_per_s": 1204.4}
    again = stamp("inception-v3", path=write_record(report, tmp_path / "again.json"))
    assert "(DataLoader) at batch 64, 48% of the rate on batches already on the GPU (1,204" in again
    spans = text.split("`")[2::2]  # what follows each code span
    assert "'" not in text and all(after.startswith(" ") for after in spans)  # same rendered
    assert where(latest_record(path)) == "on an NVIDIA H200 (no AMD GPU has been measured yet)"
    report.device = {"type": "cuda", "name": "AMD Instinct MI300X", "runtime": "ROCm/HIP 7.0"}
    assert where(latest_record(write_record(report, path))) == "on an AMD Instinct MI300X"


def test_the_tracked_record_if_any_is_a_gpu_runs():
    record = latest_record()
    if record is None:
        pytest.skip("no GPU run has written the verification record yet")
    assert record["device"]["type"] == "cuda"
    assert all(record["checks"][n] == "pass" for n in CHECK_NAMES[:6])


@pytest.mark.parametrize("content", ["", "{not json", '{"format": 99, "checks": []}', "[]"])
def test_an_unreadable_report_is_one_clear_error(tmp_path, content):
    path = tmp_path / "selfcheck.json"
    path.write_text(content)
    with pytest.raises(ValueError, match="not a selfcheck report") as err:
        load_report(path)
    assert "\n" not in str(err.value)


def test_peak_throughput_table():
    assert peak_throughput("AMD Instinct MI300X")["bf16_tflops"] == 1307.4
    assert peak_throughput("NVIDIA H100 PCIe")["bf16_tflops"] == 756.5
    assert peak_throughput("NVIDIA H100 80GB HBM3")["name"] == "NVIDIA H100 SXM"
    assert peak_throughput("Radeon RX 7900 XTX") is None


def test_wheelhouse_serves_every_python_offline(tmp_path):
    """`make wheelhouse` (needs the package registry): every requirement of
    requirements-gpu-check.txt resolves from the folder alone for CPython
    3.10-3.12, and one version's wheels stay under 60 MB (what the device tool
    carries: ``make wheelhouse WHEEL_PYTHONS=3.X``)."""
    root = Path(__file__).resolve().parents[1]
    house = tmp_path / "wheelhouse"
    made = subprocess.run(
        ["make", "-s", "wheelhouse", f"WHEELHOUSE={house}", f"PYTHON={sys.executable}"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=root,
    )
    if made.returncode != 0 and any(
        s in made.stderr for s in ("NewConnectionError", "Max retries", "Temporary failure")
    ):
        pytest.skip(f"the package registry is not reachable: {made.stderr[-300:]}")
    assert made.returncode == 0, made.stderr[-2000:]
    wheels = list(house.glob("*.whl"))
    assert not any(w.name.startswith(("torch-", "tensorflow", "numpy-")) for w in wheels)
    for version in ("3.10", "3.11", "3.12"):
        again = subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-index",
                "--find-links",
                str(house),
                "--only-binary=:all:",
                "--no-deps",
                "--python-version",
                version,
                "--implementation",
                "cp",
                *(
                    arg
                    for platform in ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64")
                    for arg in ("--platform", platform)
                ),
                "-r",
                str(root / "requirements-gpu-check.txt"),
                "-d",
                str(tmp_path / f"check-{version}"),
            ],
            capture_output=True,
            text=True,
            timeout=300,
            env={k: v for k, v in os.environ.items() if not k.startswith("PIP_")},
        )
        assert again.returncode == 0, (version, again.stderr[-1500:])
        got = list((tmp_path / f"check-{version}").glob("*.whl"))
        assert any(w.name.startswith("pandas-") for w in got)
        assert any(w.name.startswith("transformers-") for w in got)  # the LM checks
        assert sum(w.stat().st_size for w in got) < 60e6, version


def test_the_language_model_checks_are_listed_and_fsdp_needs_two_gpus(tmp_path, monkeypatch):
    from rocm_dl_guide.lm import qlora

    assert {"lm:bf16", "lm:lora", "lm:qlora", "lm:fsdp", "lm:grpo"} <= set(CHECK_NAMES)
    report = run(False, tmp_path, steps=1, only=["lm:fsdp"], log=lambda _l: None)
    (check,) = report.checks
    assert check.status == "skip" and "two or more" in check.detail
    monkeypatch.setattr(qlora, "qlora_support", lambda device: (False, "no 4-bit kernels"))
    report = run(False, tmp_path, steps=1, only=["lm:qlora"], log=lambda _l: None)
    (check,) = report.checks
    assert (check.status, check.detail) == ("skip", "no 4-bit kernels")
    import importlib.util

    found = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "trl" else found(n))
    report = run(False, tmp_path, steps=1, only=["lm:grpo"], log=lambda _l: None)
    (check,) = report.checks
    assert check.status == "skip" and "TRL and datasets are not installed" in check.detail


def test_the_real_loaders_are_measured_against_the_step(tmp_path):
    """What ``speed:*`` adds on a GPU, run here on the CPU: each of the case study's
    loaders alone and feeding the best eager variant's step, at a batch the data
    set holds twice; the DeviceLoader hands out batches faster than the DataLoader."""
    from rocm_dl_guide.core import casestudies, profiles
    from rocm_dl_guide.selfcheck import checks
    from rocm_dl_guide.training import training_speed

    cpu = torch.device("cpu")
    profile = profiles.with_data_source(profiles.get("smoke"), "fixtures")
    ctx = checks.Setup(cpu, profile, tmp_path, 2, False)
    workload = casestudies.get("cifar10").workload_function()(profile, cpu)
    result = checks.run_sweep(ctx, training_speed.from_workload("cifar10", workload), "cifar10")
    best = checks.sweep_figures(result)["best"]
    rows = checks.input_figures(ctx, workload, result, best)
    assert [r["loader"].split(",")[0] for r in rows] == ["DeviceLoader", "DataLoader"]
    for row in rows:
        assert 2 * row["batch"] <= row["samples_per_epoch"] and row["batch"] <= best["batch"]
        assert row["end_to_end_img_per_s"] > 0 and 0 < row["fraction"] <= 2
        assert row["model_img_per_s"] == result.rate(row["variant"], row["batch"])
    assert rows[0]["loader_img_per_s"] > rows[1]["loader_img_per_s"]
