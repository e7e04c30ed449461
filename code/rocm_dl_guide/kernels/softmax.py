"""A fused row softmax, against PyTorch's unfused operators, ``torch.softmax`` and
``torch.compile``.

Softmax is memory-bound: it does a few operations per element, so its time is
the time to move the elements. Written as separate PyTorch operators
(:func:`unfused`), each operator is a pass over memory: five reads and three
writes of the matrix. The fused kernel (:func:`softmax_kernel`) keeps one row
in registers: one read and one write. :func:`bytes_moved` counts both, and
:func:`measure` times the four versions side by side and reports the bandwidth
each achieved on the ideal two passes (the figure Triton's tutorial plots).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from typing import Any

import torch
import triton
import triton.language as tl

from rocm_dl_guide.core import plots
from rocm_dl_guide.kernels import engine

SHAPES = {"smoke": ((64, 1000), (128, 781)), "gpu": ((4096, 4096), (8192, 8192))}
"""(rows, columns) the page and ``bench kernels`` measure per profile (``full``
takes ``gpu``'s): small on the interpreter, as Triton's tutorial on a GPU."""
PASSES = {"unfused": 8, "fused": 2}
"""Passes over the matrix: unfused, max (read), subtract (read, write), exp (read,
write), sum (read), divide (read, write); fused, one read and one write."""
TOLERANCE = {torch.float32: 1e-6, torch.float16: 2e-3, torch.bfloat16: 1e-2}
"""Largest absolute difference from ``torch.softmax`` that counts as agreeing
(probabilities are at most 1)."""


@triton.jit
def softmax_kernel(
    out_ptr, in_ptr, in_row_stride, out_row_stride, n_cols, BLOCK_SIZE: tl.constexpr
):
    row = tl.program_id(0)  # one program per row
    cols = tl.arange(0, BLOCK_SIZE)  # BLOCK_SIZE: the row length rounded up to a power of 2
    mask = cols < n_cols
    x = tl.load(in_ptr + row * in_row_stride + cols, mask=mask, other=-float("inf"))
    x = x.to(tl.float32)
    z = x - tl.max(x, axis=0)  # subtract the maximum: exp cannot overflow
    num = tl.exp(z)
    y = num / tl.sum(num, axis=0)
    tl.store(out_ptr + row * out_row_stride + cols, y.to(out_ptr.dtype.element_ty), mask=mask)


def softmax(x: torch.Tensor) -> torch.Tensor:
    """Softmax over the last dimension of a 2-D tensor, one program per row."""
    rows, cols = x.shape
    out = torch.empty_like(x)
    block = triton.next_power_of_2(cols)
    num_warps = 4 if block <= 2048 else 8 if block <= 8192 else 16
    softmax_kernel[(rows,)](
        out, x, x.stride(0), out.stride(0), cols, BLOCK_SIZE=block, num_warps=num_warps
    )
    return out


def unfused(x: torch.Tensor) -> torch.Tensor:
    """Softmax as separate PyTorch operators: each one a pass over memory."""
    z = x - x.max(dim=1, keepdim=True).values
    num = torch.exp(z)
    return num / num.sum(dim=1, keepdim=True)


def reference(x: torch.Tensor) -> torch.Tensor:
    """PyTorch's own softmax: one fused kernel."""
    return torch.softmax(x, dim=1)


def bytes_moved(rows: int, cols: int, dtype: torch.dtype, passes: int = PASSES["fused"]) -> int:
    """Bytes a softmax over ``rows x cols`` moves in ``passes`` passes over the matrix."""
    return passes * rows * cols * torch.tensor([], dtype=dtype).element_size()


@contextlib.contextmanager
def quiet_compile() -> Iterator[None]:
    """Inductor on a CPU-only build logs that it found no CUDA runtime when it
    first looks for a compiler: nothing to do with a CPU compile, not shown."""
    note = logging.getLogger("torch.utils.cpp_extension")
    level = note.level
    note.setLevel(logging.ERROR)
    try:
        yield
    finally:
        note.setLevel(level)


def compiled() -> Callable[[torch.Tensor], torch.Tensor]:
    """``torch.compile`` of :func:`unfused`: Inductor fuses it into one kernel
    (Triton on a GPU, C++ on a CPU)."""
    return torch.compile(unfused, dynamic=False)


def generated_code(x: torch.Tensor) -> tuple[str, str]:
    """The kernel Inductor writes for :func:`unfused` on ``x``'s device: its
    language (``Triton`` or ``C++``) and its source, as Inductor's output code
    holds it (``TORCH_LOGS=output_code`` prints the same)."""
    from torch._inductor.utils import run_and_get_code

    torch._dynamo.reset()
    with quiet_compile():
        _, sources = run_and_get_code(torch.compile(unfused, dynamic=False), x)
    code = "\n".join(sources)
    if "@triton.jit" in code:
        start = code.rindex("@triton.jit", 0, code.index("def triton_"))
        end = code.index("''', device_str=", start) if "''', device_str=" in code else len(code)
        return "Triton", code[start:end].rstrip()
    start = code.index("cpp_fused")
    start = code.rindex("\n", 0, code.index('extern "C"', start)) + 1
    end = code.index("''')", start) if "''')" in code[start:] else len(code)
    return "C++", code[start:end].rstrip()


@dataclass
class Row:
    """One version of softmax at one shape."""

    version: str
    rows: int
    cols: int
    dtype: str
    ms: float
    gb_per_s: float
    """Effective bandwidth: the two passes a fused kernel must make (one read, one
    write of the matrix) over the time, whatever this version really moved."""
    max_abs_diff: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


VERSIONS = ("unfused PyTorch", "torch.softmax", "torch.compile", "Triton kernel")
"""The four versions the page compares, by the names its table uses."""


def versions() -> dict[str, Callable[[torch.Tensor], torch.Tensor]]:
    """:data:`VERSIONS` and their functions."""
    return dict(zip(VERSIONS, (unfused, reference, compiled(), softmax), strict=True))


def measure(shapes, dev: torch.device, dtype: torch.dtype, warmup: int = 1,
            iterations: int = 5) -> list[Row]:  # fmt: skip
    """Each version at each shape: median time side by side after warm-up, the
    bandwidth it achieved, and its largest difference from ``torch.softmax``."""
    rows: list[Row] = []
    fns = versions()
    for n_rows, n_cols in shapes:
        g = torch.Generator().manual_seed(n_rows * n_cols)
        x = (3 * torch.randn(n_rows, n_cols, generator=g)).to(dev, dtype)
        expected = reference(x).float()
        with quiet_compile():
            diffs = {v: float((fn(x).float() - expected).abs().max()) for v, fn in fns.items()}
            ms = engine.time_side_by_side(
                {v: (lambda fn=fn, x=x: fn(x)) for v, fn in fns.items()}, dev, warmup, iterations
            )
        ideal = bytes_moved(n_rows, n_cols, dtype)
        for v in fns:
            rows.append(Row(v, n_rows, n_cols, str(dtype).replace("torch.", ""), ms[v],
                            engine.gb_per_s(ideal, ms[v]), diffs[v]))  # fmt: skip
    return rows


def agree(rows: list[Row], dtype: torch.dtype) -> bool:
    """Every version within :data:`TOLERANCE` of ``torch.softmax``."""
    return all(r.max_abs_diff <= TOLERANCE[dtype] for r in rows)


def plot(rows: list[Row], engine_name: str):
    """Effective bandwidth of each version at each shape, on a logarithmic axis."""
    import matplotlib.pyplot as plt

    shapes = sorted({(r.rows, r.cols) for r in rows})
    fig, ax = plt.subplots(figsize=(7.5, 3.4))
    speed = {(r.version, r.rows, r.cols): r.gb_per_s for r in rows}
    plots.grouped_bars(ax, [f"{r} x {c}" for r, c in shapes],
                       {v: [speed[v, r, c] for r, c in shapes] for v in VERSIONS})  # fmt: skip
    ax.set_xlabel("rows x columns")
    ax.set_yscale("log")
    ax.set_ylabel("effective bandwidth (GB/s)")
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1))  # beside the bars
    ax.set_title(f"Row softmax, {rows[0].dtype}, {engine_name}", fontsize="medium")
    fig.tight_layout()
    return fig


