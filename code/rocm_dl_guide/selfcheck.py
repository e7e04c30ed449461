"""``selfcheck``: verify the guide's PyTorch path on this machine in one command.

``python -m rocm_dl_guide selfcheck --gpu`` (``make gpu-check``) refuses at once
where PyTorch sees no GPU; on a GPU machine it runs, offline, on generated
fixtures at the ``gpu`` profile's sizes (``--data-source fixtures``; random
weights):

- every PyTorch case study of the registry (:mod:`rocm_dl_guide.core.casestudies`:
  MNIST, Inception v3, CIFAR-10) for a bounded number of steps per epoch
  through the shared loop, checking that the work ran on the
  GPU (the loop's device, and the memory the GPU allocated);
- float32 against autocast in bfloat16 and in float16 with a gradient scaler,
  and channels-last, per case study (:func:`rocm_dl_guide.training.training_speed.compare`);
  for Inception v3 also the achieved FLOP/s as a fraction of the device's peak;
- DataLoader workers with pinned memory, a checkpoint and a resume;
- the ONNX export and the inference backends that are importable (MIGraphX,
  ONNX Runtime with its execution providers), compared with PyTorch;
- DDP over every local GPU when there are several (``nccl``, RCCL on ROCm);
- ``torch.profiler`` on two training steps, with the GPU's kernel times, and
  PyTorch's TunableOp tuning one GEMM and writing its results file.

It writes a report (``selfcheck.json`` and a readable ``selfcheck.txt``). Without
``--gpu`` the same checks run on the CPU at the ``smoke`` sizes, the GPU-only
ones reported as skipped with the reason. ``--record`` writes the verification
record the book shows ("Last verified on a GPU"), and only from a GPU run in
which every check passed.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from typing import Any

from rocm_dl_guide.core import casestudies, preflight, profiles
from rocm_dl_guide.core.files import atomic_write
from rocm_dl_guide.core.messages import one_line

REPORT_FORMAT = 1
DATA_DIR = Path(__file__).parent / "data"
RECORD_FILE = DATA_DIR / "gpu-verification.json"
"""The tracked verification record: written only by ``selfcheck --gpu --record``."""
PEAK_FILE = DATA_DIR / "peak_matrix_throughput.json"
EXAMPLES = tuple(cs.name for cs in casestudies.REGISTRY.values() if cs.workload is not None)
"""The case studies selfcheck trains and times: the registry's with a training workload."""
AMP_TARGET = 2.0
"""Inception v3 fine-tuning with AMP and channels-last: the speed-up over
float32 that a GPU should reach (a benchmark figure, not a pass/fail check)."""


class RecordError(RuntimeError):
    """A verification record asked for from a run that cannot vouch for a GPU."""


@dataclass
class Outcome:
    """One check's outcome: ``pass``, ``fail`` or ``skip`` (with the reason)."""

    name: str
    status: str
    detail: str
    seconds: float | None = None
    """Wall time (set by :func:`run` when the check does not measure its own)."""
    figures: dict[str, Any] = field(default_factory=dict)


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


# --------------------------------------------------------------------------- report


