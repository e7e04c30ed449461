"""Inductor's settings, as the package uses them for ``torch.compile`` on a CPU.

:func:`freezing` is the one way the package turns on Inductor's freezing, for
a plainly compiled model (:func:`rocm_dl_guide.optimization.precision.torch_engine`) and a
PT2E-quantized one (:func:`rocm_dl_guide.optimization.pt2e.compiled`) alike.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator


@contextlib.contextmanager
def freezing(on: bool = True) -> Iterator[None]:
    """Inductor's freezing, on for the calls inside the ``with`` block only: the
    weights become constants, so Inductor can fold them and choose oneDNN's
    layouts (its setting for CPU inference). Scoped, not global, so that other
    compiled models in the process keep their settings.

    ``torch.compile(..., options={"freezing": True})`` is not the same thing on
    PyTorch 2.14: it failed on the PT2E graph, and on Inception v3 in fp32 it
    compiled for longer and ran slower than the scoped setting.

    Inside the block, PyTorch's warning that a CPU-only build has no CUDA
    runtime (logged when Inductor first looks for a compiler) is not shown:
    it says nothing about a CPU compile."""
    import torch

    cuda_note = logging.getLogger("torch.utils.cpp_extension")
    level = cuda_note.level
    cuda_note.setLevel(logging.ERROR)
    try:
        with torch._inductor.config.patch(freezing=True) if on else contextlib.nullcontext():
            yield
    finally:
        cuda_note.setLevel(level)
