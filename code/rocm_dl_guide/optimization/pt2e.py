"""PyTorch's own CPU int8: PT2E static quantization, compiled by Inductor.

The flow of torchao's "PyTorch 2 Export Quantization with X86 Backend through
Inductor" tutorial, in four steps:

1. :func:`torch.export.export` captures the model as an ATen graph, with the
   batch dimension left free;
2. the ``X86InductorQuantizer`` annotates it (activations as unsigned int8
   with a zero point, weights as signed int8 per output channel) and
   ``prepare_pt2e`` puts an observer on every tensor to quantize;
3. the calibration images run through it, and ``convert_pt2e`` replaces the
   observers by quantize/dequantize pairs with the scales they saw;
4. ``torch.compile`` with freezing on lowers it: Inductor's pattern passes,
   which the quantizer's module registers when it is imported, fuse each
   dequantize-convolution-quantize into one oneDNN int8 convolution.

PyTorch 2.14 no longer ships ``torch.ao.quantization``'s copy of the flow;
torchao carries it (``torchao.quantization.pt2e``), which is where PyTorch's
own documentation sends readers.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np

from rocm_dl_guide.core.messages import quiet_torchao_notices
from rocm_dl_guide.optimization.inductor import freezing

quiet_torchao_notices()

CALIBRATION_CHUNK = 100
"""Images per forward pass while calibrating (bounds the memory of a large batch)."""


class Pt2eError(ValueError):
    """Something this flow cannot quantize, in one sentence."""


def unavailable() -> str | None:
    """Why the flow cannot run in this environment, or ``None`` where it can."""
    try:
        import torchao.quantization.pt2e.quantize_pt2e  # noqa: F401
        import torchao.quantization.pt2e.quantizer.x86_inductor_quantizer  # noqa: F401
    except ImportError as exc:
        return f"torchao's PT2E quantization does not import here ({exc})"
    return None


def quantize(model, batches: list[np.ndarray], reduce_range: bool = False):
    """``model`` (in eval mode) quantized to static int8 by the X86 Inductor
    quantizer, its activation scales calibrated on ``batches`` (NCHW float32
    arrays, as many images as they hold); returns the converted graph module,
    which runs as it is (reference quantize/dequantize arithmetic) and fast
    once :func:`compiled`. ``reduce_range`` keeps activations to 7 bits, which
    the quantizer's documentation recommends on CPUs without VNNI (the 16-bit
    intermediate sums of their int8 instructions can saturate otherwise)."""
    batches = [np.ascontiguousarray(b, dtype=np.float32) for b in batches if len(b)]
    if not batches:
        raise Pt2eError("PT2E quantization needs at least one calibration image")
    why = unavailable()
    if why:
        raise Pt2eError(why)
    import torch
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
    from torchao.quantization.pt2e.quantizer import x86_inductor_quantizer as xiq

    # Two images, not one: export specialises a dimension of size 1.
    example = np.concatenate(batches)[:2]
    if len(example) < 2:
        example = np.concatenate([example, example])
    quantizer = xiq.X86InductorQuantizer()
    quantizer.set_global(
        xiq.get_default_x86_inductor_quantization_config(reduce_range=reduce_range)
    )
    with torch.no_grad(), warnings.catch_warnings():
        # The quantizer notes each max-pool it leaves in fp32 because its input is
        # not quantized: the quantizer's own choice, nothing for the reader to do.
        warnings.filterwarnings("ignore", "The input of maxpool2d is not quantized")
        captured = torch.export.export(
            model.eval(),
            (torch.from_numpy(example),),
            dynamic_shapes=({0: torch.export.Dim.AUTO},),
        ).module()
        prepared = prepare_pt2e(captured, quantizer)
        for batch in batches:
            for start in range(0, len(batch), CALIBRATION_CHUNK):
                prepared(torch.from_numpy(batch[start : start + CALIBRATION_CHUNK]))
        return convert_pt2e(prepared)


def compiled(quantized) -> Callable[[np.ndarray], np.ndarray]:
    """A function from an image batch to logits that runs ``quantized`` compiled
    by Inductor with freezing on (the weights become constants, which the int8
    convolution patterns need); it compiles on its first call per shape."""
    import torch

    fn = torch.compile(quantized)

    def run(x: np.ndarray) -> np.ndarray:
        with torch.no_grad(), freezing():
            with warnings.catch_warnings():
                # Inductor's own int8 convolution lowering copies a tensor the way
                # it warns others against (PyTorch 2.14); nothing the reader can change.
                warnings.filterwarnings("ignore", "To copy construct from a tensor")
                out = fn(torch.from_numpy(np.ascontiguousarray(x)))
        return out.float().numpy()

    return run
