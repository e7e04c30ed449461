"""A tiled matrix multiplication in Triton, autotuned, against ``torch.matmul``.

Each program computes one ``BLOCK_M x BLOCK_N`` tile of ``C = A @ B``. It walks
along K one ``BLOCK_K`` slice at a time, loads a tile of A and one of B, and
accumulates their product with ``tl.dot`` in float32 (on AMD Instinct GPUs,
``tl.dot`` becomes MFMA matrix instructions). Programs are ordered in groups of
``GROUP_M`` tile rows, so that programs running at the same time share tiles of
B in the cache.

:func:`configs` lists the block sizes :data:`tuned_kernel` tries. Where
``torch.version.hip`` is set, they also carry AMD's compiler knobs
(``waves_per_eu``, ``matrix_instr_nonkdim``, ``kpack``; AMD's guide to
optimising Triton kernels); elsewhere those names would reach the kernel as
unknown arguments. Matrix multiplication is compute-bound: :func:`measure`
reports TFLOP/s (``2 M N K`` operations per product) and, on a GPU the guide's
table lists, the fraction of the device's peak.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import torch
import triton
import triton.language as tl

from rocm_dl_guide.core import plots
from rocm_dl_guide.kernels import engine

SHAPES = {
    "smoke": ((128, 128, 128), (100, 72, 136)),
    "gpu": ((4096, 4096, 4096), (8192, 8192, 8192)),
}
"""(M, N, K) the page and ``bench kernels`` measure per profile (``full`` takes
``gpu``'s): the interpreter needs seconds for a 256-cube."""
TOLERANCE = {torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 3e-2}
"""Largest difference from ``torch.matmul`` relative to the largest output that
counts as agreeing (float32 accumulation in both), where ``tl.dot`` multiplies
float32 tiles in full precision; :func:`tolerance` gives the one in force."""
INTERPRETER_DTYPES = (torch.float32, torch.float16)
"""What the interpreter multiplies correctly: it computes ``tl.dot`` with NumPy,
which has no bfloat16 (bfloat16 products come out wrong there, not on a GPU)."""


@triton.jit
def matmul_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    M,
    N,
    K,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    stride_cm,
    stride_cn,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
):
    # Which tile of C: programs go down GROUP_M tile rows before the next column.
    pid = tl.program_id(0)
    tiles_m, tiles_n = tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N)
    first_m = (pid // (GROUP_M * tiles_n)) * GROUP_M
    group_rows = min(tiles_m - first_m, GROUP_M)
    pid_m = first_m + (pid % (GROUP_M * tiles_n)) % group_rows
    pid_n = (pid % (GROUP_M * tiles_n)) // group_rows
    # The tile's rows and columns; past the edge they wrap (% M): the loads stay
    # in bounds, and the store below masks them out.
    rm = (pid_m * BLOCK_M + tl.arange(0, BLOCK_M)) % M
    rn = (pid_n * BLOCK_N + tl.arange(0, BLOCK_N)) % N
    rk = tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + rm[:, None] * stride_am + rk[None, :] * stride_ak
    b_ptrs = b_ptr + rk[:, None] * stride_bk + rn[None, :] * stride_bn
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):  # the K loop
        k_left = K - k * BLOCK_K  # the last slice may be partial: mask it to zero
        a = tl.load(a_ptrs, mask=rk[None, :] < k_left, other=0.0)
        b = tl.load(b_ptrs, mask=rk[:, None] < k_left, other=0.0)
        acc = tl.dot(a, b, acc)  # MFMA instructions on AMD Instinct GPUs
        a_ptrs += BLOCK_K * stride_ak
        b_ptrs += BLOCK_K * stride_bk
    cm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    c_ptrs = c_ptr + cm[:, None] * stride_cm + cn[None, :] * stride_cn
    tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=(cm[:, None] < M) & (cn[None, :] < N))


def amd_knobs(arch: str | None) -> list[dict[str, int]]:
    """AMD's extra knobs, for CDNA GPUs (gfx9: MI200, MI300, MI350), else none:
    ``waves_per_eu``, the wavefronts per SIMD the compiler budgets registers for;
    ``matrix_instr_nonkdim``, the MFMA instruction's size (16: 16x16); ``kpack``,
    elements packed per load along K (MI300, gfx94x; ignored from gfx950)."""
    if not arch or not arch.startswith("gfx9"):
        return [{}]
    packed = {"kpack": 2} if arch.startswith("gfx94") else {}
    return [{"waves_per_eu": 2}, {"waves_per_eu": 2, "matrix_instr_nonkdim": 16, **packed}]


