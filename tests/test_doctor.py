"""The doctor command: never a traceback, whatever the machine looks like."""

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import doctor_cli
from rocm_dl_guide.doctor import rocminfo, samples


def _script(path: Path, body: str) -> str:
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def run_doctor(*args, env_extra=None, path_dirs=(), timeout=600):
    env = dict(os.environ)
    # PATH holds only the directories the test gives, plus /bin for the shell
    # scripts' own needs: no rocminfo, no rocm-smi unless a test puts one there.
    env["PATH"] = os.pathsep.join(map(str, path_dirs)) or os.devnull
    env.update(env_extra or {})
    return subprocess.run(
        [sys.executable, "-m", "rocm_dl_guide", "doctor", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
    )


@pytest.fixture
def no_rocm(tmp_path):
    empty = tmp_path / "empty-bin"
    empty.mkdir()
    return {"path_dirs": [empty], "env_extra": {"ROCM_PATH": str(tmp_path / "no-rocm")}}


def test_every_tool_missing(tmp_path, no_rocm):
    # A Python without site-packages: no torch, tensorflow, onnxruntime or migraphx.
    bare = _script(tmp_path / "bare-python", f'exec "{sys.executable}" -I -S "$@"')
    proc = run_doctor("--json", "--python", bare, **no_rocm)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    report = json.loads(proc.stdout)
    assert report["gpus"] == []
    assert "not installed" in report["rocm"]["error"]
    assert "not installed" in report["rocminfo"]["error"]
    for name, info in report["frameworks"].items():
        assert info["installed"] is False, name
        assert info["error"] == "not installed", (name, info["error"])
    assert report["verdict"].startswith("No usable GPU found")
    # The plain-text report says the same in words.
    text = run_doctor("--python", bare, **no_rocm)
    assert text.returncode == 0 and "Traceback" not in text.stderr
    assert "GPUs: none found" in text.stdout
    assert "Verdict: No usable GPU found" in text.stdout


def test_the_text_report_puts_the_verdict_and_the_problems_first():
    """One screen, what matters first (issue 46 item 8): the verdict right under
    the title, failing checks before warnings, information and passes, and
    sources as numbered references listed once at the end, whole."""
    from rocm_dl_guide.doctor import report as doctor_report
    from rocm_dl_guide.doctor.rules import Check

    url = "https://rocm.docs.amd.com/projects/install-on-linux/en/latest/how-to/docker.html"
    checks = [
        Check("NUMA balancing", doctor_report.OK, "off", sources=(url,)),
        Check("Device access", doctor_report.FAIL, "no /dev/kfd", sources=(url,), fix="pass it"),
        Check("PyTorch", doctor_report.INFO, "PyTorch 2.14.1"),
        Check("Groups", doctor_report.WARN, "not in render"),
    ]
    lines, sources = doctor_report._checks_text(checks, 100)
    assert [line.split()[0] for line in lines if line.lstrip().startswith("[")] == [
        "[FAIL]", "[warn]", "[info]", "[ok]",
    ]  # fmt: skip
    assert lines[0] == "  [FAIL] Device access: no /dev/kfd [1]" and "fix: pass it" in lines[1]
    assert sources == [url] and lines[-1].endswith("off [1]")  # cited once, numbered once


def test_doctor_here_fits_one_screen_with_the_verdict_first():
    """`doctor` on this machine (no GPU; every framework probed): its verdict on the
    second line, at most 30 lines of at most 100 columns, every source URL whole on
    a line of its own, and a check's line cut short ends in the cut mark."""
    proc = run_doctor()
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.rstrip("\n").splitlines()
    assert lines[1].startswith("Verdict: "), lines[:3]
    assert len(lines) <= 30, "\n".join(lines)
    assert max(len(line) for line in lines) <= 100, max(lines, key=len)
    urls = [w for line in lines for w in line.split() if "://" in w]
    assert urls and all(line.split()[-1].startswith("http") for line in lines if "://" in line)
    sources = lines[lines.index("Sources:") + 1 :]
    assert [line.split()[0] for line in sources] == [f"[{i}]" for i in range(1, len(sources) + 1)]


def test_a_check_too_long_for_one_line_is_cut_at_a_word_and_keeps_its_citations():
    from rocm_dl_guide.doctor import report as doctor_report
    from rocm_dl_guide.doctor.rules import Check

    long = Check(
        "ROCm", doctor_report.INFO, "ROCm is not installed " + "at a path " * 20, sources=("u",)
    )
    (line,), _ = doctor_report._checks_text([long], 100)
    assert len(line) <= 100 and line.endswith(f"{doctor_report.CUT} [1]"), line
    assert "ROCm: ROCm is not installed at a path" in line and " pat…" not in line
    named = Check("PyTorch", doctor_report.INFO, "PyTorch 2.14.1, CPU-only build")
    assert doctor_report._checks_text([named], 100)[0] == [
        "  [info] PyTorch: 2.14.1, CPU-only build"
    ]


def test_missing_interpreter_is_reported(tmp_path, no_rocm):
    proc = run_doctor("--json", "--python", str(tmp_path / "nope"), **no_rocm)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr
    report = json.loads(proc.stdout)
    for info in report["frameworks"].values():
        assert "was not found" in info["error"]


@pytest.mark.parametrize(
    "python_body, expected",
    [
        ("echo '\\x00\\x01 garbage {not json'; exit 0", "could not be read"),
        ("echo 'Illegal instruction' >&2; exit 132", "failed: Illegal instruction"),
        ("kill -SEGV $$", "crashed the process (signal 11)"),
    ],
    ids=["garbage-stdout", "error-exit", "segfault"],
)
def test_garbled_and_failing_tools(tmp_path, python_body, expected):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # rocminfo that prints binary noise and a half agent, rocm-smi that errors.
    _script(bin_dir / "rocminfo", "printf '\\377\\376 ROCk mod\\nAgent 1\\n  Name: gfx'; exit 3")
    _script(bin_dir / "rocm-smi", "echo 'ERROR: GPU[0] : bad' >&2; exit 2")
    rocm = tmp_path / "rocm" / ".info"
    rocm.mkdir(parents=True)
    (rocm / "version").write_bytes(b"\xff\xfe not-a-version")
    fake_python = _script(tmp_path / "python", python_body)
    proc = run_doctor(
        "--json",
        "--python",
        fake_python,
        path_dirs=[bin_dir],
        env_extra={"ROCM_PATH": str(tmp_path / "rocm")},
    )
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    report = json.loads(proc.stdout)
    assert "does not contain a version number" in report["rocm"]["error"]
    assert report["rocminfo"]["error"], "a failing rocminfo must be reported"
    assert report["gpus"] == []
    for info in report["frameworks"].values():
        assert expected in info["error"]
    text = run_doctor(
        "--python",
        fake_python,
        path_dirs=[bin_dir],
        env_extra={"ROCM_PATH": str(tmp_path / "rocm")},
    )
    assert text.returncode == 0 and "Traceback" not in text.stderr
    assert "Verdict:" in text.stdout


def test_saved_rocminfo_gives_gpus_with_gfx_and_name(tmp_path, no_rocm):
    saved = tmp_path / "rocminfo.txt"
    saved.write_text(samples.load_sample("mi-instinct"))
    bare = _script(tmp_path / "bare-python", f'exec "{sys.executable}" -I -S "$@"')
    proc = run_doctor("--json", "--rocminfo", str(saved), "--python", bare, **no_rocm)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    expected = rocminfo.parse(saved.read_text()).gpus
    assert len(report["gpus"]) == len(expected) > 0
    for entry, agent in zip(report["gpus"], expected, strict=True):
        assert entry["gfx"] == agent.gfx and entry["gfx"].startswith("gfx")
        assert entry["marketing_name"] == agent.marketing_name
    # The GPU is present but no framework can use it: the verdict says so.
    assert "PyTorch cannot use it" in report["verdict"]
    checks = {c["name"]: c for c in report["checks"]}
    assert any(name.startswith("GPU ") for name in checks)


def test_facts_with_a_saved_rocminfo_check_as_if_collected_with_it(tmp_path):
    """The verify page's second report: this machine's facts with a saved
    rocminfo output in place of its own give the same report as collecting them
    with that output, and only the rocminfo part changes."""
    from rocm_dl_guide import doctor
    from rocm_dl_guide.doctor import system

    bare = _script(tmp_path / "bare-python", f'exec "{sys.executable}" -I -S "$@"')
    env = {"ROCM_PATH": str(tmp_path / "no-rocm"), "PATH": os.devnull}
    sample, source = samples.load_sample("mi-instinct"), "SAMPLE mi-instinct"
    here = system.collect(python=bare, env=env)
    swapped = here.with_rocminfo(sample, source=source)
    direct = system.collect(rocminfo_text=sample, rocminfo_source=source, python=bare, env=env)
    assert swapped.frameworks == here.frameworks and swapped.host == here.host
    assert [g["gfx"] for g in swapped.gpus()] == [a.gfx for a in rocminfo.parse(sample).gpus]
    assert swapped.gpus() != here.gpus()
    assert doctor.check_system(swapped).to_dict() == doctor.check_system(direct).to_dict()


def test_garbled_saved_rocminfo(tmp_path, no_rocm):
    saved = tmp_path / "garbage.txt"
    saved.write_bytes(os.urandom(4096))
    bare = _script(tmp_path / "bare-python", f'exec "{sys.executable}" -I -S "$@"')
    proc = run_doctor("--json", "--rocminfo", str(saved), "--python", bare, **no_rocm)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr
    assert json.loads(proc.stdout)["gpus"] == []


def test_unreadable_rocminfo_file_is_one_clear_error(tmp_path):
    proc = run_doctor("--rocminfo", str(tmp_path / "missing.txt"))
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"doctor: cannot read {tmp_path / 'missing.txt'}: No such file or directory"
    ]


