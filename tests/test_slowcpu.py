"""`make test-slow`'s CPUID mask (tests/slowcpu/avx2_only.c): preloaded into a
python process on a CPU with AVX-512 and CPUID faulting, it hides AVX-512 from
every library that asks the processor, and changes nothing else."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rocm_dl_guide.core import device

SOURCE = Path(__file__).parent / "slowcpu" / "avx2_only.c"

PROBE = """
from numpy._core._multiarray_umath import __cpu_features__ as f
import torch
from rocm_dl_guide.core import device
print(f["AVX512F"], f["AVX512VNNI"], f["AVX2"], torch.backends.cpu.get_cpu_capability(),
      device.cpuid_hides_avx512())
"""


def _flags() -> set[str]:
    """Every flag /proc/cpuinfo lists, whatever cap the environment sets."""
    return device.cpu_flags(device.cpuinfo_text())


@pytest.fixture(scope="module")
def mask(tmp_path_factory) -> Path:
    flags = _flags()
    if "cpuid_fault" not in flags:
        pytest.skip("this CPU or hypervisor offers no CPUID faulting")
    if "avx512f" not in flags:
        pytest.skip("this CPU has no AVX-512 to hide")
    cc = shutil.which(os.environ.get("CC", "cc"))
    if cc is None:
        pytest.skip("no C compiler")
    out = tmp_path_factory.mktemp("slowcpu") / "avx2_only.so"
    subprocess.run(
        [cc, "-O2", "-Wall", "-Werror", "-shared", "-fPIC", "-o", str(out), str(SOURCE), "-ldl"],
        check=True,
        timeout=120,
    )
    return out


def _python(code: str, preload: Path | None) -> subprocess.CompletedProcess:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("LD_PRELOAD", "ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA")
    }
    if preload is not None:
        env["LD_PRELOAD"] = str(preload)
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )


def test_the_mask_hides_avx512_from_cpuid_and_the_libraries_follow(mask):
    plain = _python(PROBE, None)
    masked = _python(PROBE, mask)
    assert plain.returncode == 0 and masked.returncode == 0, plain.stderr + masked.stderr
    assert plain.stdout.split() == ["True", "True", "True", "AVX512", "False"]
    # NumPy's dispatch and PyTorch's cpuinfo ask CPUID: both now see AVX2 only,
    # with no environment switch set, and the package knows the mask is on.
    assert masked.stdout.split() == ["False", "False", "True", "AVX2", "True"]


def test_a_real_segfault_still_reaches_pythons_own_handler(mask):
    crash = "import ctypes, faulthandler; faulthandler.enable(); ctypes.string_at(0)"
    result = _python(crash, mask)
    assert result.returncode == -11
    assert "Fatal Python error: Segmentation fault" in result.stderr
    assert "string_at" in result.stderr  # faulthandler's traceback, as without the mask


@pytest.mark.parametrize("target", ["test", "check", "test-slow", "book-slow"])
def test_make_targets_stop_at_a_crashed_worker_and_slow_runs_keep_their_own_cache(target):
    """pytest-xdist requeues a crashed worker's finished groups and the run then
    waits forever (pytest-dev/pytest-xdist#1378): every test target passes
    --max-worker-restart=0 so a crash ends the run with its report. Inductor's
    on-disk cache does not key its kernels on ATEN_CPU_CAPABILITY (a kernel
    compiled without the cap and reused under it gave wrong values): the slow
    targets compile into a cache of their own."""
    root = Path(__file__).resolve().parent.parent
    # Under a make (make test-slow runs this), MAKEFLAGS would make this one
    # print "make[1]: Entering directory": the recipe alone, please.
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    shown = subprocess.run(
        ["make", "--no-print-directory", "-n", target],
        cwd=root, capture_output=True, text=True, check=True, env=env,
    ).stdout  # fmt: skip
    lines = [line for line in shown.splitlines() if "-m pytest" in line or "jupyter-book" in line]
    command = lines[-1]
    if target != "book-slow":
        assert "-m pytest" in command and "--max-worker-restart=0" in command, command
    slow = target.endswith("-slow")
    assert ("TORCHINDUCTOR_CACHE_DIR=" in command) == slow, command
    if slow:
        cache = command.split('TORCHINDUCTOR_CACHE_DIR="', 1)[1].split('"')[0]
        assert cache.endswith("_avx2"), cache
        assert "ATEN_CPU_CAPABILITY=avx2" in command and "LD_PRELOAD=" in command, command
