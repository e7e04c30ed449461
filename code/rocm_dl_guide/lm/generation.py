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

Generations are greedy and always exactly ``new_tokens`` long
(``min_new_tokens`` keeps the end-of-text token from stopping them early).
:func:`token_times` times one generation at every token, through
``generate``'s streamer hook: the time to the first token is prefill, the time
to the last the whole generation. :func:`timed` takes both from the same
generations (the median of repeats after a warm-up), and :func:`curve` gets
every length of its curve out of one generation of the longest.
"""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from rocm_dl_guide.core import profiles
from rocm_dl_guide.lm import CACHES

NEW_TOKENS = {"smoke": (64, 128, 256, 512), "gpu": (64, 256, 1024)}
"""New tokens per generation, per profile (``full`` takes ``gpu``'s)."""

WARMUP_TOKENS = 16
"""New tokens of an eager generation's warm-up (:func:`timed`, :func:`curve`)."""
BATCH_TOKENS = 64
"""New tokens of the batched generations (the generation page, ``bench llm``)."""


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


COLUMNS = {
    "batch": "batch (sequences)",
    "cache": "KV cache",
    "compiled": "compiled",
    "new_tokens": "new tokens",
    "tokens_per_s": "tokens/s",
    "prefill_ms": "first token (ms)",
    "ms": "whole generation (ms)",
}
""":class:`GenRow`'s fields with the headers a page shows them under."""

TABLE_FORMATS = {"tokens/s": "{:,.0f}", "first token (ms)": "{:,.1f}",
                 "whole generation (ms)": "{:,.1f}"}  # fmt: skip
"""How the page's tables print each figure column (:func:`rocm_dl_guide.core.tables.show`)."""


def table(rows: list[GenRow], fields: list[str]):
    """``rows`` as a page shows them: the ``fields`` of :class:`GenRow`, in that
    order, under the headers of :data:`COLUMNS` (a pandas DataFrame)."""
    import pandas as pd

    frame = pd.DataFrame([r.to_dict() for r in rows])[fields]
    return frame.rename(columns=COLUMNS)


def load(profile: profiles.Profile, path: str | os.PathLike | None = None):
    """The chapter's model ready to generate: ``(model, tokenizer, source)``.

    The pretrained decoder of :func:`rocm_dl_guide.lm.lora.base_model` (tiny-lm
    offline, SmolLM2-135M on the ``real`` data source, or the model at ``path``),
    in evaluation mode on the picked device, in bfloat16 on a GPU and float32 on
    a CPU (:func:`rocm_dl_guide.lm.attention.default_dtype`). ``source`` is where
    its weights came from.
    """
    from rocm_dl_guide.core import device as devices
    from rocm_dl_guide.lm import attention, lora

    lm, tokenizer, source = lora.base_model(profile, path)
    dev = devices.pick()
    return lm.decoder().to(dev, attention.default_dtype(dev)).eval(), tokenizer, Path(source)


@dataclass
class Completion:
    """What :func:`complete` wrote, and how fast."""

    prompt: str
    text: str
    new_tokens: int
    seconds: float
    cache: str
    source: str
    temperature: float = 0.0
    """0: greedy."""

    @property
    def tokens_per_s(self) -> float:
        return self.new_tokens / self.seconds

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "tokens_per_s": self.tokens_per_s}


def complete(
    model: Any,
    tokenizer: Any,
    prompt: str,
    new_tokens: int,
    cache: str = "dynamic",
    source: object = "",
    temperature: float = 0.0,
    seed: int = 0,
) -> Completion:
    """Continue ``prompt`` (text) by ``new_tokens`` tokens, greedily or sampled at
    ``temperature`` (with ``seed``); the continuation is decoded alone."""
    if temperature < 0:
        raise ValueError(f"the temperature cannot be negative, got {temperature}")
    ids = tokenizer.encode(prompt).ids
    if not ids:
        raise ValueError("the prompt is empty: give some text to continue")
    prompt_ids = torch.tensor([ids], device=next(model.parameters()).device)
    torch.manual_seed(seed)
    start = time.perf_counter()
    out = generate(model, prompt_ids, new_tokens, cache, temperature=temperature)
    seconds = time.perf_counter() - start
    text = tokenizer.decode(out[0, len(ids) :].tolist())
    return Completion(prompt, text, new_tokens, seconds, cache, str(source), temperature)


