"""The selfcheck's language-model checks: the book's language-model chapters on this device.

``tiny-lm`` pretraining under bfloat16 autocast, LoRA and QLoRA on the decoder it
trained, FSDP over the local GPUs, the attention kernels against the math
reference, generation with the KV cache, and speculative decoding.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from rocm_dl_guide.selfcheck.checks import Setup, on_gpu_detail, on_local_gpus, peak_mib
from rocm_dl_guide.selfcheck.report import Outcome


def _lm_folder(ctx: Setup) -> Path:
    return ctx.out_dir / "checkpoints" / "tiny-lm"


def check_lm_bf16(ctx: Setup) -> Outcome:
    """One epoch of ``tiny-lm`` pretraining at the profile's size under autocast
    (bfloat16 where the device has it): the loss must be finite and the held-out
    perplexity below the untrained model's."""
    import math

    from rocm_dl_guide.lm import pretrain
    from rocm_dl_guide.training.setup import autocast_dtype

    run = pretrain.train(
        ctx.profile,
        epochs=1,
        checkpoint_dir=_lm_folder(ctx),
        amp=True,
        progress=False,
        samples=False,
    )
    if not math.isfinite(run.result.final.train_loss) or not run.perplexity < run.perplexity_before:
        raise AssertionError(
            f"loss {run.result.final.train_loss}, perplexity {run.perplexity} "
            f"(untrained {run.perplexity_before})"
        )
    dtype = str(autocast_dtype(ctx.device)).replace("torch.", "")
    return Outcome(
        "lm:bf16",
        "pass",
        f"{run.size['parameters'] / 1e6:.1f}M-parameter decoder, 1 epoch under {dtype} "
        f"autocast {on_gpu_detail(ctx, run.result)}; perplexity {run.perplexity_before:.0f} "
        f"-> {run.perplexity:.0f}; {run.tokens_per_s:,.0f} tokens/s",
        figures={
            "tokens_per_s": round(run.tokens_per_s, 1),
            "perplexity": round(run.perplexity, 2),
            "peak_memory_mib": peak_mib(ctx.device),
        },
    )


def check_lm_mfu(ctx: Setup) -> Outcome:
    """Model FLOPs utilisation of ``tiny-lm`` pretraining: the decoder at GPT-2 small's
    shape (the ``full`` profile's, 12 layers, width 768, context 1024) on a GPU, the
    ``smoke`` shape on a CPU; FLOPs counted by PyTorch, over the device's bf16 peak."""
    from rocm_dl_guide.core import profiles
    from rocm_dl_guide.lm import model as models
    from rocm_dl_guide.selfcheck.checks import raise_eager_failures, run_sweep, sweep_figures
    from rocm_dl_guide.training import training_speed

    gpu = ctx.device.type == "cuda"
    profile = profiles.with_data_source(profiles.get("full" if gpu else "smoke"), "fixtures")
    size = models.SIZES[profile.name]
    workload = training_speed.example_workload("tiny-lm", profile, ctx.device)
    result = run_sweep(ctx, workload, "tiny-lm")
    compile_failures = raise_eager_failures(result)
    figs = sweep_figures(result)
    best = figs["best"]
    if best is None:
        raise AssertionError("no variant ran: " + "; ".join({r["note"] for r in result.rows}))
    shape = f"{size.layers} layers, width {size.width}, context {size.context}"
    figs = {
        "mfu": best["fraction_of_peak"],
        "tokens_per_s": best["tokens_per_s"],
        "variant": best["variant"],
        "batch": best["batch"],
        "tflops": best["tflops"],
        "busy_fraction": best["busy_fraction"],
        "shape": shape,
        "peak_memory_mib": figs["peak_memory_mib"],
        "rows": figs["rows"],
    }
    mfu = f", MFU {best['fraction_of_peak']:.1%}" if best["fraction_of_peak"] else ""
    return Outcome(
        "lm:mfu",
        "pass",
        f"decoder of {shape}: best {best['variant']} at {best['batch']} sequences, "
        f"{best['tokens_per_s']:,.0f} tokens/s, {best['tflops']:.1f} TFLOP/s{mfu}"
        + compile_failures,
        figures=figs,
    )


