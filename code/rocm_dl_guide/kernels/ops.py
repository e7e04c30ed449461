"""From a kernel to PyTorch: the fused softmax as a ``torch.library`` operator.

A Triton kernel called from Python is invisible to PyTorch: autograd has no
derivative for it, and ``torch.compile`` cannot trace a launch on the raw data
pointers of fake tensors. Registered as an operator, it gets both:

- ``rocm_dl_guide::softmax`` runs :func:`rocm_dl_guide.kernels.softmax.softmax_kernel`
  over the last dimension; ``rocm_dl_guide::softmax_backward`` runs
  :func:`softmax_backward_kernel`, and ``register_autograd`` connects the two;
- on a GPU the operators are ``torch.library.triton_op``: ``torch.compile``
  sees the kernels inside (``wrap_triton``) and can optimise around them. Triton's
  interpreter cannot be traced that way, so there they are
  ``torch.library.custom_op``, which ``torch.compile`` calls as they are, with a
  fake implementation that gives the output's shape.

:class:`TinyAttention` is a model that calls the operator, for the test that
``torch.compile`` of it matches eager and that its gradients match autograd
of the same model on ``torch.softmax``.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import triton
import triton.language as tl
from torch import nn
from torch.library import wrap_triton

from rocm_dl_guide.kernels import engine
from rocm_dl_guide.kernels.softmax import softmax_kernel

REGISTER = torch.library.custom_op if engine.interpreted() else torch.library.triton_op
"""``triton_op`` where the kernels are compiled, ``custom_op`` for the interpreter."""


@triton.jit
def softmax_backward_kernel(dx_ptr, dy_ptr, y_ptr, row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    # dx = y * (dy - sum(y * dy)) along the row: the softmax's Jacobian applied to dy.
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    offsets = row * row_stride + cols
    y = tl.load(y_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    dy = tl.load(dy_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
    dx = y * (dy - tl.sum(y * dy, axis=0))
    tl.store(dx_ptr + offsets, dx.to(dx_ptr.dtype.element_ty), mask=mask)


def as_rows(t: torch.Tensor) -> torch.Tensor:
    """``t`` as a contiguous (rows, last dimension) matrix."""
    return t.reshape(-1, t.shape[-1]).contiguous()


@REGISTER("rocm_dl_guide::softmax", mutates_args=())
def softmax(x: torch.Tensor) -> torch.Tensor:
    x2 = as_rows(x)
    out = torch.empty_like(x2)
    block = triton.next_power_of_2(x2.shape[1])
    wrap_triton(softmax_kernel)[(x2.shape[0],)](
        out, x2, x2.stride(0), out.stride(0), x2.shape[1], BLOCK_SIZE=block
    )
    return out.view(x.shape)


@REGISTER("rocm_dl_guide::softmax_backward", mutates_args=())
def softmax_backward(y: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
    y2, dy2 = as_rows(y), as_rows(dy)
    dx = torch.empty_like(y2)
    block = triton.next_power_of_2(y2.shape[1])
    wrap_triton(softmax_backward_kernel)[(y2.shape[0],)](
        dx, dy2, y2, y2.stride(0), y2.shape[1], BLOCK_SIZE=block
    )
    return dx.view(y.shape)


if REGISTER is torch.library.custom_op:
    # triton_op traces its function for the output's shape; custom_op needs it said.
    softmax.register_fake(lambda x: torch.empty_like(x))
    softmax_backward.register_fake(lambda y, dy: torch.empty_like(y))


def save_output(ctx, inputs, output) -> None:
    ctx.save_for_backward(output)  # the backward needs y = softmax(x), not x


def backward(ctx, grad):
    (y,) = ctx.saved_tensors
    return softmax_backward(y, grad)


softmax.register_autograd(backward, setup_context=save_output)


class TinyAttention(nn.Module):
    """One head of self-attention over a (tokens, dim) input, with its softmax
    given: :func:`softmax` (the Triton operator) or PyTorch's."""

    def __init__(self, dim: int = 32, softmax_fn: Callable | None = None):
        super().__init__()
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)
        self.softmax_fn = softmax_fn or softmax

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        weights = self.softmax_fn(q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]))
        return self.out(weights @ v)


def torch_softmax(x: torch.Tensor) -> torch.Tensor:
    """PyTorch's softmax over the last dimension: the reference."""
    return torch.softmax(x, dim=-1)


def pair(dim: int = 32, seed: int = 0) -> tuple[TinyAttention, TinyAttention]:
    """The same :class:`TinyAttention` twice: on the Triton operator, and on
    PyTorch's softmax with a copy of the same weights."""
    torch.manual_seed(seed)
    ours = TinyAttention(dim)
    theirs = TinyAttention(dim, torch_softmax)
    theirs.load_state_dict(ours.state_dict())
    return ours, theirs


def check_compiled(tokens: int = 24, dim: int = 32, dev: torch.device | str = "cpu") -> dict:
    """``torch.compile`` of the model on the operator against eager, and its
    gradients against autograd of the model on ``torch.softmax``: the largest
    differences of outputs and of weight gradients."""
    from rocm_dl_guide.kernels.softmax import quiet_compile

    ours, theirs = (m.to(dev) for m in pair(dim))
    x = torch.randn(tokens, dim, generator=torch.Generator().manual_seed(1)).to(dev)
    torch._dynamo.reset()
    compiled = torch.compile(ours, fullgraph=True)
    with quiet_compile():
        got = compiled(x)
        got.square().sum().backward()
    grads = {n: p.grad.clone() for n, p in ours.named_parameters()}
    eager = ours(x).detach()
    ref = theirs(x)
    ref.square().sum().backward()
    return {
        "compiled_vs_eager": float((got.detach() - eager).abs().max()),
        "eager_vs_torch_softmax": float((eager - ref.detach()).abs().max()),
        "grad_vs_autograd": max(
            float((grads[n] - p.grad).abs().max()) for n, p in theirs.named_parameters()
        ),
    }
