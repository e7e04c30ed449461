import os
import subprocess
import sys

import pytest

from rocm_dl_guide.core import device


def test_describe_matches_torch():
    torch = pytest.importorskip("torch")
    info = device.describe()
    assert info.kind == ("cuda" if torch.cuda.is_available() else "cpu")
    if info.kind == "cpu":
        assert info.backend == "CPU" and info.count == 0 and info.gfx is None
        assert str(info) == f"CPU ({device.cpu_name()}, {os.cpu_count()} cores)"
    else:
        props = torch.cuda.get_device_properties(0)
        assert info.name == props.name and info.count == torch.cuda.device_count()
        assert str(info).startswith(f"GPU {props.name}") and info.backend in str(info)


def test_pick_cpu_and_demanding_a_missing_gpu(monkeypatch):
    pytest.importorskip("torch")
    assert device.pick("cpu").type == "cpu"
    monkeypatch.setattr(device, "gpu_available", lambda: False)
    assert device.pick().type == "cpu"
    with pytest.raises(RuntimeError, match="a GPU was requested but PyTorch sees none"):
        device.pick("cuda")


@pytest.mark.parametrize(
    "order",
    [
        ("tensorflow", "torchvision"),
        ("torchvision", "tensorflow"),
        ("tensorflow", "triton"),
    ],
    ids=["tf-then-torchvision", "torchvision-then-tf", "tf-then-triton"],
)
def test_frameworks_import_together_in_both_orders(order):
    """The CPU environment must let one process (a kernel, pytest, doctor) load both
    frameworks in either order. Without the venv's TensorFlow guard
    (zz-tensorflow-rtld-local.pth, see the Makefile's TF_GUARD), tf-then-torchvision
    and tf-then-triton segfault: torchvision imports torch._dynamo, which imports
    triton, whose LLVM binds to the one TensorFlow exported. triton is part of the
    environment (the kernels chapter runs it), so a missing one fails here."""
    import importlib.util

    for name in order:
        if importlib.util.find_spec(name) is None:
            pytest.fail(f"{name} is not installed in this environment (requirements.txt pins it)")
    code = (
        f"import {order[0]}, {order[1]}\n"
        "import torch, torchvision, triton, tensorflow as tf\n"
        "print(torch.__version__, torchvision.__version__, triton.__version__, tf.__version__)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"exit {proc.returncode}: {proc.stderr[-2000:]}"


def test_tensorflow_keeps_its_llvm_out_of_the_global_scope():
    """The guard itself, without loading triton: after ``import tensorflow`` the
    process's global symbol scope must not hold TensorFlow's LLVM (one of its
    symbols, ``llvm::DebugCounter::instance()``, is what libtriton's static
    constructors bound to and crashed on). True without the guard, False with it."""
    pytest.importorskip("tensorflow")
    code = (
        "import ctypes, tensorflow\n"
        "print(hasattr(ctypes.CDLL(None), '_ZN4llvm12DebugCounter8instanceEv'))\n"
    )
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env
    )
    assert proc.returncode == 0, f"exit {proc.returncode}: {proc.stderr[-2000:]}"
    assert proc.stdout.split()[-1] == "False", (
        "TensorFlow's LLVM is in the global symbol scope: the venv lacks "
        "zz-tensorflow-rtld-local.pth (make env writes it)"
    )


def test_the_instruction_set_cap_hides_the_flags_above_it(monkeypatch):
    """ATEN_CPU_CAPABILITY=avx2 (how a CPU with AVX-512 stands in for GitHub's
    AVX2-only runners) hides AVX-512, AMX and VNNI from the package's own flag
    reading, as it does from PyTorch's kernels; text passed in is read as it is."""
    text = "flags\t: sse2 avx avx2 fma f16c avx512f avx512_bf16 avx512_vnni amx_bf16 avx_vnni\n"
    monkeypatch.setattr(device, "open", _opener(text), raising=False)
    monkeypatch.delenv("ATEN_CPU_CAPABILITY", raising=False)
    assert {"avx512_bf16", "amx_bf16"} <= device.cpu_flags()
    assert device.cpu_has_native_bf16()
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "avx2")
    assert device.cpu_flags() == {"sse2", "avx", "avx2", "fma", "f16c"}
    assert not device.cpu_has_native_bf16()
    assert "(capped to avx2" in device.cpu_name()
    monkeypatch.setenv("ATEN_CPU_CAPABILITY", "default")
    assert device.cpu_flags() == {"sse2"}
    assert "avx512f" in device.cpu_flags(text)  # given text: no cap


def _opener(text):
    import io

    def fake_open(path, *args, **kwargs):
        assert path == "/proc/cpuinfo"
        return io.StringIO("model name\t: Test CPU\n" + text)

    return fake_open
