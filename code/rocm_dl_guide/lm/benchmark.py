"""``bench llm``: the chapter's measurements in one run, as one record.

Seven lists, each measured by the module that the chapter's pages use, on the
chapter's model (:func:`rocm_dl_guide.lm.generation.load`): ``attention``
(:mod:`~rocm_dl_guide.lm.attention`), ``generation`` (the KV cache against
recomputation, the static cache compiled and not, batches:
:mod:`~rocm_dl_guide.lm.generation`), ``speculative``
(:mod:`~rocm_dl_guide.lm.speculative`), ``quantization``
(:mod:`~rocm_dl_guide.lm.quantization`), ``serving``
(:mod:`~rocm_dl_guide.lm.serving`), and the post-training runs ``dpo`` and
``grpo`` (:mod:`~rocm_dl_guide.lm.dpo`, :mod:`~rocm_dl_guide.lm.grpo`: their
speed and held-out measures), with the machine and the versions they ran on.
Every timing is a median after a warm-up, except the post-training runs', which
time one run; nothing here is timed by a test.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import metadata
from typing import Any

from rocm_dl_guide.core import device as devices
from rocm_dl_guide.core import profiles, provenance

PARTS = ("attention", "generation", "speculative", "quantization", "serving", "dpo", "grpo")
"""The lists of the record, in the order they are measured. (PyTorch is imported
inside the functions: the command line lists these without importing it.)"""
LIBRARIES = ("transformers", "torchao", "peft", "trl", "openai", "fastapi", "uvicorn")
"""Versions recorded beside PyTorch's."""
FLAGS = ("avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni", "amx_bf16", "amx_int8")
"""CPU flags that change these figures (vector width, bfloat16 and int8 products)."""
BATCHES = (1, 4, 16)
"""Batch sizes of the batched-generation rows."""


def machine() -> dict[str, Any]:
    """The device, the CPU and its relevant flags, and the library versions."""
    import torch

    flags = devices.cpu_flags()
    versions = provenance.library_versions(("PyTorch",))
    for name in LIBRARIES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return {
        "device": str(devices.describe()),
        "cpu": devices.cpu_name(),
        "cpu_flags": [f for f in FLAGS if f in flags],
        "torch_threads": torch.get_num_threads(),
        "versions": versions,
    }


def attention_rows(profile: profiles.Profile) -> list[dict[str, Any]]:
    from rocm_dl_guide.lm import attention

    dev = devices.pick()
    lengths = attention.SEQ_LENS.get(profile.name, attention.SEQ_LENS["gpu"])
    rows = attention.measure(lengths, dev, attention.default_dtype(dev))
    return [r.to_dict() for r in rows]


