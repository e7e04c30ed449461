"""Where the chapter's Triton kernels run: compiled for a GPU, or in Triton's interpreter.

Triton compiles a kernel for the GPU PyTorch sees (AMD through ROCm/HIP, or
NVIDIA). On a machine without one, Triton's interpreter runs the same kernel on
CPU tensors with NumPy, program after program, with the same semantics. It is
chosen by the environment variable ``TRITON_INTERPRET=1``, which ``triton.jit``
reads when it decorates a kernel. So this module, which every kernel module
imports before it defines a kernel, sets the variable where PyTorch sees no GPU
and it is not set already. A variable set by the reader wins either way.

Every figure the chapter prints says which engine produced it
(:func:`describe`). Interpreter timings measure NumPy on the CPU: they say
nothing about a GPU. Timing reuses the guide's one recipe
(:mod:`rocm_dl_guide.core.timing`: warm-up, then the median), and waits for the
GPU after each call where there is one.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rocm_dl_guide.core import device as devices
from rocm_dl_guide.core import timing

INTERPRET_VAR = "TRITON_INTERPRET"


class EngineError(RuntimeError):
    """Triton was imported in a state that cannot run the chapter's kernels here."""


if INTERPRET_VAR not in os.environ and not devices.gpu_available():
    # Before any @triton.jit of the chapter: without a GPU, the interpreter.
    os.environ[INTERPRET_VAR] = "1"

import torch  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402


def interpreted() -> bool:
    """Whether kernels defined from now on run in Triton's interpreter."""
    return os.environ.get(INTERPRET_VAR, "0").lower() in ("1", "true", "on", "yes")


def _check_language() -> None:
    """Triton's own library functions (``tl.max``, ``tl.sum``, ``tl.cdiv``) are
    kernels too, made when ``triton.language`` is first imported: where that
    happened before the interpreter was chosen (``import torchvision`` imports
    Triton through ``torch._dynamo``), they cannot run in it."""
    from triton.runtime.interpreter import InterpretedFunction

    if interpreted() and not isinstance(tl.max, InterpretedFunction):
        raise EngineError(
            "Triton was imported before its interpreter was chosen: import "
            "rocm_dl_guide.kernels first, or set TRITON_INTERPRET=1 before starting Python"
        )


_check_language()


@dataclass(frozen=True)
class Engine:
    """What runs the kernels here."""

    interpreted: bool
    device: str
    """``"cpu"`` (the interpreter) or ``"cuda"`` (ROCm/HIP or CUDA)."""
    name: str
    """The device's name: the CPU model, or the GPU's name."""
    hip: bool
    """PyTorch's ROCm build (``torch.version.hip`` is set)."""
    arch: str | None
    """The GPU's architecture: ``gfx942`` on ROCm, ``sm_90`` on CUDA."""
    triton: str

    def __str__(self) -> str:
        if self.interpreted:
            return f"Triton {self.triton} interpreter on the CPU ({self.name})"
        runtime = "ROCm/HIP" if self.hip else "CUDA"
        return f"Triton {self.triton} compiled for {self.name} ({self.arch}, {runtime})"

    def to_dict(self) -> dict[str, Any]:
        return {
            "engine": "interpreter" if self.interpreted else "compiled",
            "description": str(self),
            "device": self.device,
            "name": self.name,
            "hip": self.hip,
            "arch": self.arch,
            "triton": self.triton,
        }


def describe() -> Engine:
    """The engine in force: the interpreter on the CPU, or Triton compiled for the GPU."""
    info = devices.describe()
    hip = bool(getattr(torch.version, "hip", None))
    if interpreted() or info.kind != "cuda":
        cpu = f"{devices.cpu_name()}, {os.cpu_count() or 1} cores"
        return Engine(True, "cpu", cpu, hip, None, triton.__version__)
    major, minor = torch.cuda.get_device_capability(0)
    arch = info.gfx if hip else f"sm_{major}{minor}"
    return Engine(False, "cuda", info.name, hip, arch, triton.__version__)


def device() -> torch.device:
    """Where the kernels' tensors live: the GPU, or the CPU for the interpreter."""
    return torch.device(describe().device)


def synchronize(dev: torch.device) -> None:
    """Wait for the GPU's queued work (a no-op on the CPU)."""
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def time_side_by_side(
    fns: dict[str, Callable[[], Any]], dev: torch.device, warmup: int, iterations: int
) -> dict[str, float]:
    """Median milliseconds of each function, timed side by side after ``warmup``
    calls (:func:`rocm_dl_guide.core.timing.measure_side_by_side`); on a GPU each
    timed call includes waiting for the GPU to finish it."""

    def waited(fn: Callable[[], Any]) -> Callable[[], None]:
        def call() -> None:
            fn()
            synchronize(dev)

        return call

    timed = timing.measure_side_by_side(
        {name: waited(fn) for name, fn in fns.items()}, warmup, iterations
    )
    return {name: t.median_ms for name, t in timed.items()}


def interpreter_bench(warmup: int = 0, iterations: int = 1) -> Callable[..., Any]:
    """A ``do_bench`` for ``triton.autotune`` where there is no GPU: Triton's own
    times GPU events, which the interpreter has none of. The guide's recipe
    (:func:`rocm_dl_guide.core.timing.measure`) times each candidate instead."""

    def do_bench(fn: Callable[[], Any], quantiles: Any = None) -> Any:
        times = timing.measure(fn, warmup, iterations).times_ms
        if quantiles is None:
            return statistics.median(times)
        ordered = sorted(times)
        return [ordered[min(len(ordered) - 1, int(q * len(ordered)))] for q in quantiles]

    return do_bench


def significant(value: float, digits: int = 3) -> str:
    """``value`` with ``digits`` significant digits, trailing zeros kept, so that a
    column reads alike: 4.00, 1.80, 0.00170, 258; thousands separated from 1,000."""
    import math

    if value == 0 or not math.isfinite(value):
        return f"{value:g}"
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(value))))
    return f"{value:,.{decimals}f}"


class Significant:
    """A table format (``formats=`` of :func:`rocm_dl_guide.core.tables.show`) that
    prints a figure with :func:`significant`."""

    def __init__(self, digits: int = 3):
        self.digits = digits

    def format(self, value: float) -> str:
        return significant(value, self.digits)


def gb_per_s(nbytes: float, ms: float) -> float:
    """Bandwidth in GB/s (10^9 bytes per second) of ``nbytes`` moved in ``ms``."""
    return nbytes / (ms * 1e-3) / 1e9


def tflops(flops: float, ms: float) -> float:
    """TFLOP/s (10^12 floating-point operations per second) of ``flops`` in ``ms``."""
    return flops / (ms * 1e-3) / 1e12


def peak_tflops(engine: Engine) -> tuple[float, str] | None:
    """The GPU's peak dense 16-bit matrix throughput and its source, where the
    guide's table (``data/peak_matrix_throughput.json``) lists the device; ``None``
    on the CPU or for a device it does not list."""
    if engine.interpreted:
        return None
    entry = devices.peak_matrix_throughput(engine.name)
    return (entry["bf16_tflops"], entry["source"]) if entry else None


def peak_bandwidth(engine: Engine) -> tuple[float, str] | None:
    """The GPU's peak memory bandwidth in GB/s and its source, where the guide's
    table lists it; ``None`` on the CPU (the interpreter has no such figure) or
    for a device the table does not list."""
    if engine.interpreted:
        return None
    return devices.peak_memory_bandwidth(engine.name)
