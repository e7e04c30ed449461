"""Generation: the KV cache, prefill against decode, a static cache, batches.

A decoder generates one token per step, and each step needs the keys and
values of every earlier position. Without a cache, each step runs the whole
sequence so far through the model again, so step ``t`` costs ``t`` positions
and ``n`` new tokens cost about ``n^2 / 2``. With the KV cache
(``transformers``' default), the first step (*prefill*) runs the prompt once
and stores each layer's keys and values; every later step (*decode*) runs one
position and appends its keys and values. A *static* cache allocates the
whole cache up front, so tensor shapes stay fixed from step to step, which is
what ``torch.compile`` needs to compile the decode step once.

:func:`timed` generates greedily, always exactly ``new_tokens`` tokens
(``min_new_tokens`` keeps the end-of-text token from stopping it early), and
times prefill (a generation of one token) and the whole generation, each as
the median of repeats after a warm-up (:mod:`rocm_dl_guide.timing`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import torch

from rocm_dl_guide import timing

CACHES = ("none", "dynamic", "static")
"""No KV cache (recompute every step), ``transformers``' default growing cache,
and the static, preallocated one."""
NEW_TOKENS = {"smoke": (64, 128, 256, 512), "gpu": (64, 256, 1024)}
"""New tokens per generation, per profile (``full`` takes ``gpu``'s)."""


@dataclass
class GenRow:
    """One timed generation."""

    kv_cache: bool
    cache: str
    compiled: bool
    batch: int
    new_tokens: int
    tokens_per_s: float
    """New tokens per second, over every sequence of the batch."""
    prefill_ms: float
    """Time to the first new token: the prompt's forward pass and one token."""
    ms: float
    """The whole generation."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def cache_bytes_per_token(config: Any, dtype: torch.dtype = torch.float32) -> int:
    """Bytes the KV cache holds per token of one sequence: a key and a value of
    every key-value head in every layer."""
    heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    return 2 * config.num_hidden_layers * heads * head_dim * torch.finfo(dtype).bits // 8


def _kwargs(model: Any, cache: str, new_tokens: int) -> dict[str, Any]:
    if cache not in CACHES:
        raise ValueError(f"unknown cache {cache!r}: one of {', '.join(CACHES)}")
    kwargs: dict[str, Any] = {
        "max_new_tokens": new_tokens,
        "min_new_tokens": new_tokens,
        "do_sample": False,
        "pad_token_id": model.config.pad_token_id,
    }
    if cache == "none":
        kwargs["use_cache"] = False
    elif cache == "static":
        kwargs["cache_implementation"] = "static"
    return kwargs


def generate(
    model: Any, prompt: torch.Tensor, new_tokens: int, cache: str = "dynamic"
) -> torch.Tensor:
    """Greedy generation of exactly ``new_tokens`` tokens after ``prompt`` (batch,
    length) with ``cache``; returns prompt and new tokens."""
    with torch.no_grad():
        return model.generate(
            prompt, attention_mask=torch.ones_like(prompt), **_kwargs(model, cache, new_tokens)
        )


def timed(
    model: Any,
    prompt: torch.Tensor,
    new_tokens: int,
    cache: str = "dynamic",
    compiled: bool = False,
    iterations: int = 3,
) -> GenRow:
    """Time prefill and a whole generation of ``new_tokens`` (median after a warm-up)."""
    device = prompt.device

    def run(n: int):
        def call() -> None:
            generate(model, prompt, n, cache)
            if device.type == "cuda":
                torch.cuda.synchronize(device)

        return call

    prefill = timing.measure(run(1), warmup=1, iterations=iterations)
    whole = timing.measure(run(new_tokens), warmup=1, iterations=iterations)
    batch = prompt.shape[0]
    return GenRow(
        kv_cache=cache != "none",
        cache=cache,
        compiled=compiled,
        batch=batch,
        new_tokens=new_tokens,
        tokens_per_s=batch * new_tokens / (whole.median_ms / 1e3),
        prefill_ms=prefill.median_ms,
        ms=whole.median_ms,
    )


def step_logits(model: Any, prompt: torch.Tensor, steps: int) -> tuple[list, list, list]:
    """Greedy decoding for ``steps`` tokens, twice: with the KV cache (one position
    per step) and without (the whole sequence every step). Returns the next-token
    logits of each path at every step and the tokens the cached path chose."""
    from transformers import DynamicCache

    cached, full, chosen = [], [], []
    ids = prompt
    cache = DynamicCache(config=model.config)
    with torch.no_grad():
        out = model(input_ids=prompt, past_key_values=cache, use_cache=True)
        for _ in range(steps):
            logits = out.logits[:, -1]
            cached.append(logits)
            full.append(model(input_ids=ids, use_cache=False).logits[:, -1])
            token = logits.argmax(-1, keepdim=True)
            chosen.append(token)
            ids = torch.cat([ids, token], dim=1)
            out = model(input_ids=token, past_key_values=out.past_key_values, use_cache=True)
    return cached, full, chosen


def compile_decode(model: Any) -> Any:
    """``torch.compile`` the model's forward pass (for use with the static cache,
    whose fixed shapes let the decode step compile once)."""
    model.forward = torch.compile(model.forward, dynamic=False)
    return model
