"""Attention kernels: PyTorch's ``scaled_dot_product_attention`` and its backends.

``torch.nn.functional.scaled_dot_product_attention`` (SDPA) computes
``softmax(Q K^T / sqrt(d)) V`` with one of several kernels, which
``torch.nn.attention.sdpa_kernel`` can force:

- ``MATH``: the reference, written with ordinary operators. It materialises
  the ``L x L`` score matrix of every head, so its memory grows with the square
  of the sequence length ``L``.
- ``FLASH_ATTENTION``: a fused kernel in the manner of FlashAttention (Dao et
  al., 2022). It walks over blocks of keys with an online softmax and never
  holds the whole score matrix, so its extra memory grows only linearly. On
  ROCm, PyTorch builds it from AOTriton; on the CPU, PyTorch has its own.
- ``EFFICIENT_ATTENTION``: the memory-efficient kernel (Rabe and Staats; the
  xFormers kernel), GPUs only.

:func:`measure` times one backend at one length (median of repeats after
warm-up, the backends side by side) and measures its peak extra memory:
``torch.cuda.max_memory_allocated`` on a GPU; on a Linux CPU the process's
peak resident memory (``VmHWM``, reset through ``/proc/self/clear_refs``)
above what it held before, after freed memory went back to the system.
"""

from __future__ import annotations

import ctypes
import math
import sys
from dataclasses import asdict, dataclass
from typing import Any

import torch
import torch.nn.functional as F

BACKENDS = ("math", "flash", "efficient")
"""The backends compared, by the guide's short names."""
SEQ_LENS = {"smoke": (256, 512, 1024, 2048, 4096), "gpu": (1024, 2048, 4096, 8192, 16384)}
"""Sequence lengths per profile (``full`` takes ``gpu``'s)."""
HEADS, HEAD_DIM = 8, 64
TOLERANCE = {torch.float32: 1e-4, torch.bfloat16: 2e-2, torch.float16: 5e-3}
"""Largest absolute difference from the math reference that counts as agreeing
(outputs are averages of values of size about 1)."""


def default_dtype(device: torch.device) -> torch.dtype:
    """bfloat16 on a GPU (what models run in there), float32 on a CPU."""
    return torch.bfloat16 if device.type == "cuda" else torch.float32


def sdpa_backend(name: str) -> Any:
    """The ``torch.nn.attention.SDPBackend`` of a short name."""
    from torch.nn.attention import SDPBackend

    table = {
        "math": SDPBackend.MATH,
        "flash": SDPBackend.FLASH_ATTENTION,
        "efficient": SDPBackend.EFFICIENT_ATTENTION,
    }
    if name not in table:
        raise ValueError(f"unknown attention backend {name!r}: one of {', '.join(table)}")
    return table[name]


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, backend: str) -> torch.Tensor:
    """Causal SDPA of ``q, k, v`` (batch, heads, length, head size) with ``backend`` only."""
    from torch.nn.attention import sdpa_kernel

    with sdpa_kernel(sdpa_backend(backend)):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def inputs(
    seq_len: int, device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Random queries, keys and values of one sequence (seeded)."""
    g = torch.Generator().manual_seed(seq_len)
    q, k, v = (torch.randn(1, HEADS, seq_len, HEAD_DIM, generator=g) for _ in range(3))
    return tuple(t.to(device, dtype) for t in (q, k, v))


def supported(backend: str, device: torch.device, dtype: torch.dtype) -> tuple[bool, str]:
    """Whether ``backend`` runs here, and why not: it is tried on a short input."""
    q, k, v = inputs(64, device, dtype)
    try:
        attend(q, k, v, backend)
    except RuntimeError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return False, f"{backend} attention does not run on {device.type} here ({first[:160]})"
    return True, ""


def default_backend(device: torch.device, dtype: torch.dtype, seq_len: int = 1024) -> str:
    """The backend SDPA picks by itself for a causal input like :func:`inputs`'s.

    Asked of PyTorch's own chooser (``torch._fused_sdp_choice``, private and so
    read defensively); ``"unknown"`` where it cannot be asked."""
    q, k, v = inputs(seq_len, device, dtype)
    try:
        choice = torch._fused_sdp_choice(q, k, v, None, 0.0, True)
        from torch.nn.attention import SDPBackend

        backend = SDPBackend(choice)
    except Exception:  # noqa: BLE001 - a private API may change
        return "unknown"
    names = {sdpa_backend(n): n for n in BACKENDS}
    return names.get(backend, backend.name.lower())


@dataclass
class Row:
    """One backend at one sequence length."""

    backend: str
    seq_len: int
    ms: float | None
    peak_mb: float | None
    max_abs_diff: float | None
    """Largest absolute difference from the math backend's output."""
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


_LIBC = None


def _trim_heap() -> None:
    """Give freed memory back to the system (glibc), so resident memory is what lives."""
    global _LIBC
    if _LIBC is None:
        _LIBC = ctypes.CDLL("libc.so.6")
    _LIBC.malloc_trim(0)


def _status_bytes(field: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field):
                return int(line.split()[1]) * 1024
    raise OSError(f"/proc/self/status has no {field}")