def _one_lora_epoch(ctx: Setup, folder: str, **options: Any):
    """One epoch of ``lora.train`` on the decoder ``lm:bf16`` trained (or the cached
    ``tiny-lm``), checkpointed under ``checkpoints/FOLDER``."""
    from rocm_dl_guide.lm import lora, pretrain

    weights = _lm_folder(ctx) / pretrain.WEIGHTS_NAME
    return lora.train(
        ctx.profile,
        epochs=1,
        checkpoint_dir=ctx.out_dir / "checkpoints" / folder,
        progress=False,
        base=weights if weights.is_file() else None,
        **options,
    )


def check_lm_lora(ctx: Setup) -> Outcome:
    """One epoch of LoRA (PEFT) on the decoder ``lm:bf16`` trained (or the cached
    ``tiny-lm``): only the adapters train, and they are exported."""
    run = _one_lora_epoch(ctx, "lora", amp=True)
    if not 0 < run.trainable_fraction < 0.05 or run.adapter is None:
        raise AssertionError(f"trainable {run.trainable_fraction:.2%}, adapter {run.adapter}")
    return Outcome(
        "lm:lora",
        "pass",
        f"{run.trainable_fraction:.2%} of the parameters trained "
        f"{on_gpu_detail(ctx, run.result)}; exact match {run.accuracy_before:.0%} -> "
        f"{run.accuracy:.0%} after 1 epoch; adapter {run.adapter_bytes / 1024:.0f} KiB",
        figures={"tokens_per_s": round(run.tokens_per_s, 1), "accuracy": run.accuracy},
    )


def check_lm_grpo(ctx: Setup) -> Outcome:
    """GRPO (TRL) from the LoRA model of ``lm:lora`` (one epoch is trained here if it
    has not run), :data:`~rocm_dl_guide.lm.grpo.RECIPE`'s steps: the reward and the KL
    by step, held-out exact match before and after, completions per second."""
    import importlib.util

    if importlib.util.find_spec("trl") is None or importlib.util.find_spec("datasets") is None:
        return Outcome(
            "lm:grpo",
            "skip",
            "TRL and datasets are not installed (requirements-gpu-check.txt leaves them out: "
            "datasets needs pyarrow, a 55 MB wheel); pip install trl to run it",
        )
    from rocm_dl_guide.lm import grpo, lora, posttrain, pretrain

    adapter = ctx.out_dir / "checkpoints" / "lora" / lora.ADAPTER_DIR
    if not (adapter / "adapter_config.json").is_file():
        _one_lora_epoch(ctx, "lora", amp=True)
    weights = _lm_folder(ctx) / pretrain.WEIGHTS_NAME
    start = posttrain.merge_adapter(
        ctx.profile,
        adapter,
        ctx.out_dir / "checkpoints" / "grpo-start",
        base=weights if weights.is_file() else None,
    )
    run = grpo.train(ctx.profile, base=start, progress=False)
    where = SimpleNamespace(device=str(next(run.model.parameters()).device))
    completions = run.steps * grpo.RECIPE["group_size"] * grpo.RECIPE["prompts_per_step"]
    first, last = run.window("reward", True), run.window("reward", False)
    return Outcome(
        "lm:grpo",
        "pass",
        f"{run.steps} steps {on_gpu_detail(ctx, where)}: mean reward {first:.2f} -> {last:.2f}, "
        f"KL {run.kl_last:.3f}, held-out exact match {run.exact_match_before:.0%} -> "
        f"{run.exact_match_after:.0%}; {completions / run.seconds:,.0f} completions/s",
        figures={
            "completions_per_s": round(completions / run.seconds, 1),
            "reward_first": round(first, 3),
            "reward_last": round(last, 3),
            "kl_last": round(run.kl_last, 4),
            "exact_match_before": run.exact_match_before,
            "exact_match_after": run.exact_match_after,
            "peak_memory_mib": peak_mib(ctx.device),
        },
    )