@dataclass
class Report:
    """The whole run: the machine, the versions and every check."""

    mode: str
    device: dict[str, Any]
    versions: dict[str, str]
    profile: str
    data_source: str
    steps: int
    started: str
    checks: list[Outcome]
    commit: str | None = None
    format: int = REPORT_FORMAT

    @property
    def passed(self) -> bool:
        """No check failed, and at least one ran."""
        statuses = [c.status for c in self.checks]
        return "fail" not in statuses and "pass" in statuses

    def check(self, name: str) -> Outcome | None:
        return next((c for c in self.checks if c.name == name), None)

    def figures(self) -> dict[str, Any]:
        """The summary figures: images/s per example and variant, the speed-ups,
        peak GPU memory and the Inception v3 target; the language-model checks'
        figures under their own names (``lm:bf16``'s tokens/s, ...)."""
        out: dict[str, Any] = {}
        for example in EXAMPLES:
            check = self.check(f"speed:{example}")
            if check and check.figures:
                out[example] = check.figures
        for check in self.checks:
            if check.name.startswith("lm:") and check.status == "pass" and check.figures:
                out[check.name] = check.figures
        peaks = [c.figures.get("peak_memory_mib") for c in self.checks]
        peaks = [p for p in peaks if isinstance(p, (int, float))]
        out["peak_memory_mib"] = max(peaks) if peaks else None
        return out

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["passed"] = self.passed
        data["figures"] = self.figures()
        return data

    def summary(self) -> str:
        dev = self.device
        lines = [
            f"selfcheck ({self.mode}) on {dev.get('name')}"
            + (f" ({dev['arch']})" if dev.get("arch") else "")
            + f": {'PASSED' if self.passed else 'FAILED'}",
            f"profile {self.profile} sizes, data source {self.data_source}, "
            f"{self.steps} steps per epoch; "
            + ", ".join(f"{k} {v}" for k, v in self.versions.items()),
        ]
        for c in self.checks:
            lines.append(f"  [{c.status:<4}] {c.name:<22} {c.detail} ({c.seconds or 0:.1f} s)")
        for example, figs in self.figures().items():
            if isinstance(figs, dict):
                lines.append(f"  {example}: " + _figure_line(figs))
        return "\n".join(lines)

    def write(self, out_dir: str | os.PathLike) -> tuple[Path, Path]:
        """``selfcheck.json`` and ``selfcheck.txt`` in ``out_dir``, written atomically."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        paths = out / "selfcheck.json", out / "selfcheck.txt"
        with atomic_write(paths[0], "w") as f:
            json.dump(self.to_dict(), f, indent=1, default=str)
        with atomic_write(paths[1], "w") as f:
            f.write(self.summary() + "\n")
        return paths


def _figure_line(figs: dict[str, Any]) -> str:
    parts = []
    for key in ("float32", "amp-bfloat16", "amp-float16", "amp+channels_last"):
        value = figs.get(f"{key}_img_per_s")
        if isinstance(value, (int, float)):
            parts.append(f"{key} {value:,.0f} img/s")
    for key in ("amp_speedup", "channels_last_speedup"):
        if isinstance(figs.get(key), (int, float)):
            parts.append(f"{key.replace('_', ' ')} {figs[key]:.2f}x")
    if isinstance(figs.get("fraction_of_peak"), (int, float)):
        parts.append(f"{100 * figs['fraction_of_peak']:.1f}% of peak")
    if not parts:  # the other checks' figures (tokens/s, perplexity, ...), as recorded
        parts = [f"{k.replace('_', ' ')} {_figure(v)}" for k, v in figs.items()]
    return "; ".join(parts) or "no figures"


def _figure(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"


def load_report(path: str | os.PathLike) -> Report:
    """Read a ``selfcheck.json``; raises ``ValueError`` with one clear message."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        if data.get("format") != REPORT_FORMAT:
            raise ValueError(f"report format {data.get('format')!r}, not {REPORT_FORMAT}")
        data.pop("passed", None)
        data.pop("figures", None)
        data["checks"] = [Outcome(**c) for c in data["checks"]]
        return Report(**data)
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as exc:
        raise ValueError(f"{path}: not a selfcheck report ({one_line(exc)})") from None


# --------------------------------------------------------------------------- machine facts


def device_facts(device) -> dict[str, Any]:
    """Name, architecture, count, memory and the peak matrix throughput if known."""
    import torch

    from rocm_dl_guide.core import device as devices

    if device.type != "cuda":
        return {"type": "cpu", "name": str(devices.describe()), "arch": None, "count": 0}
    props = torch.cuda.get_device_properties(0)
    hip = getattr(torch.version, "hip", None)
    arch = getattr(props, "gcnArchName", None) if hip else f"sm_{props.major}{props.minor}"
    peak = peak_throughput(props.name)
    return {
        "type": "cuda",
        "name": props.name,
        "arch": arch.split(":")[0] if arch else None,
        "count": torch.cuda.device_count(),
        "memory_gib": round(props.total_memory / 2**30, 1),
        "runtime": f"ROCm/HIP {hip}" if hip else f"CUDA {torch.version.cuda}",
        "peak_bf16_tflops": peak["bf16_tflops"] if peak else None,
        "peak_source": peak["source"] if peak else None,
    }