def configs(eng: engine.Engine | None = None) -> list[triton.Config]:
    """The candidates :data:`tuned_kernel` times: two small tiles on the interpreter
    (its time grows with the number of programs); on a GPU, tiles of 64 to 256
    with the stage and warp counts Triton's tutorial uses, and AMD's knobs on
    ROCm."""
    eng = eng or engine.describe()
    if eng.interpreted:
        return [
            triton.Config({"BLOCK_M": b, "BLOCK_N": b, "BLOCK_K": 32, "GROUP_M": 4})
            for b in (32, 64)
        ]
    tiles = [
        (256, 256, 64, 8),
        (128, 256, 64, 8),
        (256, 128, 64, 8),
        (128, 128, 64, 4),
        (128, 128, 32, 8),
        (64, 128, 64, 4),
    ]
    stages = 2 if eng.hip else 3  # AMD's guide: 2 for a single GEMM
    found = []
    for bm, bn, bk, warps in tiles:
        for knobs in amd_knobs(eng.arch) if eng.hip else [{}]:
            meta = {"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk, "GROUP_M": 8, **knobs}
            found.append(triton.Config(meta, num_warps=warps, num_stages=stages))
    return found


tuned_kernel = triton.autotune(
    configs=configs(),
    key=["M", "N", "K"],  # tune again for each new shape (and dtype)
    do_bench=engine.interpreter_bench() if engine.interpreted() else None,
)(matmul_kernel)
""":func:`matmul_kernel` with Triton's autotuner: the first call at a shape runs
every config of :func:`configs` and keeps the fastest for that shape."""


def fp32_dot(eng: engine.Engine | None = None) -> str:
    """How ``tl.dot`` multiplies float32 tiles by default (Triton's
    ``input_precision``), read from the backend's own options: ``"ieee"`` (full
    float32) on AMD's, ``"tf32"`` on NVIDIA's, which rounds the inputs to TF32's
    10-bit mantissa first; the interpreter multiplies with NumPy, in float32."""
    eng = eng or engine.describe()
    if eng.interpreted:
        return "ieee"
    if eng.hip:
        from triton.backends.amd.compiler import HIPOptions as Options
    else:
        from triton.backends.nvidia.compiler import CUDAOptions as Options
    return Options.default_dot_input_precision


def tolerance(dtype: torch.dtype, eng: engine.Engine | None = None) -> float:
    """The agreement :func:`agree` asks of ``dtype``: :data:`TOLERANCE`'s, except
    float32 under TF32, whose inputs keep float16's 10 mantissa bits and so get
    float16's tolerance."""
    if dtype == torch.float32 and fp32_dot(eng) == "tf32":
        return TOLERANCE[torch.float16]
    return TOLERANCE[dtype]


def matmul(a: torch.Tensor, b: torch.Tensor, **meta: int) -> torch.Tensor:
    """``a @ b`` with the Triton kernel: with ``meta`` (``BLOCK_M=...``) at those
    block sizes, else autotuned."""
    (M, K), (_, N) = a.shape, b.shape
    c = torch.empty((M, N), device=a.device, dtype=a.dtype)

    def grid(meta):
        return (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)

    kernel = matmul_kernel if meta else tuned_kernel
    strides = (a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0), c.stride(1))
    kernel[grid](a, b, c, M, N, K, *strides, **meta)
    return c


def flops(M: int, N: int, K: int) -> int:
    """Floating-point operations of one product: a multiply and an add per term."""
    return 2 * M * N * K


def inputs(M: int, N: int, K: int, dtype: torch.dtype, dev: torch.device | str = "cpu"):
    """Seeded random A (M x K) and B (K x N), scaled so that C's entries are about 1."""
    g = torch.Generator().manual_seed(M * 7 + N * 3 + K)
    a = torch.randn(M, K, generator=g) / K**0.25
    b = torch.randn(K, N, generator=g) / K**0.25
    return a.to(dev, dtype), b.to(dev, dtype)


def relative_error(got: torch.Tensor, expected: torch.Tensor) -> float:
    """Largest difference relative to the largest entry of ``expected``."""
    expected = expected.float()
    return float((got.float() - expected).abs().max() / expected.abs().max().clamp_min(1e-30))


def tuning_table() -> list[dict[str, Any]]:
    """What the autotuner timed at the last new shape: each config's block sizes and
    knobs with its median milliseconds, fastest first."""
    timings = getattr(tuned_kernel, "configs_timings", None) or {}
    rows = []
    for config, times in timings.items():
        median = times[0] if isinstance(times, (list, tuple)) else times
        rows.append({**config.kwargs, "num_warps": config.num_warps, "ms": float(median)})
    return sorted(rows, key=lambda r: r["ms"])


def blas_library(eng: engine.Engine) -> str:
    """What ``torch.matmul`` calls on this engine's device."""
    if eng.interpreted:
        return "PyTorch's CPU BLAS"
    return "hipBLASLt/rocBLAS" if eng.hip else "cuBLAS/cuBLASLt"


