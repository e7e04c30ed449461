"""QLoRA's base model: the frozen pretrained weights held in 4 bits (bitsandbytes).

QLoRA (Dettmers et al., 2023) fine-tunes LoRA adapters on a base model whose
weights are stored as 4-bit NF4 numbers and dequantized for each matrix
product. :func:`qlora_support` tries bitsandbytes' 4-bit kernels on a device,
:func:`qlora_compute_dtype` picks the products' type, and :func:`four_bit`
reloads a decoder that way; :func:`rocm_dl_guide.lm.lora.train` with
``qlora=True`` adds the adapters and trains as LoRA does.
"""

from __future__ import annotations

import torch

from rocm_dl_guide.core import progress
from rocm_dl_guide.lm import model as models

QLORA = {"load_in_4bit": True, "bnb_4bit_quant_type": "nf4", "bnb_4bit_use_double_quant": True}
"""QLoRA's quantization (Dettmers et al., 2023): NF4 weights, their scales quantized
again (double quantization); the products' type is :func:`qlora_compute_dtype`'s."""


def qlora_compute_dtype(device: torch.device) -> torch.dtype:
    """The type the 4-bit weights are dequantized to for the matrix products:
    bfloat16 on a GPU, as QLoRA does, and on a CPU that computes bfloat16 in
    hardware (AVX512-BF16 or AMX); float32 on other CPUs, which emulate
    bfloat16 (the precision page measures what that costs)."""
    from rocm_dl_guide.core import device as devices

    native = torch.device(device).type == "cuda" or devices.cpu_has_native_bf16()
    return torch.bfloat16 if native else torch.float32


def qlora_support(device: torch.device | str | None = None) -> tuple[bool, str]:
    """Whether QLoRA (bitsandbytes' 4-bit weights) runs on ``device`` (default: the
    guide's device), and why not: a real 4-bit round trip is tried there."""
    from rocm_dl_guide.core import device as devices

    try:
        import bitsandbytes.functional as bnbf
    except ImportError as exc:
        return False, f"bitsandbytes is not installed ({exc}); pip install bitsandbytes"
    dev = torch.device(device) if device is not None else devices.pick()
    w = torch.randn(4, 64, generator=torch.Generator().manual_seed(0))  # NF4 suits normal weights
    try:
        packed, state = bnbf.quantize_4bit(w.to(dev, torch.bfloat16), quant_type="nf4")
        back = bnbf.dequantize_4bit(packed, state, quant_type="nf4").float().cpu()
    except Exception as exc:  # noqa: BLE001 - bitsandbytes raises many kinds per backend
        return False, f"bitsandbytes has no 4-bit kernels for {dev.type} here ({exc})"
    err = ((back - w).abs().mean() / w.abs().mean()).item()
    if not err < 0.2:  # NaN included
        return False, f"bitsandbytes' 4-bit round trip on {dev.type} is wrong (error {err:.0%})"
    return True, (
        f"bitsandbytes' 4-bit kernels run on {dev.type} (NF4 round trip of normal weights: "
        f"mean error {err:.1%} of their mean size)"
    )


def four_bit(lm: models.CausalLM) -> models.CausalLM:
    """QLoRA's base model: ``lm``'s weights reloaded with bitsandbytes' 4-bit linear
    layers (:data:`QLORA`) on ``lm``'s device, prepared with PEFT's
    ``prepare_model_for_kbit_training`` (the rest in float32, weights frozen).
    Gradient checkpointing, which QLoRA uses to fit large models, is left off:
    this model is small, and it would only slow the steps down.

    On a CPU with AVX512-BF16, bitsandbytes repacks a 4-bit layer's weights
    the first time it runs in eval mode, and from then on multiplies with a
    kernel that has no backward, in training too: the gradient through the
    frozen layers would be lost after the first evaluation. The repacking is
    turned off (evaluation is a little slower)."""
    import tempfile

    import bitsandbytes as bnb
    from peft import prepare_model_for_kbit_training
    from transformers import AutoModelForCausalLM, BitsAndBytesConfig

    device = next(lm.parameters()).device
    ok, why = qlora_support(device)
    if not ok:
        raise RuntimeError(f"QLoRA cannot run here: {why}")
    config = {**QLORA, "bnb_4bit_compute_dtype": qlora_compute_dtype(device)}
    with progress.no_library_bars(), tempfile.TemporaryDirectory() as tmp:
        lm.decoder().save_pretrained(tmp)
        hf = AutoModelForCausalLM.from_pretrained(
            tmp, quantization_config=BitsAndBytesConfig(**config), device_map={"": device}
        )
    for layer in hf.modules():
        if isinstance(layer, bnb.nn.Linear4bit):
            layer.support_avx512bf16_for_cpu = False
    return models.CausalLM(prepare_model_for_kbit_training(hf, use_gradient_checkpointing=False))