def cache_bytes_per_token(config: Any, dtype: torch.dtype = torch.float32) -> int:
    """Bytes the KV cache holds per token of one sequence: a key and a value of
    every key-value head in every layer."""
    heads = getattr(config, "num_key_value_heads", None) or config.num_attention_heads
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    return 2 * config.num_hidden_layers * heads * head_dim * torch.finfo(dtype).bits // 8


def _kwargs(model: Any, cache: str, new_tokens: int, compiled: bool = False) -> dict[str, Any]:
    if cache not in CACHES:
        raise ValueError(f"unknown cache {cache!r}: one of {', '.join(CACHES)}")
    if compiled and cache != "static":
        raise ValueError("only the static cache compiles: its shapes stay fixed from step to step")
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
        kwargs.update(_compile_kwargs(compiled))
    return kwargs


def _compile_kwargs(compiled: bool) -> dict[str, Any]:
    """How ``generate`` compiles: with a static cache, ``transformers`` compiles the
    decode step by itself on a GPU (``CompileConfig``'s default, CUDA graphs
    included) and never on a CPU unless its compile configuration says so."""
    if not compiled:
        return {"disable_compile": True}
    from transformers import CompileConfig

    config = CompileConfig(fullgraph=False)
    # transformers' own switch for compiling on every device (a CPU too)
    config._compile_all_devices = True
    return {"compile_config": config}


def generate(
    model: Any,
    prompt: torch.Tensor,
    new_tokens: int,
    cache: str = "dynamic",
    compiled: bool = False,
    temperature: float = 0.0,
    streamer: Any = None,
) -> torch.Tensor:
    """Generation of exactly ``new_tokens`` tokens after ``prompt`` (batch, length)
    with ``cache`` (``compiled``: the static cache's decode step compiled with
    ``torch.compile``); returns prompt and new tokens. Greedy, unless
    ``temperature`` is above 0: then sampled from the 50 likeliest tokens
    (seed with ``torch.manual_seed`` for a repeatable draw). ``streamer``
    (``generate``'s hook) hears the prompt, then each new token (of every
    sequence at once)."""
    kwargs = _kwargs(model, cache, new_tokens, compiled)
    if temperature > 0:
        kwargs.update(do_sample=True, temperature=temperature, top_k=50)
    if streamer is not None:
        kwargs["streamer"] = streamer
    with torch.no_grad():
        return model.generate(prompt, attention_mask=torch.ones_like(prompt), **kwargs)


class TokenClock:
    """A streamer for ``generate`` that notes when each new token arrives: seconds
    since the clock was made. ``generate`` hands a streamer the prompt first, then
    every new token as it is chosen (copied to the host, so on a GPU the time
    includes the step's kernels). ``cpu_times`` holds the generating thread's CPU
    seconds at the same moments (``time.thread_time``): on a CPU they leave out
    the time other processes held the core, which wall time does not."""

    def __init__(self) -> None:
        self.start = time.perf_counter()
        self.cpu_start = time.thread_time()
        self.times: list[float] = []
        self.cpu_times: list[float] = []
        self._prompt_seen = False

    def put(self, value: torch.Tensor) -> None:
        if not self._prompt_seen:
            self._prompt_seen = True
            return
        self.times.append(time.perf_counter() - self.start)
        self.cpu_times.append(time.thread_time() - self.cpu_start)

    def end(self) -> None:
        """``generate``'s end-of-stream call: nothing to flush."""


def token_times(
    model: Any,
    prompt: torch.Tensor,
    new_tokens: int,
    cache: str = "dynamic",
    compiled: bool = False,
    cpu_times: list[float] | None = None,
) -> list[float]:
    """Seconds from the call of a greedy generation of ``new_tokens`` to each of
    its new tokens (for a batch, to that token of every sequence): element 0 is
    prefill, element ``n - 1`` the time a generation of ``n`` tokens takes,
    because a step's work depends only on the positions before it. A list
    passed as ``cpu_times`` receives the same generation's CPU times
    (:class:`TokenClock`)."""
    clock = TokenClock()
    generate(model, prompt, new_tokens, cache, compiled, streamer=clock)
    if len(clock.times) != new_tokens:
        raise RuntimeError(f"generate streamed {len(clock.times)} tokens, not {new_tokens}")
    if cpu_times is not None:
        cpu_times.extend(clock.cpu_times)
    return clock.times