@dataclass
class Row:
    """One engine's product at one shape."""

    version: str
    M: int
    N: int
    K: int
    dtype: str
    ms: float
    tflops: float
    fraction_of_peak: float | None
    relative_error: float
    config: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def measure(shapes, dev: torch.device, dtype: torch.dtype, warmup: int = 1,
            iterations: int = 3) -> list[Row]:  # fmt: skip
    """At each shape: autotune the Triton kernel, then time it and ``torch.matmul``
    side by side; their TFLOP/s, the fraction of the device's peak, and the
    largest difference from ``torch.matmul`` in float32 relative to C's largest entry."""
    eng = engine.describe()
    peak = engine.peak_tflops(eng)
    rows = []
    for M, N, K in shapes:
        a, b = inputs(M, N, K, dtype, dev)
        expected = torch.matmul(a.float(), b.float())
        got = {"Triton kernel": matmul(a, b), "torch.matmul": torch.matmul(a, b)}
        best = tuned_kernel.best_config.kwargs
        ms = engine.time_side_by_side(
            {"Triton kernel": lambda a=a, b=b: matmul(a, b),
             "torch.matmul": lambda a=a, b=b: torch.matmul(a, b)},
            dev, warmup, iterations,
        )  # fmt: skip
        for version, out in got.items():
            rate = engine.tflops(flops(M, N, K), ms[version])
            used = " ".join(f"{k}={v}" for k, v in best.items())
            rows.append(Row(version, M, N, K, str(dtype).replace("torch.", ""), ms[version], rate,
                            rate / peak[0] if peak else None, relative_error(out, expected),
                            used if version == "Triton kernel" else blas_library(eng)))  # fmt: skip
    return rows


def agree(rows: list[Row], dtype: torch.dtype) -> bool:
    """Every product within :func:`tolerance` of float32 ``torch.matmul``."""
    return all(r.relative_error <= tolerance(dtype) for r in rows)


def plot(rows: list[Row], engine_name: str):
    """TFLOP/s of the Triton kernel and ``torch.matmul`` at each shape (logarithmic)."""
    import matplotlib.pyplot as plt

    shapes = list(dict.fromkeys((r.M, r.N, r.K) for r in rows))
    fig, ax = plt.subplots(figsize=(7.5, 3.4))
    rate = {(r.version, (r.M, r.N, r.K)): r.tflops for r in rows}
    series = {v: [rate[v, s] for s in shapes] for v in ("Triton kernel", "torch.matmul")}
    plots.grouped_bars(ax, [f"{m} x {n} x {k}" for m, n, k in shapes], series)
    ax.set_xlabel("M x N x K")
    ax.set_yscale("log")
    ax.set_ylabel("TFLOP/s")
    ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1))  # beside the bars
    ax.set_title(f"Matrix multiplication, {rows[0].dtype}, {engine_name}", fontsize="medium")
    fig.tight_layout()
    return fig


def recorded_reading(recorded: dict[str, Any] | None) -> str:
    """The last GPU record's matmul (``recorded``, from
    :func:`rocm_dl_guide.kernels.bench.recorded`) in words: its TFLOP/s as a
    fraction of the device's peak dense 16-bit throughput, labelled as the record's."""
    if not recorded or "tflops" not in recorded:
        return "No GPU record holds the matmul's figures yet."
    shape = " x ".join(f"{n:,}" for n in SHAPES["gpu"][0])
    where = recorded.get("where") or f"on {recorded['device']}"
    text = (
        f"The last GPU record, made {where} on {recorded['date']}, has the kernel "
        f"at {shape} at {recorded['tflops']:,.0f} TFLOP/s"
    )
    if "fraction_of_peak" in recorded and "peak_tflops" in recorded:
        text += (
            f", {recorded['fraction_of_peak']:.0%} of that GPU's "
            f"{recorded['peak_tflops']:,.1f} TFLOP/s dense 16-bit peak"
        )
    if "matmul_vs_torch" in recorded:
        text += f", {recorded['matmul_vs_torch']:.2f} times torch.matmul's TFLOP/s"
    return text + "."


TABLE_FORMATS = {"ms": "{:.3f}", "TFLOP/s": engine.Significant(3), "of peak": "{:.1%}",
                 "rel. error": "{:.1e}"}  # fmt: skip
"""How the page's table prints each figure column: TFLOP/s with three significant digits."""

INTERPRETED = "Triton kernel (interpreter: correctness only, not speed)"
"""The Triton kernel's row on a build where it ran in Triton's interpreter."""


def table(rows: list[Row], interpreted: bool = False) -> list[dict[str, Any]]:
    """The rows as the page shows them: one shape column, short headers, the
    fraction of the peak only where the device has one. Where the kernel ran
    ``interpreted``, its row says so and shows no TFLOP/s: that figure would
    measure NumPy, not the kernel."""
    return [
        {
            "version": INTERPRETED if interpreted and r.version == "Triton kernel" else r.version,
            "M x N x K": f"{r.M} x {r.N} x {r.K}",
            "ms": r.ms,
            "TFLOP/s": None if interpreted and r.version == "Triton kernel" else r.tflops,
            **({"of peak": r.fraction_of_peak} if r.fraction_of_peak else {}),
            "rel. error": r.relative_error,
            "kernel": r.config,
        }
        for r in rows
    ]