def peak_extra_bytes(fn, device: torch.device) -> int | None:
    """Peak memory ``fn()`` takes above what was held before it ran; ``None`` where
    it cannot be measured (a CPU outside Linux)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        before = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
        fn()
        torch.cuda.synchronize(device)
        return torch.cuda.max_memory_allocated(device) - before
    if not sys.platform.startswith("linux"):
        return None
    try:
        _trim_heap()
        with open("/proc/self/clear_refs", "w") as fh:  # resets VmHWM to the current RSS
            fh.write("5")
        before = _status_bytes("VmRSS:")
        fn()
        return max(0, _status_bytes("VmHWM:") - before)
    except OSError:
        return None


def measure(
    seq_lens: tuple[int, ...],
    device: torch.device | str = "cpu",
    dtype: torch.dtype = torch.float32,
    backends: tuple[str, ...] = BACKENDS,
    warmup: int = 1,
    iterations: int = 3,
) -> list[Row]:
    """Time and peak memory of each backend at each length, and its largest
    difference from the math backend's output; unsupported backends get a row
    that says why. Per length, each backend is called once for its peak memory
    and output, which counts as the first of its ``warmup`` calls (at least that
    one), then timed ``iterations`` times, side by side with the others."""
    from rocm_dl_guide.core import timing

    device = torch.device(device)
    rows = []
    usable = {}
    for b in backends:
        ok, why = supported(b, device, dtype)
        usable[b] = ok
        if not ok:
            rows.append(Row(b, 0, None, None, None, why))
    for n in seq_lens:
        q, k, v = inputs(n, device, dtype)
        runs = {b: _runner(q, k, v, b, device) for b in backends if usable[b]}
        # each backend's first call at this length gives its peak memory and its
        # output for the agreement (the math backend's is the reference), and is
        # the first of its warm-up calls
        peaks, outputs = {}, {}
        for b in runs:
            out: list[torch.Tensor] = []
            peaks[b] = peak_extra_bytes(_runner(q, k, v, b, device, keep=out), device)
            outputs[b] = out.pop().float()
        timings = timing.measure_side_by_side(runs, max(0, warmup - 1), iterations, rounds=2)
        reference = outputs.get("math")
        if reference is None:
            reference = attend(q, k, v, "math").float()
        for b in runs:
            diff = (outputs[b] - reference).abs().max().item()
            mb = None if peaks[b] is None else peaks[b] / 2**20
            rows.append(Row(b, n, timings[b].median_ms, mb, diff))
        del reference, outputs
    return rows


def _runner(q, k, v, backend: str, device: torch.device, keep: list | None = None):
    """A call of ``backend`` on ``q, k, v``; its output goes into ``keep`` if given."""

    def run() -> None:
        y = attend(q, k, v, backend)
        if keep is not None:
            keep.append(y)
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    return run


def agree(rows: list[Row], dtype: torch.dtype) -> bool:
    """Whether every measured backend's output is within :data:`TOLERANCE` of math's."""
    limit = TOLERANCE[dtype]
    return all(r.max_abs_diff <= limit for r in rows if r.max_abs_diff is not None)


def score_matrix_mb(seq_len: int, dtype: torch.dtype = torch.float32) -> float:
    """The size of one ``L x L`` score matrix for every head: what the math path holds."""
    return HEADS * seq_len * seq_len * torch.finfo(dtype).bits / 8 / 2**20


def growth(rows: list[Row], backend: str) -> float | None:
    """How peak memory grows per doubling of the length (4 means with the square),
    from the two longest lengths measured."""
    mine = sorted((r.seq_len, r.peak_mb) for r in rows if r.backend == backend and r.peak_mb)
    if len(mine) < 2:
        return None
    (n0, m0), (n1, m1) = mine[-2], mine[-1]
    return (m1 / m0) ** (1 / math.log2(n1 / n0))


# --------------------------------------------------------------------------- shown on the page


def frame(rows: list[Row]):
    """The measured rows (those with a time) as a table: one line per backend and length."""
    import pandas as pd

    return pd.DataFrame([r.to_dict() for r in rows if r.ms is not None])


def wide(table):
    """:func:`frame` with a column per backend under each figure, as the page shows
    it: times and memory to 0.1, differences in scientific notation (rounding
    would show a difference of 1e-6 as 0.0)."""
    out = table.pivot(index="seq_len", columns="backend", values=["ms", "peak_mb", "max_abs_diff"])
    out.loc[:, ["ms", "peak_mb"]] = out[["ms", "peak_mb"]].round(1)
    out["max_abs_diff"] = out["max_abs_diff"].map("{:.1e}".format)
    return out


def plot(table, dtype: torch.dtype, device: str):
    """Time (left) and peak extra memory (right) of each backend against the
    sequence length, on logarithmic axes."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    for backend, part in table.groupby("backend"):
        axes[0].plot(part.seq_len, part.ms, marker="o", label=backend)
        axes[1].plot(part.seq_len, part.peak_mb, marker="o", label=backend)
    for ax, label in zip(axes, ("time (ms)", "peak extra memory (MB)"), strict=True):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("sequence length")
        ax.set_ylabel(label)
        ax.legend()
    name = str(dtype).replace("torch.", "")
    fig.suptitle(f"Causal attention, {HEADS} heads of {HEAD_DIM}, {name}, {device}")
    fig.tight_layout()
    return fig
