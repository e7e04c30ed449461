"""The selfcheck's checks of the book's PyTorch chapters, and what every check gets.

:class:`Setup` is what each check is given (the device, the sizes, the output
folder); each check returns an :class:`~rocm_dl_guide.selfcheck.report.Outcome`
(or several) and raises where it fails. Here: the case studies' training, their
speed under AMP and channels-last (with Inception v3's target), the loader, a
checkpoint and resume, the ONNX export with the inference backends, DDP, the
profiler and TunableOp; and the helpers the language-model checks share
(:func:`peak_mib`, :func:`on_gpu_detail`, :func:`on_local_gpus`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rocm_dl_guide.core import casestudies, profiles
from rocm_dl_guide.core.messages import one_line
from rocm_dl_guide.selfcheck.report import Outcome, device_facts

AMP_TARGET = 2.0
"""Inception v3 fine-tuning with AMP and channels-last: the speed-up over
float32 that a GPU should reach (a benchmark figure, not a pass/fail check)."""


@dataclass
class Setup:
    """What every check gets: where to run, at what sizes, where to write."""

    device: Any
    profile: profiles.Profile
    out_dir: Path
    steps: int
    gpu: bool

    @property
    def gpu_count(self) -> int:
        import torch

        return torch.cuda.device_count() if self.device.type == "cuda" else 0


def peak_mib(device) -> float | None:
    import torch

    if device.type != "cuda":
        return None
    return round(torch.cuda.max_memory_allocated() / 2**20, 1)


def on_gpu_detail(ctx: Setup, result) -> str:
    """Why we believe the loop trained on the GPU (raises if it did not)."""
    if ctx.device.type != "cuda":
        return f"on {result.device}"
    import torch

    allocated = torch.cuda.max_memory_allocated()
    if not str(result.device).startswith("cuda") or allocated == 0:
        raise AssertionError(
            f"the loop trained on {result.device} and the GPU allocated {allocated} bytes"
        )
    return f"on {result.device} ({allocated / 2**20:,.0f} MiB of GPU memory at peak)"


def check_case_study(ctx: Setup, example: str) -> Outcome:
    """Train one case study for one bounded epoch through its own ``train`` function."""
    run = casestudies.get(example).train_function()(
        profile=ctx.profile,
        epochs=1,
        checkpoint_dir=ctx.out_dir / "checkpoints" / example,
        progress=False,
    )
    final = run.result.final
    where = on_gpu_detail(ctx, run.result)
    accuracy = getattr(run, "test_accuracy", None)
    accuracy = final.val_accuracy if accuracy is None else accuracy
    return Outcome(
        f"train:{example}",
        "pass",
        f"1 epoch of {ctx.steps} steps {where}; accuracy {100 * accuracy:.1f}% on fixtures",
        figures={"img_per_s": final.images_per_second, "peak_memory_mib": peak_mib(ctx.device)},
    )


SPEED_VARIANTS = (
    "float32",
    "channels_last",
    "amp-bfloat16",
    "amp-float16",
    "amp+channels_last",
)


def check_training_speed(ctx: Setup, example: str) -> Outcome:
    """Training speed: float32 against autocast (bfloat16; float16 with a grad
    scaler) and channels-last."""
    from rocm_dl_guide.training import training_speed

    workload = casestudies.get(example).workload_function()(ctx.profile, ctx.device)
    model_fn, loader, image_size = workload
    steps, warmup, repeats = (20, 5, 3) if ctx.device.type == "cuda" else (3, 1, 1)
    comparison = training_speed.compare(
        model_fn,
        loader,
        ctx.device,
        steps=steps,
        warmup=warmup,
        repeats=repeats,
        variants=SPEED_VARIANTS,
    )
    frame = comparison.frame
    failed = frame[frame["note"].str.startswith("failed")]
    if len(failed):
        raise AssertionError("; ".join(f"{r.variant}: {r.note}" for r in failed.itertuples()))
    figs: dict[str, Any] = {
        f"{r.variant}_img_per_s": None
        if r.images_per_second != r.images_per_second
        else round(float(r.images_per_second), 1)
        for r in frame.itertuples()
    }
    amp_rows = frame[frame["variant"].str.startswith("amp") & frame["images_per_second"].notna()]
    figs["amp_speedup"] = float(amp_rows["speedup"].max()) if len(amp_rows) else None
    figs["channels_last_speedup"] = comparison.speedup("channels_last")
    reasons: dict[str, list[str]] = {}
    for r in frame.itertuples():
        if r.note.startswith("skipped: "):
            reasons.setdefault(r.note.removeprefix("skipped: ").split(",")[0], []).append(r.variant)
    skipped = [f"{', '.join(names)} ({why})" for why, names in reasons.items()]
    if example == "inception-v3":
        figs.update(inception_target(ctx, model_fn, image_size, comparison))
    detail = ", ".join(
        f"{r.variant} {r.images_per_second:,.0f}"
        for r in frame.itertuples()
        if r.images_per_second == r.images_per_second
    )
    detail = f"img/s: {detail}" + (f"; skipped: {'; '.join(skipped)}" if skipped else "")
    figs["peak_memory_mib"] = peak_mib(ctx.device)
    return Outcome(f"speed:{example}", "pass", detail, figures=figs)


def inception_target(ctx: Setup, model_fn, image_size, comparison) -> dict[str, Any]:
    """The AMP + channels-last speed-up against the 2x target, and the achieved
    FLOP/s as a fraction of the device's peak (FLOPs counted by PyTorch)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    speedup = comparison.speedup("amp+channels_last")
    model = model_fn().to(ctx.device).train()
    x = torch.randn(2, 3, image_size, image_size, device=ctx.device)
    with FlopCounterMode(display=False) as counter:
        out = model(x)
        (out[0] if isinstance(out, tuple) else out).sum().backward()
    flops_per_image = counter.get_total_flops() / 2
    rows = comparison.frame.set_index("variant")["images_per_second"]
    rate = rows.get("amp+channels_last")
    achieved = flops_per_image * rate / 1e12 if rate == rate and rate is not None else None
    peak = device_facts(ctx.device).get("peak_bf16_tflops") if ctx.device.type == "cuda" else None
    return {
        "target_speedup": AMP_TARGET,
        "target_met": bool(speedup >= AMP_TARGET) if speedup == speedup else None,
        "train_gflops_per_image": round(flops_per_image / 1e9, 2),
        "achieved_tflops": None if achieved is None else round(achieved, 2),
        "fraction_of_peak": round(achieved / peak, 4) if achieved and peak else None,
    }


