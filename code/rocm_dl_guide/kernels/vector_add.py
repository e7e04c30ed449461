"""The programming model's first kernel: the element-wise sum of two vectors.

One program (a Triton *program*, a workgroup on an AMD GPU) handles one block
of ``BLOCK_SIZE`` elements. It finds its block from its program id, builds the
block's offsets, masks the offsets past the end of the vectors, loads, adds and
stores. :func:`add` launches one program per block; :func:`reference` is
PyTorch's own sum.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch
import triton
import triton.language as tl

from rocm_dl_guide.kernels import engine

BLOCK_SIZE = 1024
"""Elements per program: a power of two, as ``tl.arange`` requires."""


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)  # which block this program handles
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements  # the last block may run past the end
    x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)
    y = tl.load(y_ptr + offsets, mask=mask).to(tl.float32)
    out = (x + y).to(out_ptr.dtype.element_ty)
    tl.store(out_ptr + offsets, out, mask=mask)


def add(x: torch.Tensor, y: torch.Tensor, block_size: int = BLOCK_SIZE) -> torch.Tensor:
    out = torch.empty_like(x)
    n = out.numel()
    grid = (triton.cdiv(n, block_size),)  # one program per block
    add_kernel[grid](x, y, out, n, BLOCK_SIZE=block_size)
    return out


def reference(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """PyTorch's sum, in the inputs' dtype."""
    return x + y


@dataclass(frozen=True)
class Launch:
    """How a launch of :func:`add` cuts ``n`` elements into programs."""

    n: int
    block_size: int

    @property
    def programs(self) -> int:
        return triton.cdiv(self.n, self.block_size)

    @property
    def masked(self) -> int:
        """Lanes of the last program that the mask switches off."""
        return self.programs * self.block_size - self.n

    @property
    def wavefronts_per_program(self) -> int:
        """64-lane wavefronts an AMD GPU needs to cover one block with one element
        per lane (Triton's ``num_warps``, 4 by default, sets how many run a program;
        each then handles several elements)."""
        return self.block_size // 64


def inputs(n: int, dtype: torch.dtype, dev: torch.device | str = "cpu", seed: int = 0):
    """Two seeded random vectors of ``n`` elements."""
    g = torch.Generator().manual_seed(seed)
    x, y = torch.randn(n, generator=g), torch.randn(n, generator=g)
    return x.to(dev, dtype), y.to(dev, dtype)


SIZES = {"smoke": (1_000, 100_003), "gpu": (1 << 20, (1 << 26) + 3)}
"""Elements the page and ``bench kernels`` add per profile (``full`` takes ``gpu``'s)."""


@dataclass
class Row:
    """The Triton kernel and PyTorch's sum at one size."""

    n: int
    dtype: str
    triton_ms: float
    torch_ms: float
    triton_gb_per_s: float
    torch_gb_per_s: float
    """Bandwidth on three passes over the vectors: two reads and one write."""
    max_abs_diff: float

    def to_dict(self) -> dict:
        return asdict(self)


def measure(sizes, dev: torch.device, dtype: torch.dtype, warmup: int = 1,
            iterations: int = 5) -> list[Row]:  # fmt: skip
    """The kernel and ``x + y`` at each size, timed side by side after warm-up."""
    rows = []
    for n in sizes:
        x, y = inputs(n, dtype, dev)
        diff = float((add(x, y).float() - reference(x, y).float()).abs().max())
        ms = engine.time_side_by_side(
            {"triton": lambda x=x, y=y: add(x, y), "torch": lambda x=x, y=y: reference(x, y)},
            dev,
            warmup,
            iterations,
        )
        moved = 3 * n * x.element_size()
        rows.append(Row(n, str(dtype).replace("torch.", ""), ms["triton"], ms["torch"],
                        engine.gb_per_s(moved, ms["triton"]), engine.gb_per_s(moved, ms["torch"]),
                        diff))  # fmt: skip
    return rows