def peak_throughput(name: str) -> dict[str, Any] | None:
    """The peak dense 16-bit matrix throughput entry for a device name, if known."""
    table = json.loads(PEAK_FILE.read_text(encoding="utf-8"))["devices"]
    lowered = name.lower()
    for entry in table:
        if all(word.lower() in lowered for word in entry["match"]):
            return entry
    return None


def versions() -> dict[str, str]:
    """Python, this package, PyTorch, torchvision, ONNX Runtime and ONNX, under
    the names the provenance note of every page uses."""
    from rocm_dl_guide.core.provenance import library_versions

    return library_versions(("PyTorch", "torchvision", "ONNX Runtime", "ONNX"))


def git_commit() -> str | None:
    """The repository's commit, when run from a clone (``None`` otherwise)."""
    try:
        done = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            cwd=Path(__file__).parent,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


# --------------------------------------------------------------------------- checks


def _peak_mib(device) -> float | None:
    import torch

    if device.type != "cuda":
        return None
    return round(torch.cuda.max_memory_allocated() / 2**20, 1)


def _on_gpu_detail(ctx: Setup, result) -> str:
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
    where = _on_gpu_detail(ctx, run.result)
    accuracy = getattr(run, "test_accuracy", None)
    accuracy = final.val_accuracy if accuracy is None else accuracy
    return Outcome(
        f"train:{example}",
        "pass",
        f"1 epoch of {ctx.steps} steps {where}; accuracy {100 * accuracy:.1f}% on fixtures",
        figures={"img_per_s": final.images_per_second, "peak_memory_mib": _peak_mib(ctx.device)},
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
        figs.update(_inception_target(ctx, model_fn, image_size, comparison))
    detail = ", ".join(
        f"{r.variant} {r.images_per_second:,.0f}"
        for r in frame.itertuples()
        if r.images_per_second == r.images_per_second
    )
    detail = f"img/s: {detail}" + (f"; skipped: {'; '.join(skipped)}" if skipped else "")
    figs["peak_memory_mib"] = _peak_mib(ctx.device)
    return Outcome(f"speed:{example}", "pass", detail, figures=figs)


def _inception_target(ctx: Setup, model_fn, image_size, comparison) -> dict[str, Any]:
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


def _on_local_gpus(ctx: Setup, name: str, example: str, *flags: str) -> dict | Outcome:
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
    record = _on_local_gpus(ctx, "ddp", "cifar10")
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
        "training",
        steps=2,
        profile=ctx.profile,
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


def _lm_folder(ctx: Setup) -> Path:
    return ctx.out_dir / "checkpoints" / "tiny-lm"


def check_lm_bf16(ctx: Setup) -> Outcome:
    """One epoch of ``tiny-lm`` pretraining at the profile's size under autocast
    (bfloat16 where the device has it): the loss must be finite and the held-out
    perplexity below the untrained model's."""
    import math

    from rocm_dl_guide.lm import pretrain
    from rocm_dl_guide.training.train import autocast_dtype

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
        f"autocast {_on_gpu_detail(ctx, run.result)}; perplexity {run.perplexity_before:.0f} "
        f"-> {run.perplexity:.0f}; {run.tokens_per_s:,.0f} tokens/s",
        figures={
            "tokens_per_s": round(run.tokens_per_s, 1),
            "perplexity": round(run.perplexity, 2),
            "peak_memory_mib": _peak_mib(ctx.device),
        },
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
        f"{_on_gpu_detail(ctx, run.result)}; exact match {run.accuracy_before:.0%} -> "
        f"{run.accuracy:.0%} after 1 epoch; adapter {run.adapter_bytes / 1024:.0f} KiB",
        figures={"tokens_per_s": round(run.tokens_per_s, 1), "accuracy": run.accuracy},
    )