def check_loader(ctx: Setup) -> Outcome:
    """DataLoader workers, and pinned memory with asynchronous copies on a GPU."""
    from rocm_dl_guide.casestudies import cifar10

    loader = cifar10.load(ctx.profile, device=ctx.device).train_loader
    x = y = None
    for k, (x, y) in enumerate(loader):
        if ctx.device.type == "cuda" and not x.is_pinned():
            raise AssertionError("the loader's batches are not in pinned memory")
        x, y = x.to(ctx.device, non_blocking=True), y.to(ctx.device, non_blocking=True)
        if k >= 2:
            break
    if x is None or x.device.type != ctx.device.type:
        raise AssertionError(f"batches did not reach {ctx.device}")
    if ctx.device.type != "cuda":
        why = "pinned memory and workers are the GPU path (no GPU)"
        return Outcome("dataloader", "skip", why)
    return Outcome(
        "dataloader",
        "pass",
        f"{loader.num_workers} workers, pinned batches, non-blocking copies to {x.device}",
    )


def check_resume(ctx: Setup) -> Outcome:
    """Checkpoint after one epoch, resume for a second; the checkpoint loads onto the device."""
    import torch

    from rocm_dl_guide.casestudies import cifar10

    folder = ctx.out_dir / "checkpoints" / "resume"
    cifar10.train(ctx.profile, epochs=1, checkpoint_dir=folder, progress=False)
    run = cifar10.train(ctx.profile, epochs=2, checkpoint_dir=folder, resume=True, progress=False)
    if run.result.resumed_from_epoch != 1 or len(run.result.history) != 2:
        raise AssertionError(
            f"resumed from epoch {run.result.resumed_from_epoch} with "
            f"{len(run.result.history)} epochs of history (expected 1 and 2)"
        )
    state = torch.load(run.result.checkpoint, map_location=ctx.device, weights_only=False)
    tensor = next(iter(state["model"].values()))
    if tensor.device.type != ctx.device.type:
        raise AssertionError(f"the checkpoint loaded onto {tensor.device}")
    detail = f"resumed after epoch 1, loaded onto {tensor.device}"
    return Outcome("checkpoint-resume", "pass", detail)