def bandwidth_reading(rows: list[Row], eng: engine.Engine, recorded: dict | None) -> str:
    """The Triton kernel's effective GB/s at the largest shape against the device's
    peak memory bandwidth, in words. Compiled for a GPU: this run's figure, as a
    fraction of the peak where the guide's table lists the device. On the
    interpreter: that a CPU has no such figure, then the last GPU record's
    (``recorded``, from :func:`rocm_dl_guide.kernels.bench.recorded`), labelled as
    the record's, or that it comes with the next GPU record."""
    ours = next(r for r in reversed(rows) if r.version == "Triton kernel")
    if not eng.interpreted:
        text = (
            f"At {ours.rows:,} x {ours.cols:,} the Triton kernel reached {ours.gb_per_s:,.0f} GB/s"
        )
        peak = engine.peak_bandwidth(eng)
        if not peak:
            return text + ". This guide's table gives no memory bandwidth for this GPU."
        return (
            text + f", {ours.gb_per_s / peak[0]:.0%} of the {peak[0]:,.0f} GB/s peak of {eng.name}."
        )
    text = (
        "Here the kernel ran in Triton's interpreter, so its GB/s measure NumPy on the "
        "CPU: a CPU run has no fraction of a GPU's memory bandwidth to show."
    )
    if not recorded:
        return text + " No GPU record holds one yet; make gpu-check --record writes it."
    shape = " x ".join(f"{n:,}" for n in SHAPES["gpu"][-1])
    where = f"The last GPU record, made {recorded.get('where') or 'on ' + recorded['device']}"
    where += f" on {recorded['date']},"
    if "fraction_of_bandwidth" in recorded:
        return text + (
            f" {where} has the Triton kernel at {shape} at {recorded['gb_per_s']:,.0f} GB/s, "
            f"{recorded['fraction_of_bandwidth']:.0%} of that GPU's "
            f"{recorded['peak_gb_per_s']:,.0f} GB/s peak."
        )
    if "gb_per_s" in recorded:
        return text + (
            f" {where} has the Triton kernel at {shape} at {recorded['gb_per_s']:,.0f} GB/s; "
            "this guide's table gives no memory bandwidth for that GPU."
        )
    return text + (
        f" {where} holds only the two ratios above, not the kernel's GB/s. "
        "A new GPU run of make gpu-check --record measures both."
    )


TABLE_FORMATS = {"ms": "{:.3f}", "GB/s": engine.Significant(3), "max diff": "{:.1e}"}
"""How the page's table prints each figure column: GB/s with three significant digits."""

INTERPRETED = "Triton kernel (interpreter: correctness only, not speed)"
"""The Triton kernel's row on a build where it ran in Triton's interpreter."""


def table(rows: list[Row], interpreted: bool = False) -> list[dict[str, Any]]:
    """The rows as the page shows them: one shape column and short headers; where
    the kernel ran ``interpreted``, its row says that its time is no speed."""
    return [
        {
            "version": INTERPRETED if interpreted and r.version == "Triton kernel" else r.version,
            "rows x columns": f"{r.rows} x {r.cols}",
            "ms": r.ms,
            "GB/s": r.gb_per_s,
            "max diff": r.max_abs_diff,
        }
        for r in rows
    ]