def generation_rows(profile: profiles.Profile, model=None, tokenizer=None) -> list[dict[str, Any]]:
    """The KV-cache curve (the generation page's lengths, and on the ``smoke``
    profile twice the longest, where the gap is widest), the static cache (eager
    and compiled) at the page's middle length, and batches of :data:`BATCHES`
    at :data:`~rocm_dl_guide.lm.generation.BATCH_TOKENS` new tokens (batch 1 is
    the curve's row at that length)."""
    import torch

    from rocm_dl_guide.lm import corpus, generation

    if model is None:
        model, tokenizer, _ = generation.load(profile)
    prompt = torch.tensor([tokenizer.encode(corpus.PROMPT).ids], device=model.device)
    page = generation.NEW_TOKENS.get(profile.name, generation.NEW_TOKENS["gpu"])
    repeats = 1 if profile.name == "smoke" else 3
    # The gpu profile's page already reaches 1,024 tokens; 2,048 more, three
    # times over with and without the cache, kept an H200 busy past 300 s.
    longer = (2 * max(page),) if profile.name == "smoke" else ()
    lengths = (*page, *longer, generation.BATCH_TOKENS)
    rows = generation.curve(model, prompt, lengths, iterations=repeats)
    middle = sorted(page)[len(page) // 2]
    rows += [
        generation.timed(model, prompt, middle, "static", compiled=c, iterations=repeats)
        for c in (False, True)
    ]
    rows += [
        generation.timed(model, prompt.repeat(b, 1), generation.BATCH_TOKENS, iterations=repeats)
        for b in BATCHES
        if b > 1
    ]
    return [r.to_dict() for r in rows]


def speculative_rows(profile: profiles.Profile) -> list[dict[str, Any]]:
    """Greedy decoding of the chapter's model against speculative decoding, the
    speculative page's sweep on its prompts: the draft model (one layer, trained
    for the model's tokenizer) and prompt lookup at each number of guesses. Each
    draft-model row also holds ``cost_ratio``, the draft's step over the model's."""
    from rocm_dl_guide.lm import generation, speculative

    model, tokenizer, _ = generation.load(profile)
    draft, _, _ = speculative.draft_model(profile, model.device, tokenizer)
    prompts = speculative.prompt_ids(tokenizer, model.device)
    new_tokens = speculative.NEW_TOKENS.get(profile.name, speculative.NEW_TOKENS["gpu"])
    rows = speculative.compare(model, prompts, new_tokens, speculative.sweep(), draft)
    c = speculative.cost_ratio(model, draft, prompts[0], new_tokens)
    return [{**r.to_dict(), "cost_ratio": c if r.method == "draft model" else None} for r in rows]


def quantization_rows(profile: profiles.Profile) -> list[dict[str, Any]]:
    from rocm_dl_guide.lm import quantization

    return [r.to_dict() for r in quantization.table(profile)]


def serving_rows(profile: profiles.Profile) -> list[dict[str, Any]]:
    """The server at every concurrency level with continuous batching, and one
    request at a time at 1 and 4 (at 16 the queue alone would take minutes):
    both servers up at once, measured in interleaved rounds."""
    from rocm_dl_guide.lm import serving, serving_measure

    folder = serving.model_folder(profile)
    max_tokens = serving_measure.max_tokens_for(profile)
    batched = serving.Server(folder, continuous_batching=True)
    serial = serving.Server(folder, continuous_batching=False)
    serving.start_together(batched, serial)
    with batched, serial:
        rows = serving_measure.measure_side_by_side(
            [(batched, serving.LEVELS), (serial, serving_measure.SERIAL_LEVELS)], max_tokens
        )
    return [r.to_dict() for r in rows]


def dpo_rows(profile: profiles.Profile) -> list[dict[str, Any]]:
    """The DPO page's run (:data:`~rocm_dl_guide.lm.dpo.RECIPE`, from the LoRA model):
    its speed in pairs per second, and the held-out measures before and after."""
    from rocm_dl_guide.lm import dpo

    run = dpo.train(profile, progress=False)
    return [
        {
            "method": "DPO",
            "beta": run.beta,
            "pairs": run.train_size * run.epochs,
            "seconds": run.seconds,
            "pairs_per_s": run.train_size * run.epochs / run.seconds,
            "preference_accuracy_before": run.before.preference_accuracy,
            "preference_accuracy_after": run.after.preference_accuracy,
            "exact_match_before": run.before.exact_match,
            "exact_match_after": run.after.exact_match,
        }
    ]


def grpo_rows(profile: profiles.Profile) -> list[dict[str, Any]]:
    """The GRPO page's run (:data:`~rocm_dl_guide.lm.grpo.RECIPE`, from the LoRA
    model): its speed in sampled and scored completions per second, the mean
    reward of its first and last ten steps, the last KL and held-out exact match."""
    from rocm_dl_guide.lm import grpo

    run = grpo.train(profile, progress=False)
    completions = run.steps * grpo.RECIPE["group_size"] * grpo.RECIPE["prompts_per_step"]
    return [
        {
            "method": "GRPO",
            "steps": run.steps,
            "seconds": run.seconds,
            "completions_per_s": completions / run.seconds,
            "reward_first": run.window("reward", True),
            "reward_last": run.window("reward", False),
            "kl_last": run.kl_last,
            "exact_match_before": run.exact_match_before,
            "exact_match_after": run.exact_match_after,
        }
    ]


MEASURE: dict[str, Callable[[profiles.Profile], list[dict[str, Any]]]] = {
    "attention": attention_rows,
    "generation": generation_rows,
    "speculative": speculative_rows,
    "quantization": quantization_rows,
    "serving": serving_rows,
    "dpo": dpo_rows,
    "grpo": grpo_rows,
}


def run(
    profile: profiles.Profile,
    parts: tuple[str, ...] = PARTS,
    log: Callable[[str], None] = lambda line: None,
) -> dict[str, Any]:
    """Measure ``parts`` (each a list of rows) and return the record; ``log`` hears
    which part starts."""
    unknown = [p for p in parts if p not in MEASURE]
    if unknown:
        raise ValueError(f"unknown part {unknown[0]!r}: one of {', '.join(PARTS)}")
    record: dict[str, Any] = {"profile": profile.name, "machine": machine()}
    for part in PARTS:
        if part in parts:
            log(f"measuring {part} ...")
            record[part] = MEASURE[part](profile)
    return record