def check_inference(ctx: Setup) -> list[Outcome]:
    """Export Inception v3 to ONNX; run it on every importable backend, against PyTorch."""
    import importlib.util

    from rocm_dl_guide.optimization import backends, inference, onnx_files

    if importlib.util.find_spec("onnx") is None:
        why = "the onnx package is not installed (pip install onnx; not in the wheelhouse)"
        return [Outcome("onnx-export", "skip", why, 0.0)]
    start = time.perf_counter()
    prepared = onnx_files.export_inception(ctx.profile, ctx.out_dir / "inception_v3.onnx")
    model = prepared.model.to(ctx.device)
    ops = onnx_files.op_counts(prepared.onnx.path)
    detail = f"{sum(ops.values())} nodes, {len(ops)} operator types; {prepared.loaded.note}"
    checks = [Outcome("onnx-export", "pass", detail, round(time.perf_counter() - start, 1))]
    x = inference.image_batch(batch_size=2)
    mgx = backends.migraphx_status()
    ort_version = backends.onnxruntime_version()
    found = {
        "migraphx": (mgx.available, mgx.how),
        "onnxruntime": (ort_version is not None, "not installed"),
    }
    for name, (available, why_not) in found.items():
        if not available:
            checks.append(Outcome(f"inference:{name}", "skip", why_not, 0.0))
            continue
        start = time.perf_counter()
        try:
            compiled = inference.compile_model(prepared.onnx.path, name, batch_size=2)
            agree = inference.agreement(compiled, model, x, ctx.device)
            status = "pass" if agree.ok else "fail"
            detail = f"{compiled.summary()}; {agree.summary()}"
        except Exception as exc:  # noqa: BLE001 - one backend's failure is its check's
            status, detail = "fail", one_line(exc)
        checks.append(Outcome(f"inference:{name}", status, detail, time.perf_counter() - start))
    return checks


def on_local_gpus(ctx: Setup, name: str, example: str, *flags: str) -> dict | Outcome:
    """``train EXAMPLE --nproc N FLAGS`` over all local GPUs: its ``--json`` record,
    or the skip outcome of check ``name`` where there are fewer than two GPUs."""
    from rocm_dl_guide.distributed import scaling

    if ctx.gpu_count < 2:
        why = "one GPU" if ctx.gpu_count == 1 else "no GPU (the book runs it on gloo)"
        return Outcome(name, "skip", f"{name} over GPUs needs two or more: {why}")
    extra = (*flags, "--epochs", "1", "--profile", ctx.profile.name, "--data-source", "fixtures")
    folder = ctx.out_dir / "checkpoints" / name.replace(":", "-")
    run = scaling.train_cli(example, folder, nproc=ctx.gpu_count, extra=extra)
    record = run.record or {}
    if run.returncode != 0 or record.get("world_size") != ctx.gpu_count:
        raise AssertionError(f"exit {run.returncode}; {record or run.log[-300:]}")
    return record


def check_ddp(ctx: Setup) -> Outcome:
    """``train cifar10 --nproc N`` over all local GPUs (nccl)."""
    record = on_local_gpus(ctx, "ddp", "cifar10")
    if isinstance(record, Outcome):
        return record
    return Outcome(
        "ddp",
        "pass",
        f"{record['world_size']} ranks, backend {record['backend']}, test accuracy "
        f"{100 * record['test_accuracy']:.1f}%",
        figures={"img_per_s": record.get("img_per_s")},
    )


def check_profiler(ctx: Setup) -> Outcome:
    """torch.profiler on two training steps of the CIFAR-10 network; on a GPU the
    profile must also hold the GPU time of its kernels."""
    from rocm_dl_guide.optimization import profiling

    result = profiling.profile_step(
        ctx.profile,
        "training",
        steps=2,
        device=ctx.device,
        folder=ctx.out_dir / "profile",
    )
    on_gpu = ctx.device.type == "cuda"
    if on_gpu and not (result.frame["GPU self ms"] > 0).any():
        raise AssertionError("the profile recorded no GPU kernel time")
    top = result.frame.iloc[0]
    return Outcome(
        "profiler",
        "pass",
        f"{result.step_ms:.1f} ms per step; top operator {top['operator']} "
        f"({top['self %']:.0f}% of self time); trace {result.trace.name}",
        figures={"step_ms": round(result.step_ms, 3)},
    )


def check_tunableop(ctx: Setup) -> Outcome:
    """PyTorch's TunableOp tunes one GEMM and writes its results file (GPU only)."""
    from rocm_dl_guide.optimization import tuning

    if ctx.device.type != "cuda":
        return Outcome("tunableop", "skip", "TunableOp tunes GEMMs on a GPU (no GPU here)")
    result = tuning.tunableop_comparison(
        m=2048, n=2048, k=2048, folder=ctx.out_dir / "tunableop", iterations=20
    )
    if not result.ran or not result.results or not result.results_file.is_file():
        raise AssertionError(f"TunableOp did not tune: {result.reason or 'no results'}")
    return Outcome(
        "tunableop",
        "pass",
        f"fp16 GEMM 2048^3: {result.untuned.median_ms:.3f} ms default, "
        f"{result.tuned.median_ms:.3f} ms tuned ({result.speedup:.2f}x); "
        f"{len(result.results)} result(s) in {result.results_file.name}",
        figures={"speedup": round(result.speedup, 3)},
    )