def timed(
    model: Any,
    prompt: torch.Tensor,
    new_tokens: int,
    cache: str = "dynamic",
    compiled: bool = False,
    iterations: int = 3,
    warmup: int = 1,
) -> GenRow:
    """Time prefill and a whole generation of ``new_tokens``, both from the same
    generations (:func:`token_times`: the time to the first token and to the
    last), the median of ``iterations`` after ``warmup`` untimed generations of
    the same batch and cache. A compiled generation is warmed up at its own
    length (compiling happens then, per cache size); an eager one with
    :data:`WARMUP_TOKENS` new tokens, which runs the same kernels on the same
    shapes without spending a whole generation on it."""
    if iterations < 1:
        raise ValueError(f"iterations must be at least 1, got {iterations}")
    warm = new_tokens if compiled else min(new_tokens, WARMUP_TOKENS)
    for _ in range(warmup):
        generate(model, prompt, warm, cache, compiled)
    runs = [token_times(model, prompt, new_tokens, cache, compiled) for _ in range(iterations)]
    whole = statistics.median(times[-1] for times in runs)
    batch = prompt.shape[0]
    return GenRow(
        kv_cache=cache != "none",
        cache=cache,
        compiled=compiled,
        batch=batch,
        new_tokens=new_tokens,
        tokens_per_s=batch * new_tokens / whole,
        prefill_ms=statistics.median(times[0] for times in runs) * 1e3,
        ms=whole * 1e3,
    )


def curve(
    model: Any,
    prompt: torch.Tensor,
    lengths: tuple[int, ...],
    caches: tuple[str, ...] = ("none", "dynamic"),
    iterations: int = 1,
) -> list[GenRow]:
    """Rows for every length with every cache, shortest first, from
    :func:`token_curves` at the longest length: the time to the ``n``-th token of
    one long generation is what a generation of ``n`` tokens costs, and timing
    each length on its own would repeat the long recomputations without a cache."""
    return rows_at(token_curves(model, prompt, max(lengths), caches, iterations), lengths)


def token_curves(
    model: Any,
    prompt: torch.Tensor,
    new_tokens: int,
    caches: tuple[str, ...] = ("none", "dynamic"),
    iterations: int = 1,
    cpu: dict[str, list[float]] | None = None,
) -> dict[str, list[float]]:
    """Per cache, the seconds to each new token of a greedy generation of
    ``new_tokens`` (:func:`token_times`), the median of ``iterations`` at every
    token. Each cache is warmed up first with :data:`WARMUP_TOKENS` new tokens;
    the caches then take turns, so that a slow spell falls on them alike. A
    dict passed as ``cpu`` receives the same curves in CPU time."""
    for cache in caches:
        generate(model, prompt, min(new_tokens, WARMUP_TOKENS), cache)
    runs: dict[str, list[list[float]]] = {cache: [] for cache in caches}
    cpu_runs: dict[str, list[list[float]]] = {cache: [] for cache in caches}
    for _ in range(iterations):
        for cache in caches:
            cpu_runs[cache].append([])
            runs[cache].append(
                token_times(model, prompt, new_tokens, cache, cpu_times=cpu_runs[cache][-1])
            )
    if cpu is not None:
        cpu.update(medians(cpu_runs))
    return medians(runs)


def medians(runs: dict[str, list[list[float]]]) -> dict[str, list[float]]:
    """Per cache, the median of its runs at every token."""
    return {
        cache: [statistics.median(at) for at in zip(*times, strict=True)]
        for cache, times in runs.items()
    }


def rows_at(curves: dict[str, list[float]], lengths: tuple[int, ...]) -> list[GenRow]:
    """One batch-1 row per length (once each) and cache, shortest first, from
    :func:`token_curves`: the whole generation is the time to the ``n``-th
    token, prefill the time to the first."""
    rows = []
    for n in sorted(set(lengths)):
        for cache, times in curves.items():
            if not 0 < n <= len(times):
                raise ValueError(f"no time for {n} new tokens: the curve has {len(times)}")
            rows.append(
                GenRow(
                    kv_cache=cache != "none",
                    cache=cache,
                    compiled=False,
                    batch=1,
                    new_tokens=n,
                    tokens_per_s=n / times[n - 1],
                    prefill_ms=times[0] * 1e3,
                    ms=times[n - 1] * 1e3,
                )
            )
    return rows


def speedup(rows: list[GenRow], new_tokens: int, cache: str = "dynamic") -> float:
    """How many times faster ``cache`` generated ``new_tokens`` than no cache did."""
    by = {(r.cache, r.new_tokens, r.batch, r.compiled): r.ms for r in rows}
    return by[("none", new_tokens, 1, False)] / by[(cache, new_tokens, 1, False)]


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
