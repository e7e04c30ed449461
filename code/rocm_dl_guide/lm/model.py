"""The small decoder the chapter pretrains: a Llama-style model from ``transformers``.

Randomly initialised from a :class:`transformers.LlamaConfig` (rotary position
embeddings, RMSNorm, SwiGLU feed-forward layers, the architecture of Llama 2
and 3 and of SmolLM2), at a size each run profile can train: about 2.6 million
parameters on the ``smoke`` profile, which two CPU cores train in a minute or
two. :class:`CausalLM` is what the guide's training loop trains: it returns
the logits class-first, as PyTorch's cross-entropy loss expects them, so the
loop's default loss and accuracy apply to next-token prediction unchanged.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import nn


@dataclass(frozen=True)
class ModelSize:
    """The shape of the decoder (a subset of ``LlamaConfig``)."""

    layers: int
    width: int
    heads: int
    ffn: int
    context: int
    """Longest sequence the model is trained on (its block size)."""


SIZES = {
    "smoke": ModelSize(layers=3, width=192, heads=4, ffn=512, context=128),
    "gpu": ModelSize(layers=6, width=384, heads=6, ffn=1024, context=256),
    "full": ModelSize(layers=12, width=768, heads=12, ffn=2048, context=1024),
}
"""Per run profile. ``gpu`` doubles the context and the width of ``smoke``
(a model the corpus's 100,000 training tokens can still teach); ``full`` has
the shape of GPT-2 small, for a larger corpus. ``smoke`` has three layers, not
four: on two cores of an AVX2-only EPYC the pretraining page took 69 s with four
(issue 54), and with three, 25% fewer operations a token, its held-out
perplexity after two epochs was the same (206 against 208, unigram 626) and
LoRA and QLoRA still beat the majority answer (60% and 47% against 28%)."""


POSITIONS = 4096
"""How many positions the model accepts: as many as it is trained on would
do, but rotary position embeddings have no learned table to run out of, so
generation may go on past the training context (the generation page times
sequences of up to 1,000 tokens; the text past the context is what the model
never learned to write)."""


def config(size: ModelSize, vocab_size: int, eos_id: int) -> Any:
    """The ``LlamaConfig`` of a randomly initialised model of ``size``."""
    from transformers import LlamaConfig

    return LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=size.width,
        intermediate_size=size.ffn,
        num_hidden_layers=size.layers,
        num_attention_heads=size.heads,
        num_key_value_heads=size.heads,
        max_position_embeddings=max(size.context, POSITIONS),
        tie_word_embeddings=True,
        bos_token_id=eos_id,
        eos_token_id=eos_id,
        pad_token_id=eos_id,
    )


class CausalLM(nn.Module):
    """A ``transformers`` causal language model as the training loop sees it.

    ``forward(input_ids)`` returns the next-token logits as ``(batch, vocab,
    time)``: class-first, so ``nn.CrossEntropyLoss`` and the loop's accuracy
    (argmax over dimension 1) work on them as on an image classifier's.
    """

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=input_ids, use_cache=False).logits.transpose(1, 2)

    def fsdp_units(self) -> list[nn.Module]:
        """The modules FSDP shards one by one: each transformer block (the
        embeddings and the tied output layer stay with the root)."""
        return list(self.decoder().model.layers)

    def decoder(self) -> nn.Module:
        """The ``transformers`` model itself, under PEFT's wrapper where there is one."""
        return self.model.get_base_model() if hasattr(self.model, "get_base_model") else self.model


def next_token_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """The mean cross-entropy of :class:`CausalLM`'s class-first logits against
    ``targets`` (labels equal to the loop's ``IGNORE_INDEX`` do not count).

    The same value as ``nn.CrossEntropyLoss()(logits, targets)``, computed on the
    ``(batch * time, vocab)`` view that the logits are stored as: PyTorch's CPU
    log-softmax over the vocabulary as dimension 1 of a ``(batch, vocab, time)``
    view copies and strides, and took a quarter of a training step on two cores.
    """
    from rocm_dl_guide.training.metrics import IGNORE_INDEX

    rows = logits.transpose(1, 2)
    return nn.functional.cross_entropy(
        rows.reshape(-1, rows.shape[-1]), targets.reshape(-1), ignore_index=IGNORE_INDEX
    )


def optimizer(params: Any, **settings: Any) -> torch.optim.AdamW:
    """AdamW over ``params`` with ``settings``, fused into one kernel per step where
    PyTorch has it for the parameters' device (CPU and GPU), else its default."""
    from rocm_dl_guide.core.device import fused_optimizer_supported

    params = list(params)
    fused = fused_optimizer_supported(params[0].device if params else "cpu")
    return torch.optim.AdamW(params, fused=fused, **settings)


def build(size: ModelSize, vocab_size: int, eos_id: int, seed: int = 0) -> CausalLM:
    """A randomly initialised decoder of ``size`` (deterministic for ``seed``)."""
    from transformers import LlamaForCausalLM

    torch.manual_seed(seed)
    return CausalLM(LlamaForCausalLM(config(size, vocab_size, eos_id)))


def parameter_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def size_facts(model: nn.Module, size: ModelSize) -> dict[str, Any]:
    """Parameters and the memory of weights, gradients and AdamW's two moments (fp32)."""
    n = parameter_count(model)
    return {
        **asdict(size),
        "parameters": n,
        "weights_mib": n * 4 / 2**20,
        "training_state_mib": n * 4 * 4 / 2**20,  # weights, gradients, AdamW m and v
    }
