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
    [("tensorflow", "torchvision"), ("torchvision", "tensorflow")],
    ids=["tf-then-torchvision", "torchvision-then-tf"],
)
def test_frameworks_import_together_in_both_orders(order):
    """The CPU environment must let one process (a kernel, pytest, doctor) load both
    frameworks in either order; with triton installed, tf-then-torchvision segfaults."""
    import importlib.util

    for name in order:
        if importlib.util.find_spec(name) is None:
            pytest.skip(f"{name} is not installed in this environment")
    code = (
        f"import {order[0]}, {order[1]}\n"
        "import torch, torchvision, tensorflow as tf\n"
        "print(torch.__version__, torchvision.__version__, tf.__version__)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"exit {proc.returncode}: {proc.stderr[-2000:]}"