def check_lm_qlora(ctx: Setup) -> Outcome:
    """One epoch of QLoRA (the frozen base in bitsandbytes' 4 bits) where bitsandbytes
    has kernels for the device; skipped with the reason elsewhere."""
    from rocm_dl_guide.core import files
    from rocm_dl_guide.lm import qlora

    ok, why = qlora.qlora_support(ctx.device)
    if not ok:
        return Outcome("lm:qlora", "skip", why)
    run = _one_lora_epoch(ctx, "qlora", qlora=True)
    if not run.qlora or run.adapter is None:
        raise AssertionError(f"qlora {run.qlora}, adapter {run.adapter}")
    return Outcome(
        "lm:qlora",
        "pass",
        f"4-bit base of {files.human_bytes(run.base_bytes)} {on_gpu_detail(ctx, run.result)}; "
        f"exact match {run.accuracy_before:.0%} -> {run.accuracy:.0%} after 1 epoch",
        figures={"tokens_per_s": round(run.tokens_per_s, 1), "accuracy": run.accuracy},
    )


def check_lm_fsdp(ctx: Setup) -> Outcome:
    """``train tiny-lm --nproc N --fsdp`` over all local GPUs (one shard per block)."""
    record = on_local_gpus(ctx, "lm:fsdp", "tiny-lm", "--fsdp")
    if isinstance(record, Outcome):
        return record
    return Outcome(
        "lm:fsdp",
        "pass",
        f"{record['world_size']} ranks, backend {record['backend']}, perplexity "
        f"{record['perplexity']:.0f}, {record['tokens_per_s']:,.0f} tokens/s",
        figures={"tokens_per_s": record["tokens_per_s"]},
    )


def check_lm_attention(ctx: Setup) -> Outcome:
    """Every SDPA kernel that runs on the device agrees with the math reference
    (bfloat16 on a GPU), and the fused one takes less peak memory at the longest
    length; names the kernel SDPA picks by itself."""
    from rocm_dl_guide.lm import attention

    dtype = attention.default_dtype(ctx.device)
    lengths = (2048, 8192) if ctx.device.type == "cuda" else (256, 1024)
    rows = attention.measure(lengths, ctx.device, dtype, iterations=3)
    if not attention.agree(rows, dtype):
        raise AssertionError(f"a kernel disagrees with math: {[r.to_dict() for r in rows]}")
    at = {r.backend: r for r in rows if r.seq_len == max(lengths) and r.ms is not None}
    fused = min((b for b in at if b != "math"), key=lambda b: at[b].peak_mb, default=None)
    if fused is None or not at[fused].peak_mb < at["math"].peak_mb:
        raise AssertionError(f"no fused kernel used less memory than math: {at}")
    picked = attention.default_backend(ctx.device, dtype)
    return Outcome(
        "lm:attention",
        "pass",
        f"{', '.join(sorted(at))} agree in {str(dtype).replace('torch.', '')}; at "
        f"{max(lengths)} tokens {fused} {at[fused].ms:.1f} ms / {at[fused].peak_mb:.0f} MB, "
        f"math {at['math'].ms:.1f} ms / {at['math'].peak_mb:.0f} MB; SDPA picks {picked}",
        figures={"picked": picked, **{f"{b}_ms": round(r.ms, 3) for b, r in at.items()}},
    )


