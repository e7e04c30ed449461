"""GPU-library tuning (rocm_dl_guide.optimization.tuning): the convolution workload that the
ROCm job's MIOpen recipe runs, its baseline comparison and refusals, and
TunableOp's comparison, which says why it did not run where there is no GPU."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

from conftest import guide_cli  # noqa: E402
from rocm_dl_guide.core import profiles  # noqa: E402
from rocm_dl_guide.optimization import tuning  # noqa: E402


def test_conv_workload_reports_the_miopen_settings_and_the_user_database(tmp_path, monkeypatch):
    db = tmp_path / "miopen-db"
    db.mkdir()
    (db / "gfx942_304.ukdb").write_bytes(b"x" * 12)  # what MIOpen would leave there
    monkeypatch.setenv("MIOPEN_FIND_ENFORCE", "3")
    monkeypatch.setenv("MIOPEN_USER_DB_PATH", str(db))
    monkeypatch.delenv("MIOPEN_FIND_MODE", raising=False)
    result = tuning.conv_workload(profiles.current(), batch=1, device="cpu", warmup=0, iterations=2)
    assert result.miopen_env == {"MIOPEN_FIND_ENFORCE": "3", "MIOPEN_USER_DB_PATH": str(db)}
    assert result.user_db_files == {"gfx942_304.ukdb": 12}
    assert not result.miopen_used  # the CPU has no MIOpen, and the summary says so
    assert "MIOpen: not used" in result.summary()
    assert result.timing.iterations == 2 and result.median_ms > 0 and result.first_ms > 0
    data = result.to_dict()
    assert data["ms"] == result.median_ms and data["speedup_vs_baseline"] is None
    json.dumps(data)


def test_conv_workload_compares_with_its_baseline():
    baseline = {"ms": 1000.0, "batch": 1}
    result = tuning.conv_workload(
        profiles.current(), batch=1, device="cpu", warmup=0, iterations=1, baseline=baseline
    )
    assert result.baseline_ms == 1000.0
    assert result.speedup == pytest.approx(1000.0 / result.median_ms)
    assert "the baseline" in result.summary()
    with pytest.raises(tuning.TuningError, match="batch 8"):
        tuning.conv_workload(
            profiles.current(), batch=1, device="cpu", iterations=1, baseline={"ms": 1, "batch": 8}
        )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "cannot read"),
        ("starting ...\nnot json\n", "not the JSON output"),
        ('{"device": "cpu"}\n', "no 'ms' figure"),
    ],
    ids=["missing", "not-json", "no-ms"],
)
def test_read_baseline_refuses_what_is_not_a_conv_result(tmp_path, content, message):
    path = tmp_path / "before.json"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(tuning.TuningError, match=message):
        tuning.read_baseline(path)


def test_read_baseline_takes_the_last_line_of_the_command_output(tmp_path):
    path = tmp_path / "before.json"
    path.write_text('progress line\n{"ms": 12.5, "batch": 1}\n', encoding="utf-8")
    assert tuning.read_baseline(path)["ms"] == 12.5


def test_tunableop_says_why_it_did_not_run_without_a_gpu():
    if torch.cuda.is_available():
        pytest.skip("a GPU is present: TunableOp runs (tested by make gpu-check's machine)")
    result = tuning.tunableop_comparison(m=64, n=64, k=64)
    assert not result.ran
    assert "GPU" in result.reason and result.speedup is None and result.results == []
    assert result.frame().empty


@pytest.mark.skipif(not torch.cuda.is_available(), reason="TunableOp needs a GPU")
def test_tunableop_tunes_a_gemm_and_writes_its_results_file(tmp_path):
    result = tuning.tunableop_comparison(m=512, n=512, k=512, folder=tmp_path, iterations=5)
    assert result.ran and result.results_file.is_file()
    assert result.results, "TunableOp recorded no tuned GEMM"
    assert result.speedup > 0


def test_bench_conv_cli_json_and_baseline(tmp_path):
    first = guide_cli("bench", "conv", "--json", "--iterations", "1", "--warmup", "0", timeout=300)
    assert first.returncode == 0, first.stderr
    before = tmp_path / "before.json"
    before.write_text(first.stdout, encoding="utf-8")
    data = json.loads(first.stdout.strip().splitlines()[-1])
    assert data["batch"] == 1 and data["ms"] > 0 and data["miopen_used"] is False
    second = guide_cli(
        "bench",
        "conv",
        "--json",
        "--iterations",
        "1",
        "--warmup",
        "0",
        "--baseline",
        str(before),
        timeout=300,
    )
    assert second.returncode == 0, second.stderr
    after = json.loads(second.stdout.strip().splitlines()[-1])
    assert after["baseline_ms"] == pytest.approx(data["ms"])
    assert after["speedup_vs_baseline"] == pytest.approx(data["ms"] / after["ms"])


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (("bench", "conv", "--backend", "onnxruntime"), "--backend"),
        (("bench", "conv", "--tuning"), "--tuning"),
        (("bench", "conv", "--threads", "2"), "--threads"),
        (("bench", "conv", "--batch", "0"), "argument --batch: must be at least 1"),
        (("bench", "conv", "--warmup", "-1"), "argument --warmup: must be at least 0"),
        (("bench", "inference", "--baseline", "x.json"), "--baseline"),
    ],
    ids=["backend", "tuning", "threads", "batch", "warmup", "baseline-for-inference"],
)
def test_bench_conv_flag_errors_are_usage_errors(args, flag):
    """argparse refuses a flag 'bench conv' does not take, or a value out of
    bounds, with exit code 2, naming the flag."""
    proc = guide_cli(*args, timeout=120)
    assert proc.returncode == 2, proc
    assert "Traceback" not in proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert "error:" in last and flag in last, proc.stderr


def test_bench_conv_missing_baseline_is_one_line():
    proc = guide_cli("bench", "conv", "--baseline", "/nonexistent/before.json", timeout=120)
    assert proc.returncode == 1, proc
    assert proc.stderr.startswith("bench: ") and "cannot read the baseline" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "Traceback" not in proc.stderr


def test_int8_recorded_says_whether_this_cpu_has_a_choice(tmp_path):
    from rocm_dl_guide.core import device
    from rocm_dl_guide.optimization import ort_int8

    record = tmp_path / "int8-choice.json"
    assert not tuning.int8_recorded(record)  # no file yet
    best = {
        "config": ort_int8.U8S8.to_dict(),
        "ms": 47.3,
        "speedup_vs_eager_fp32": 4.2,
        "top1_agreement": 1.0,
    }
    ort_int8.record_choice(best, device.cpu_flags(), "this machine", {}, record)
    assert tuning.int8_recorded(record)
    config, why = ort_int8.chosen_int8(record)
    assert config == ort_int8.U8S8 and "measured on this CPU" in why
