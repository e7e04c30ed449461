"""Inductor's settings, as the package uses them for ``torch.compile`` on a CPU.

:func:`freezing` is the one way the package turns on Inductor's freezing, for
a plainly compiled model (:func:`rocm_dl_guide.precision.torch_engine`) and a
PT2E-quantized one (:func:`rocm_dl_guide.pt2e.compiled`) alike.
"""

from __future__ import annotations

import contextlib


def freezing(on: bool = True) -> contextlib.AbstractContextManager:
    """Inductor's freezing, on for the calls inside the ``with`` block only: the
    weights become constants, so Inductor can fold them and choose oneDNN's
    layouts (its setting for CPU inference). Scoped, not global, so that other
    compiled models in the process keep their settings.

    ``torch.compile(..., options={"freezing": True})`` is not the same thing on
    PyTorch 2.14: it failed on the PT2E graph, and on Inception v3 in fp32 it
    compiled for longer and ran slower than the scoped setting."""
    import torch

    return torch._inductor.config.patch(freezing=True) if on else contextlib.nullcontext()