def check_lm_generate(ctx: Setup) -> Outcome:
    """Generation on the decoder ``lm:bf16`` trained (or the cached ``tiny-lm``):
    cached and recomputed next-token logits agree, and the compiled static cache
    generates. The KV cache's speed-up at 256 new tokens is a figure, not a pass
    mark: it saves arithmetic, but a 12M-parameter model's step on a large GPU is
    bound by kernel launches, so recomputing the prefix can cost no more (0.76x on
    an H200, 1.07x on an H100 with the same code)."""
    import torch

    from rocm_dl_guide.lm import corpus, generation, pretrain

    weights = _lm_folder(ctx) / pretrain.WEIGHTS_NAME
    model, tokenizer, _ = generation.load(ctx.profile, weights if weights.is_file() else None)
    prompt = torch.tensor([tokenizer.encode(corpus.PROMPT).ids], device=ctx.device)
    cached, full, _ = generation.step_logits(model, prompt, 16)
    spread = max(float(f.max() - f.min()) for f in full)
    worst = max(float((a - b).abs().max()) for a, b in zip(cached, full, strict=True))
    if not worst <= 0.02 * spread:
        raise AssertionError(f"cached logits differ by {worst:.3g} (spread {spread:.3g})")
    rows = generation.curve(model, prompt, (64, 256))
    speedup = generation.speedup(rows, 256)
    compiled = generation.timed(model, prompt, 256, "static", compiled=True, iterations=3)
    return Outcome(
        "lm:generate",
        "pass",
        f"cached logits within {worst:.2g} of recomputed ({model.dtype}); KV cache "
        f"{speedup:.2f}x the speed of recomputing at 256 new tokens; static cache compiled "
        f"{compiled.tokens_per_s:,.0f} tokens/s",
        figures={
            "kv_speedup_256": round(speedup, 2),
            "compiled_tokens_per_s": compiled.tokens_per_s,
        },
    )


def check_lm_speculative(ctx: Setup) -> Outcome:
    """Speculative decoding on the decoder ``lm:bf16`` trained (or the cached
    ``tiny-lm``): the draft model (trained for its tokenizer on first use) and
    prompt lookup at each number of guesses, timed against greedy decoding
    (:func:`rocm_dl_guide.lm.speculative.compare`). Every generation must write
    greedy decoding's tokens; tokens/s, the acceptance rate and the speed-up are
    figures, not pass marks (they depend on the model's size, see the page)."""
    from rocm_dl_guide.lm import generation, pretrain, speculative

    weights = _lm_folder(ctx) / pretrain.WEIGHTS_NAME
    model, tokenizer, _ = generation.load(ctx.profile, weights if weights.is_file() else None)
    draft, _, _ = speculative.draft_model(ctx.profile, ctx.device, tokenizer)
    prompts = speculative.prompt_ids(tokenizer, ctx.device)
    new_tokens = speculative.NEW_TOKENS.get(ctx.profile.name, speculative.NEW_TOKENS["gpu"])
    rows = speculative.compare(model, prompts, new_tokens, speculative.sweep(), draft)
    changed = [f"{r.method} γ={r.gamma}" for r in rows if not r.identical]
    if changed:
        raise AssertionError(f"speculative decoding changed the greedy tokens: {changed}")
    c = speculative.cost_ratio(model, draft, prompts[0], new_tokens)
    greedy, best = rows[0], speculative.best(rows)
    drafted = max((r for r in rows if r.method == "draft model"), key=lambda r: r.speedup)
    return Outcome(
        "lm:speculative",
        "pass",
        f"greedy tokens kept by every configuration; greedy {greedy.tokens_per_s:,.0f} tokens/s, "
        f"best {best.method} γ={best.gamma} {best.tokens_per_s:,.0f} tokens/s "
        f"({best.speedup:.2f}x, α {best.acceptance_rate:.0%}); draft model best "
        f"{drafted.speedup:.2f}x at γ={drafted.gamma} (α {drafted.acceptance_rate:.0%}, c {c:.2f})",
        figures={
            "tokens_per_s": round(best.tokens_per_s, 1),
            "greedy_tokens_per_s": round(greedy.tokens_per_s, 1),
            "speedup": round(best.speedup, 2),
            "acceptance_rate": round(best.acceptance_rate or 0.0, 3),
            "best": f"{best.method} γ={best.gamma}",
            "draft_speedup": round(drafted.speedup, 2),
            "draft_acceptance_rate": round(drafted.acceptance_rate or 0.0, 3),
            "cost_ratio": round(c, 3),
        },
    )
