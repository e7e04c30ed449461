"""``make gpu-check``'s first step: is there a GPU PyTorch can use?

It runs in whatever Python the reader points ``make gpu-check`` at, before the
selfcheck's environment exists: a container's system Python, with PyTorch or
without it. So this module needs nothing but the standard library, and PyTorch
where PyTorch is installed; it imports no other module of the package
(``tests/test_selfcheck.py`` runs it in a Python with only the standard library).

``python -m rocm_dl_guide.core.preflight --gpu`` exits 0 with the GPU's name on
stderr, or 3 with one line that says why there is no GPU to check.
"""

from __future__ import annotations

import sys

NO_GPU_EXIT = 3
"""The exit code of a refusal (the ``selfcheck`` command uses the same)."""


class NoGPUError(RuntimeError):
    """A GPU was asked for and this Python's PyTorch sees none (or has no PyTorch)."""


def check(gpu: bool):
    """The device to check: the GPU (``gpu``; :class:`NoGPUError` when PyTorch sees
    none, with the likely reason) or the CPU."""
    try:
        import torch
    except ImportError:
        raise NoGPUError(
            f"no GPU usable: this Python ({sys.executable}) has no PyTorch; run inside AMD's "
            "rocm/pytorch container, or point PYTHON at a Python with a ROCm PyTorch"
        ) from None
    if not gpu:
        return torch.device("cpu")
    if torch.cuda.is_available() and torch.cuda.device_count() > 0:
        return torch.device("cuda")
    hip, cuda = getattr(torch.version, "hip", None), torch.version.cuda
    build = f"ROCm/HIP {hip}" if hip else f"CUDA {cuda}" if cuda else "CPU-only"
    why = (
        "this is a CPU-only build of PyTorch: install a ROCm build (see the guide's "
        "PyTorch page) or run inside AMD's rocm/pytorch container"
        if build == "CPU-only"
        else "the build has GPU support but no GPU is visible (driver, /dev/kfd and "
        "/dev/dri permissions, HIP_VISIBLE_DEVICES): run `python -m rocm_dl_guide doctor`"
    )
    raise NoGPUError(f"no GPU: PyTorch {torch.__version__} ({build} build) sees no GPU; {why}")


def device_name(device) -> str:
    """The GPU's name as PyTorch reports it, or ``CPU``."""
    if device.type != "cuda":
        return "CPU"
    import torch

    return torch.cuda.get_device_name(0)


def main(argv: list[str] | None = None) -> int:
    """``python -m rocm_dl_guide.core.preflight [--gpu]``: exit 0 with the device's name
    on stderr, :data:`NO_GPU_EXIT` with one line saying why there is no GPU, or 2
    for any other argument. (Only the command line builds argparse parsers; this
    takes one flag and must run before the command line's dependencies exist.)"""
    args = sys.argv[1:] if argv is None else list(argv)
    if any(a != "--gpu" for a in args):
        print("usage: python -m rocm_dl_guide.core.preflight [--gpu]", file=sys.stderr)
        return 2
    gpu = "--gpu" in args
    command = "selfcheck --gpu" if gpu else "selfcheck"
    try:
        device = check(gpu)
    except NoGPUError as exc:
        print(f"{command}: {exc}", file=sys.stderr)
        return NO_GPU_EXIT
    print(f"{command}: {device_name(device)} is usable", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
