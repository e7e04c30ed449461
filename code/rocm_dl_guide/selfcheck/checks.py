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
from rocm_dl_guide.selfcheck.report import Outcome, figure_text


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


def run_sweep(ctx: Setup, workload, example: str):
    """The sweep of ``example`` under its plan: ``training_speed.GPU_PLANS`` on a
    GPU, the small ``CPU_PLAN`` on a CPU."""
    from rocm_dl_guide.training import training_speed

    gpu = ctx.device.type == "cuda"
    plan = training_speed.GPU_PLANS[example] if gpu else training_speed.CPU_PLAN
    return training_speed.run_plan(workload, ctx.device, plan)


def raise_eager_failures(result) -> str:
    """Raise where an eager variant failed; return the compiled ones' failures as a
    clause for the check's detail (a compiler's failure is reported, not fatal: the
    kernels checks cover the compiler)."""
    from rocm_dl_guide.training.training_speed import Variant

    failed = [r for r in result.rows if r["note"].startswith("failed")]
    eager = [r for r in failed if Variant.parse(r["variant"]).compile is None]
    if eager:
        raise AssertionError(
            "; ".join(f"{r['variant']} at {r['batch']}: {r['note']}" for r in eager)
        )
    return "".join(f"; {r['variant']} at {r['batch']} {r['note']}" for r in failed)


def sweep_figures(result) -> dict[str, Any]:
    """The record's figures of a sweep: ``best`` (variant, batch, rate, TFLOP/s,
    fraction of peak, busy fraction), ``amp_speedup_at_best_batch``, float32,
    autocast and channels-last at that batch (under the names the earlier records
    used), the peak memory and every row, for the pages' figures."""
    summary = result.to_dict()
    best = summary["best"]
    batch = best["batch"] if best else None
    unit = "img" if result.unit == "images" else "tokens"

    def at(variant: str):
        rate = result.rate(variant, batch) if batch else None
        return None if rate is None else round(rate, 1)

    figs: dict[str, Any] = {"best": best, "amp_speedup_at_best_batch": None}
    figs["amp_speedup_at_best_batch"] = summary["amp_speedup_at_best_batch"]
    if result.unit == "images":
        figs |= {
            "float32_img_per_s": at("fp32"),
            "channels_last_img_per_s": at("fp32+cl"),
            "amp-bfloat16_img_per_s": at("bf16"),
            "amp-float16_img_per_s": at("fp16") or at("fp16+cl"),
            "amp+channels_last_img_per_s": at("bf16+cl"),
            "amp_speedup": summary["amp_speedup_at_best_batch"],
            "channels_last_speedup": result.speedup("fp32+cl", "fp32", batch) if batch else None,
        }
    figs |= {
        f"{unit}_per_s": best[f"{result.unit}_per_s"] if best else None,
        "tflops": best["tflops"] if best else None,
        "fraction_of_peak": best["fraction_of_peak"] if best else None,
        "busy_fraction": best["busy_fraction"] if best else None,
        "gflops_per_sample": round(result.flops_per_sample / 1e9, 4),
        "peak_memory_mib": max(
            (r["peak_memory_mib"] for r in result.rows if r["peak_memory_mib"]), default=None
        ),
        "rows": [
            [r["batch"], r["variant"], r[f"{result.unit}_per_s"], r["busy_fraction"]]
            for r in result.rows
            if r[f"{result.unit}_per_s"] is not None
        ],
    }
    return figs


def check_training_speed(ctx: Setup, example: str) -> Outcome:
    """The training step swept over batch sizes and variants (float32, channels-last,
    autocast bf16 and fp16, compiled, graphs, fused optimizer), with FLOPs, the
    busy fraction and peak memory; on a GPU also the real loader against the model."""
    from rocm_dl_guide.training import training_speed

    workload = casestudies.get(example).workload_function()(ctx.profile, ctx.device)
    result = run_sweep(ctx, training_speed.from_workload(example, workload), example)
    compile_failures = raise_eager_failures(result)
    figs = sweep_figures(result)
    best = figs["best"]
    if best is None:
        raise AssertionError("no variant ran: " + "; ".join({r["note"] for r in result.rows}))
    if ctx.device.type == "cuda" and workload.loaders:
        figs["end_to_end"] = input_figures(ctx, workload, result, best)
    rate = figure_text(best["images_per_s"])
    detail = (
        f"best {best['variant']} at batch {best['batch']}: {rate} img/s"
        + (f", {best['fraction_of_peak']:.1%} of peak" if best["fraction_of_peak"] else "")
        + (f", busy {best['busy_fraction']:.0%}" if best["busy_fraction"] is not None else "")
        + f"; {len(figs['rows'])} of {len(result.rows)} points ran"
    )
    if figs.get("amp_speedup_at_best_batch"):
        detail += f"; autocast {figs['amp_speedup_at_best_batch']:.2f}x float32 at that batch"
    detail += compile_failures
    return Outcome(f"speed:{example}", "pass", detail, figures=figs)


def _samples_per_epoch(loader) -> int:
    dataset = getattr(loader, "dataset", None)
    return len(dataset) if dataset is not None else int(loader.num_samples)


def input_figures(ctx: Setup, workload, result, best) -> list[dict[str, Any]]:
    """Whether the data keeps up: each of the case study's real loaders alone and end
    to end with the best eager variant, against that variant's model-only rate, at
    the best batch (or the largest one of which the data set holds two batches)."""
    from rocm_dl_guide.training import input_speed, training_speed

    out = []
    for name, make_loader in workload.loaders.items():
        loader = make_loader(best["batch"])
        fits = [r for r in result.measured() if 2 * r["batch"] <= _samples_per_epoch(loader)
                and training_speed.Variant.parse(r["variant"]).compile is None]  # fmt: skip
        if not fits:
            continue
        batch = max(r["batch"] for r in fits if r["batch"] <= best["batch"])
        row = max((r for r in fits if r["batch"] == batch), key=lambda r: r["images_per_s"])
        if batch != best["batch"]:
            loader = make_loader(batch)
        variant = training_speed.Variant.parse(row["variant"])
        step = training_speed.variant_step(workload, variant, ctx.device)
        speed = input_speed.measure(
            loader, step, ctx.device, row["images_per_s"], batches=20, warmup=3
        )
        out.append({
            "loader": name,
            "variant": row["variant"],
            "batch": batch,
            "samples_per_epoch": _samples_per_epoch(loader),
            "model_img_per_s": row["images_per_s"],
            "loader_img_per_s": round(speed.loader_samples_per_s, 1),
            "end_to_end_img_per_s": round(speed.end_to_end_samples_per_s, 1),
            "fraction": round(speed.fraction, 3),
        })  # fmt: skip
    return out


def check_loader(ctx: Setup) -> Outcome:
    """DataLoader workers, and pinned memory with asynchronous copies on a GPU."""
    from rocm_dl_guide.casestudies import cifar10

    loader = cifar10.load(ctx.profile, device=ctx.device, on_device=False).train_loader
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