def check_lm_qlora(ctx: Setup) -> Outcome:
    """One epoch of QLoRA (the frozen base in bitsandbytes' 4 bits) where bitsandbytes
    has kernels for the device; skipped with the reason elsewhere."""
    from rocm_dl_guide.core import files
    from rocm_dl_guide.lm import lora

    ok, why = lora.qlora_support(ctx.device)
    if not ok:
        return Outcome("lm:qlora", "skip", why)
    run = _one_lora_epoch(ctx, "qlora", qlora=True)
    if not run.qlora or run.adapter is None:
        raise AssertionError(f"qlora {run.qlora}, adapter {run.adapter}")
    return Outcome(
        "lm:qlora",
        "pass",
        f"4-bit base of {files.human_bytes(run.base_bytes)} {_on_gpu_detail(ctx, run.result)}; "
        f"exact match {run.accuracy_before:.0%} -> {run.accuracy:.0%} after 1 epoch",
        figures={"tokens_per_s": round(run.tokens_per_s, 1), "accuracy": run.accuracy},
    )


def check_lm_fsdp(ctx: Setup) -> Outcome:
    """``train tiny-lm --nproc N --fsdp`` over all local GPUs (one shard per block)."""
    record = _on_local_gpus(ctx, "lm:fsdp", "tiny-lm", "--fsdp")
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
    cached and recomputed next-token logits agree, the KV cache is faster than
    recomputing at 256 new tokens, and the compiled static cache generates."""
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
    if not speedup > 1:
        raise AssertionError(f"the KV cache was not faster at 256 new tokens ({speedup:.2f}x)")
    compiled = generation.timed(model, prompt, 256, "static", compiled=True, iterations=3)
    return Outcome(
        "lm:generate",
        "pass",
        f"cached logits within {worst:.2g} of recomputed ({model.dtype}); KV cache "
        f"{speedup:.1f}x faster at 256 new tokens; static cache compiled "
        f"{compiled.tokens_per_s:,.0f} tokens/s",
        figures={
            "kv_speedup_256": round(speedup, 2),
            "compiled_tokens_per_s": compiled.tokens_per_s,
        },
    )


# --------------------------------------------------------------------------- the run


_CHECKS: tuple[tuple[str, Callable[[Setup], Outcome | list[Outcome]]], ...] = (
    *((f"train:{e}", partial(check_case_study, example=e)) for e in EXAMPLES),
    *((f"speed:{e}", partial(check_training_speed, example=e)) for e in EXAMPLES),
    ("dataloader", lambda ctx: check_loader(ctx)),
    ("checkpoint-resume", lambda ctx: check_resume(ctx)),
    ("inference", lambda ctx: check_inference(ctx)),
    ("ddp", lambda ctx: check_ddp(ctx)),
    ("profiler", lambda ctx: check_profiler(ctx)),
    ("tunableop", lambda ctx: check_tunableop(ctx)),
    ("lm:bf16", lambda ctx: check_lm_bf16(ctx)),
    ("lm:lora", lambda ctx: check_lm_lora(ctx)),
    ("lm:qlora", lambda ctx: check_lm_qlora(ctx)),
    ("lm:fsdp", lambda ctx: check_lm_fsdp(ctx)),
    ("lm:attention", lambda ctx: check_lm_attention(ctx)),
    ("lm:generate", lambda ctx: check_lm_generate(ctx)),
)
CHECK_NAMES = tuple(name for name, _ in _CHECKS)
"""The checks in the order they run (``--only`` picks among them)."""


def run_profile(gpu: bool, steps: int) -> profiles.Profile:
    """The sizes to check at: the ``gpu`` profile's on a GPU, ``smoke``'s on the CPU;
    always the fixtures (offline), with ``steps`` training batches per epoch."""
    base = profiles.get("gpu" if gpu else "smoke")
    sized = replace(base, max_train_batches=steps)
    return profiles.with_data_source(sized, "fixtures")


def run(
    gpu: bool,
    out_dir: str | os.PathLike,
    steps: int = 20,
    only: Iterable[str] | None = None,
    log: Callable[[str], None] = print,
) -> Report:
    """Run the checks (all, or ``only`` these names) and return the report.

    ``gpu=True`` raises :class:`~rocm_dl_guide.core.preflight.NoGPUError` at once where
    PyTorch sees no GPU.
    Each check's failure is recorded in the report, not raised.
    """
    import torch

    device = preflight.check(gpu)
    wanted = list(only) if only else list(CHECK_NAMES)
    unknown = sorted(set(wanted) - set(CHECK_NAMES))
    if unknown:
        raise ValueError(f"unknown check(s) {unknown}: choose from {', '.join(CHECK_NAMES)}")
    if steps < 1:
        raise ValueError(f"steps must be at least 1, got {steps}")
    out = Path(out_dir)
    ctx = Setup(device, run_profile(gpu, steps), out, steps, gpu)
    report = Report(
        mode="gpu" if gpu else "cpu",
        device=device_facts(device),
        versions=versions(),
        profile=ctx.profile.name,
        data_source=ctx.profile.data_source,
        steps=steps,
        started=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        checks=[],
        commit=git_commit(),
    )
    for name, step in _CHECKS:
        if name not in wanted:
            continue
        log(f"selfcheck: {name} ...")
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats()
        start = time.perf_counter()
        try:
            got = step(ctx)
        except Exception as exc:  # noqa: BLE001 - a failed check is reported, not raised
            got = Outcome(name, "fail", f"{type(exc).__name__}: {one_line(exc)}"[:400])
        for check in got if isinstance(got, list) else [got]:
            if check.seconds is None:
                check.seconds = round(time.perf_counter() - start, 1)
            report.checks.append(check)
            log(f"  [{check.status}] {check.name}: {check.detail}")
    return report


# --------------------------------------------------------------------------- verification record


def write_record(report: Report, path: str | os.PathLike = RECORD_FILE) -> Path:
    """Write the "last verified on a GPU" record from a passed GPU run.

    Refuses (:class:`RecordError`) a CPU run, a run with a failed check, or one
    that skipped a case study: the record vouches for the book's GPU path.
    """
    if report.mode != "gpu" or report.device.get("type") != "cuda":
        raise RecordError("a verification record comes only from `selfcheck --gpu` on a GPU")
    if not report.passed:
        failed = [c.name for c in report.checks if c.status == "fail"]
        raise RecordError(f"not recording a failed run (failed: {', '.join(failed)})")
    required = [n for n in CHECK_NAMES if n.startswith(("train:", "speed:"))]
    missing = [n for n in required if not (c := report.check(n)) or c.status != "pass"]
    if missing:
        raise RecordError(f"not recording a partial run (did not pass: {', '.join(missing)})")
    record = {
        "format": REPORT_FORMAT,
        "date": report.started,
        "commit": report.commit,
        "device": report.device,
        "versions": report.versions,
        "figures": report.figures(),
        "checks": {c.name: c.status for c in report.checks},
    }
    with atomic_write(Path(path), "w") as f:
        json.dump(record, f, indent=1, default=str)
        f.write("\n")
    return Path(path)


def latest_record(path: str | os.PathLike = RECORD_FILE) -> dict[str, Any] | None:
    """The tracked verification record, or ``None`` when no GPU run has written one."""
    path = Path(path)
    if not path.is_file():
        return None
    record = json.loads(path.read_text(encoding="utf-8"))
    if record.get("format") != REPORT_FORMAT or "device" not in record:
        raise ValueError(f"{path}: not a verification record of format {REPORT_FORMAT}")
    return record


def stamp(example: str | None = None, path: str | os.PathLike = RECORD_FILE) -> str:
    """Markdown for the book: when the PyTorch path last passed ``selfcheck --gpu``,
    on what, and (for ``example``) the figures of that run."""
    record = latest_record(path)
    if record is None:
        return (
            "**Last verified on a GPU:** not yet. Every example here has run on the CPU; "
            "`make gpu-check` on a GPU machine runs the GPU path and writes the record "
            "shown here."
        )
    dev = record["device"]
    arch = f", {dev['arch']}" if dev.get("arch") else ""
    commit = (record.get("commit") or "")[:10]
    ver = record.get("versions", {})
    text = (
        f"**Last verified on a GPU:** {record['date']} on {dev.get('name')} ({dev.get('runtime')}"
        f"{arch}), PyTorch {ver.get('PyTorch')}, commit `{commit or 'unknown'}`, "
        "by `make gpu-check`."
    )
    figs = record.get("figures", {}).get(example) if example else None
    if figs:
        text += f" {example}: " + _figure_line(figs) + "."
    return text
