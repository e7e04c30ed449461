"""The one device picker of the guide.

PyTorch's ROCm build uses the ``cuda`` device name (HIP underneath), so the
same code runs on AMD and NVIDIA GPUs; :func:`describe` tells which it is.
Nothing here imports a framework at module import time.
"""

from __future__ import annotations

import importlib.util
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PEAK_FILE = Path(__file__).parents[1] / "data" / "peak_matrix_throughput.json"
"""Peak dense 16-bit matrix throughput per device, from the vendors' product pages."""


def _have(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def gpu_available() -> bool:
    """True when PyTorch is installed and sees at least one GPU."""
    if not _have("torch"):
        return False
    import torch

    try:
        return bool(torch.cuda.is_available())
    except Exception:  # a broken driver stack must not crash a page
        return False


@dataclass(frozen=True)
class DeviceInfo:
    """What PyTorch will compute on."""

    kind: str
    """``"cuda"`` (a GPU, ROCm or CUDA build) or ``"cpu"``."""
    name: str
    """Human-readable device name, e.g. ``AMD Instinct MI210`` or the CPU model."""
    backend: str
    """``ROCm/HIP <version>``, ``CUDA <version>`` or ``CPU``."""
    gfx: str | None = None
    """The gfx target on ROCm builds (``gcnArchName``), else ``None``."""
    count: int = 0
    """Number of visible GPUs."""

    def __str__(self) -> str:
        if self.kind == "cpu":
            return f"CPU ({self.name})"
        arch = f", {self.gfx}" if self.gfx else ""
        many = f" x{self.count}" if self.count > 1 else ""
        return f"GPU {self.name}{many} ({self.backend}{arch})"


CAPABILITY_VARIABLE = "ATEN_CPU_CAPABILITY"
"""PyTorch's switch that caps the instruction set of its CPU kernels (``default``,
``avx2``, ``avx512``). Set to ``avx2`` or ``default`` (with oneDNN's
``ONEDNN_MAX_CPU_ISA=AVX2``), a CPU with AVX-512 behaves as far as the libraries
allow like one without, as GitHub's hosted runners are; :func:`cpu_flags` then
hides the flags above the cap too, so the package's own choices follow."""

_ABOVE_AVX2 = ("avx512", "amx", "avx_vnni", "avx_ne_convert", "avx_ifma", "avx10")
_ABOVE_DEFAULT = ("avx", "fma", "f16c") + _ABOVE_AVX2


def capability_cap() -> str | None:
    """The instruction-set cap in force (``"avx2"`` or ``"default"``), or ``None``."""
    cap = os.environ.get(CAPABILITY_VARIABLE, "").strip().lower()
    return cap if cap in ("avx2", "default") else None


def cpuinfo_text() -> str:
    """/proc/cpuinfo's text, or ``""`` where there is none (not Linux, or unreadable):
    the one place the guide reads it."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return ""


def cpu_name() -> str:
    """The CPU model name from /proc/cpuinfo, or the platform's processor string;
    with ``(capped to avx2)`` where :data:`CAPABILITY_VARIABLE` caps it, and
    ``; CPUID masked`` inside where :func:`cpuid_hides_avx512` too."""
    name = ""
    for line in cpuinfo_text().splitlines():
        if line.lower().startswith("model name"):
            name = line.split(":", 1)[1].strip()
            break
    if not name:
        import platform

        name = platform.processor() or platform.machine() or "unknown CPU"
    cap = capability_cap()
    if not cap:
        return name
    return f"{name} (capped to {cap}{'; CPUID masked' if cpuid_hides_avx512() else ''})"


def cpu_flags(cpuinfo: str | None = None) -> set[str]:
    """The CPU's feature flags from /proc/cpuinfo (``cpuinfo``: its text, read when
    not given; empty where there is none). Read from this machine, they leave out
    what :func:`capability_cap` hides."""
    hide: tuple[str, ...] = ()
    if cpuinfo is None:
        cap = capability_cap()
        hide = {"avx2": _ABOVE_AVX2, "default": _ABOVE_DEFAULT}.get(cap or "", ())
        cpuinfo = cpuinfo_text()
    for line in cpuinfo.splitlines():
        if line.lower().startswith(("flags", "features")):
            return {f for f in line.split(":", 1)[1].split() if not f.startswith(hide)}
    return set()


def cpuid_hides_avx512() -> bool:
    """Whether the CPUID instruction hides AVX-512 that /proc/cpuinfo lists.

    That is the case under ``make test-slow`` and ``make book-slow``, whose CPUID
    mask (``tests/slowcpu/avx2_only.c``) makes the libraries that ask the
    processor themselves (ONNX Runtime's MLAS, NumPy, bitsandbytes) take their
    AVX2 paths too, as on a CPU without AVX-512. CPUID is read through NumPy's
    runtime dispatch, which asks the instruction at import."""
    if "avx512f" not in cpu_flags(cpuinfo_text()):
        return False
    try:
        from numpy._core._multiarray_umath import __cpu_features__ as features
    except ImportError:  # NumPy 1.x
        try:
            from numpy.core._multiarray_umath import __cpu_features__ as features
        except ImportError:
            return False
    return not features.get("AVX512F", True)


def cpu_has_native_bf16(flags: set[str] | None = None) -> bool:
    """Whether the CPU computes bfloat16 in hardware (AVX512-BF16 or AMX-BF16).

    Without either, PyTorch emulates bfloat16 on the CPU, and autocast runs many
    times slower than float32.
    """
    flags = cpu_flags() if flags is None else flags
    return bool(flags & {"avx512_bf16", "amx_bf16"})


def peak_matrix_throughput(name: str) -> dict[str, Any] | None:
    """The entry of :data:`PEAK_FILE` for a device name (``bf16_tflops``,
    ``memory_gb_per_s``, its ``name`` and ``source``): the first whose every
    ``match`` word occurs in ``name``, case-insensitive; ``None`` for a device
    the table does not list."""
    table = json.loads(PEAK_FILE.read_text(encoding="utf-8"))["devices"]
    lowered = name.lower()
    for entry in table:
        if all(word.lower() in lowered for word in entry["match"]):
            return entry
    return None


def peak_memory_bandwidth(name: str) -> tuple[float, str] | None:
    """The device's peak memory bandwidth in GB/s and the page that gives it,
    from :func:`peak_matrix_throughput`'s entry; ``None`` for a device the table
    does not list or lists without a bandwidth."""
    entry = peak_matrix_throughput(name)
    if not entry or entry.get("memory_gb_per_s") is None:
        return None
    return float(entry["memory_gb_per_s"]), entry.get("bandwidth_source", entry["source"])


def describe() -> DeviceInfo:
    """Describe the device that :func:`pick` returns, without failing."""
    cores = os.cpu_count() or 1
    cpu = DeviceInfo(kind="cpu", name=f"{cpu_name()}, {cores} cores", backend="CPU")
    if not gpu_available():
        return cpu
    import torch

    try:
        props = torch.cuda.get_device_properties(0)
        hip = getattr(torch.version, "hip", None)
        backend = f"ROCm/HIP {hip}" if hip else f"CUDA {torch.version.cuda}"
        gfx = getattr(props, "gcnArchName", None) if hip else None
        return DeviceInfo(
            kind="cuda",
            name=props.name,
            backend=backend,
            gfx=gfx.split(":")[0] if gfx else None,
            count=torch.cuda.device_count(),
        )
    except Exception:
        return cpu


def pick(prefer: str | None = None):
    """Return a ``torch.device``: the first GPU when present, else the CPU.

    ``prefer="cpu"`` forces the CPU; ``prefer="cuda"`` demands a GPU and
    raises a clear error when there is none.
    """
    import torch

    if prefer == "cpu":
        return torch.device("cpu")
    if gpu_available():
        return torch.device("cuda")
    if prefer in ("cuda", "gpu"):
        raise RuntimeError(
            "a GPU was requested but PyTorch sees none; run "
            "`python -m rocm_dl_guide doctor` to find out why"
        )
    return torch.device("cpu")


def import_tensorflow():
    """Import TensorFlow quietly and return it.

    TensorFlow's native libraries print start-up lines (absl's "All log messages
    before absl::InitializeLog()", oneDNN notices) straight to file descriptor 2
    while the module loads, whatever ``TF_CPP_MIN_LOG_LEVEL`` says; in a notebook
    they land in the page. They are silenced for the import only: Python
    exceptions still propagate, and later warnings show as usual.
    """
    import sys

    if "tensorflow" in sys.modules:
        return sys.modules["tensorflow"]
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as devnull:
            os.dup2(devnull.fileno(), 2)
            try:
                import tensorflow as tf
            finally:
                os.dup2(saved, 2)
    finally:
        os.close(saved)
    return tf


def fused_optimizer_supported(device) -> bool:
    """Whether this PyTorch has the optimizers' fused kernels (SGD, Adam, AdamW) for
    ``device``: the devices in its list of fused kernels (CUDA and ROCm GPUs; the
    CPU too in recent releases)."""
    import inspect

    import torch

    if "fused" not in inspect.signature(torch.optim.SGD).parameters:
        return False
    try:
        from torch.utils._foreach_utils import _get_fused_kernels_supported_devices
    except ImportError:  # pragma: no cover - a PyTorch without the list
        return False
    return torch.device(device).type in _get_fused_kernels_supported_devices()