def test_doctor_on_this_machine_sees_the_frameworks():
    """The real environment: frameworks are found and versions reported."""
    proc = subprocess.run(
        [sys.executable, "-m", "rocm_dl_guide", "doctor", "--json"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    import torch

    torch_report = report["frameworks"]["pytorch"]
    assert torch_report["installed"] and torch_report["version"] == torch.__version__
    assert torch_report["details"]["gpu_available"] == torch.cuda.is_available()
    assert isinstance(report["gpus"], list)


def test_a_pytorch_that_crashes_at_import_does_not_take_doctor_down(tmp_path):
    """An ``Illegal instruction`` at ``import torch`` (a wheel built for another
    CPU or GPU) is what the doctor is for: only the probe's child dies. The
    command line and the report never import PyTorch themselves; the profile
    the report names comes from the probe's answer."""
    site = tmp_path / "site"
    (site / "torch").mkdir(parents=True)
    (site / "torch" / "__init__.py").write_text("import os, signal\nos.kill(os.getpid(), 4)\n")
    (site / "tensorflow").mkdir()  # fails at once instead of a 5 s import
    (site / "tensorflow" / "__init__.py").write_text("raise ImportError('a stand-in')\n")
    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(root / "code")]))
    env.pop("ROCM_DL_GUIDE_PROFILE", None)
    proc = doctor_cli("--json", env=env, frameworks=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    assert report["frameworks"]["pytorch"]["error"].endswith("crashed the process (signal 4)")
    assert report["profile"] == "smoke"
    text = doctor_cli(env=env, frameworks=True)
    assert text.returncode == 0 and "Traceback" not in text.stderr
    assert "importing pytorch crashed the process" in " ".join(text.stdout.split())


# --------------------------------------------------------------------------- distributed


def _torch_report(details: dict):
    from rocm_dl_guide.doctor import frameworks, installed, system

    return system.SystemReport(
        rocm=installed.rocm_version(env={"ROCM_PATH": "/nonexistent"}),
        kernel_driver=installed.KernelDriverInfo(loaded=False),
        rocminfo_source="saved",
        rocminfo=rocminfo.parse(samples.load_sample("mi300x")),
        pci_gpus=[],
        frameworks={"pytorch": frameworks.FrameworkInfo("pytorch", True, "2.9.1", details)},
    )


MI300X_TORCH = {
    "hip": "7.2.0",
    "gpu_available": True,
    "devices": [{"name": "AMD Instinct MI300X", "gfx": "gfx942", "memory_gib": 192.0}] * 8,
}


@pytest.mark.parametrize(
    "rccl, status, words",
    [
        (["/opt/rocm/lib/librccl.so.1"], "ok", "RCCL library: /opt/rocm/lib/librccl.so.1"),
        ([], "warn", "the nccl backend (RCCL on ROCm) will fail"),
    ],
)
def test_doctor_reports_what_distributed_training_uses(rccl, status, words):
    from rocm_dl_guide import doctor

    dist = {
        "available": True,
        "gloo": True,
        "nccl": True,
        "nccl_version": "2.26.6",
        "visible_env": {"HIP_VISIBLE_DEVICES": "0,1,2,3,4,5,6,7"},
        "rccl": rccl,
    }
    checks = doctor.distributed_checks(_torch_report({**MI300X_TORCH, "distributed": dist}))
    by_name = {c.name: c for c in checks}
    assert by_name["Distributed"].status == "ok"
    message = by_name["Distributed"].message
    assert "backends nccl, gloo" in message and "--nproc-per-node 8" in message
    assert "RCCL/NCCL 2.26.6" in message and "HIP_VISIBLE_DEVICES=0,1,2,3,4,5,6,7" in message
    assert by_name["RCCL"].status == status and words in by_name["RCCL"].message


def test_doctor_distributed_on_a_cpu_machine_and_without_torch_distributed():
    from rocm_dl_guide import doctor

    cpu = {
        "version": "2.14.1",
        "gpu_available": False,
        "devices": [],
        "distributed": {"available": True, "gloo": True, "nccl": False, "visible_env": {}},
    }
    (check,) = doctor.distributed_checks(_torch_report(cpu))
    assert check.status == "ok" and "gloo backend on the CPU" in check.message
    cpu["distributed"] = {"available": False}
    (check,) = doctor.distributed_checks(_torch_report(cpu))
    assert check.status == "warn" and "built without torch.distributed" in check.message


def test_checks_that_say_the_same_thing_are_one_line_with_their_count():
    """Eight CPX partitions of one MI300X are eight rocminfo agents with the same
    verdict: the text gives it once, with x8; each stays in the report's checks."""
    from rocm_dl_guide.doctor import report as doctor_report
    from rocm_dl_guide.doctor.rules import Check

    gpu = [
        Check("GPU AMD Instinct MI300X (gfx942)", doctor_report.OK, "supported", id=f"g{n}")
        for n in range(8)
    ]
    lines, _ = doctor_report._checks_text(
        [*gpu, Check("NUMA balancing", doctor_report.OK, "off")], 100
    )
    assert lines == [
        "  [ok]   GPU AMD Instinct MI300X (gfx942) (x8): supported",
        "  [ok]   NUMA balancing: off",
    ]
