"""Training speed of the shared loop's step, swept over batch sizes and variants.

:func:`sweep` is ``bench training``, ``selfcheck``'s ``speed:*`` checks and the
training pages' speed figures. It times exactly the step every case study
trains with (:func:`rocm_dl_guide.training.train.step_function`) on one batch
kept on the device, so data loading is not measured
(:mod:`rocm_dl_guide.training.input_speed` measures the loaders). Each point
has its rate, its step time, its FLOP/s counted by PyTorch and the fraction of
the device's peak, the fraction of the time the GPU was busy (kernel time over
wall time, from ``torch.profiler``) and its peak memory. :func:`from_record`
reads the same rows back from the GPU verification record, for a build
without a GPU. (Inference precision is :mod:`rocm_dl_guide.optimization.precision`.)
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

import torch
from torch import nn

from rocm_dl_guide.core.device import cpu_has_native_bf16
from rocm_dl_guide.training import setup, train
from rocm_dl_guide.training.variants import CPU_VARIANTS, GPU_VARIANTS, Variant

if TYPE_CHECKING:  # pragma: no cover
    import pandas


class Workload(NamedTuple):
    """What a case study's ``training_workload`` returns for timing its training step."""

    model_fn: Callable[[], nn.Module]
    """A fresh model each call."""
    loader: Iterable
    """Its training loader (a few batches are taken from it)."""
    image_size: int | None = None
    """The input's height and width, when the case study has a choice."""
    loss_fn: Callable | None = None
    """The training loss (default cross-entropy)."""
    optimizer_fn: Callable[..., torch.optim.Optimizer] | None = None
    """``optimizer_fn(params, fused=bool)`` for :func:`sweep` (default :func:`sgd`)."""
    unit: str = "images"
    """What a sample counts as in a rate: ``images``, or ``tokens``."""
    per_sample: int = 1
    """Units per sample (a sequence's tokens)."""
    aux_logits_weight: float | None = None
    """The auxiliary head's loss weight (Inception v3)."""
    loaders: dict[str, Callable[[int], Iterable]] | None = None
    """The training loaders to measure against the model (``input_speed``), by a
    short description, each a function of the batch size."""


GPU_PLANS: dict[str, dict] = {
    "mnist-pytorch": {
        "batches": (2048,),
        "variants": ("fp32", "bf16+cl"),
        "only": {},
        "budget_s": 10,
    },
    "cifar10": {
        "batches": (256, 8192),
        "variants": ("fp32", "bf16+cl"),
        "only": {"bf16+graphs+fused": (256, 8192)},
        "budget_s": 35,
    },
    "inception-v3": {
        "batches": (64, 256),
        "variants": ("fp32", "bf16+cl"),
        "only": {"fp32+cl": (256,), "bf16": (256,)},
        "budget_s": 95,
    },
    "tiny-lm": {
        "batches": (32,),
        "variants": ("bf16+fused",),
        "only": {"bf16+compile+fused": (32, 64)},
        "budget_s": 60,
    },
}
"""The sweep ``make gpu-check`` (and a page built on a GPU) runs, sized for a few
minutes in all: batch sizes, variants at every batch, and more at the batches
named under ``only`` (each point of Inception v3 costs seconds of cuDNN or MIOpen
autotuning, each compile more); ``budget_s`` ends a sweep that overruns (its
remaining rows say so). ``bench training`` sweeps further. tiny-lm's is at
GPT-2 small's shape (the ``full`` profile's). CIFAR-10's smaller batch is 256,
not 512: the loaders are measured end to end at a batch the data set holds
twice, and the fixture's 1,000 training images hold two of 256 but not of 512
(the record of 2026-11-27 has no CIFAR-10 end-to-end figure for that reason)."""
CPU_PLAN: dict = {"batches": (2, 4), "variants": ("fp32", "fp32+cl", "bf16"), "only": {},
                  "budget_s": None}  # fmt: skip
"""On a CPU, a sweep small enough for the test suite and a page."""


class SweepWorkload(NamedTuple):
    """What :func:`sweep` trains: a case study's model, one real batch and its loss
    (:func:`from_workload` makes one from a case study's :class:`Workload`)."""

    name: str
    model_fn: Callable[[], nn.Module]
    batch: tuple[torch.Tensor, torch.Tensor]
    """One batch from the case study's own loader: larger batches are drawn from its samples."""
    unit: str = "images"
    per_sample: int = 1
    loss_fn: Callable | None = None
    optimizer_fn: Callable[..., torch.optim.Optimizer] | None = None
    aux_logits_weight: float | None = None

    @property
    def image_layout(self) -> bool:
        """Whether channels-last applies (4-D image batches)."""
        return self.batch[0].dim() == 4


def from_workload(name: str, workload: Workload) -> SweepWorkload:
    """The sweep's view of a case study's workload: its first training batch."""
    for batch in workload.loader:
        x, y = train.split_batch(batch)
        break
    else:
        raise ValueError(f"{name}: the training loader produced no batches")
    return SweepWorkload(
        name, workload.model_fn, (x, y), workload.unit, workload.per_sample,
        workload.loss_fn, workload.optimizer_fn, workload.aux_logits_weight,
    )  # fmt: skip


def sgd(params, fused: bool = False) -> torch.optim.Optimizer:
    """The case studies' optimizer for timing: SGD with momentum, fused or ``foreach``."""
    return torch.optim.SGD(params, lr=0.01, momentum=0.9, fused=fused or None)


@dataclass
class Sweep:
    """What :func:`sweep` returns: one row per (batch, variant), measured in one run."""

    workload: str
    device: str
    unit: str
    rows: list[dict]
    flops_per_sample: float | None
    peak_tflops: float | None
    notes: dict[str, str]
    """Why a column is null on this device (``busy_fraction``, ``fraction_of_peak``, ...)."""

    @property
    def rate_key(self) -> str:
        return f"{self.unit}_per_s"

    def measured(self) -> list[dict]:
        return [r for r in self.rows if r[self.rate_key] is not None]

    def best(self) -> dict | None:
        """The fastest measured row."""
        rows = self.measured()
        return max(rows, key=lambda r: r[self.rate_key]) if rows else None

    def rate(self, variant: str, batch: int) -> float | None:
        for r in self.rows:
            if r["variant"] == variant and r["batch"] == batch:
                return r[self.rate_key]
        return None

    def speedup(self, variant: str, over: str, batch: int) -> float | None:
        """``variant``'s rate over ``over``'s at ``batch`` (``None`` if either did not run)."""
        a, b = self.rate(variant, batch), self.rate(over, batch)
        return round(a / b, 3) if a and b else None

    def amp_speedup_at_best_batch(self) -> float | None:
        """The best eager autocast row over float32 at the best row's batch."""
        best = self.best()
        if best is None:
            return None
        amp = [
            r[self.rate_key]
            for r in self.measured()
            if r["batch"] == best["batch"]
            and Variant.parse(r["variant"]).amp_dtype
            and Variant.parse(r["variant"]).compile is None
        ]
        base = self.rate("fp32", best["batch"])
        return round(max(amp) / base, 3) if amp and base else None

    def plot(self, title: str | None = None):
        """Rate and busy fraction against the batch size, a line per variant
        (:func:`rocm_dl_guide.core.plots.plot_training_sweep`); returns the Figure."""
        from rocm_dl_guide.core.plots import plot_training_sweep

        return plot_training_sweep(self, title)

    def frame(self) -> pandas.DataFrame:
        import pandas as pd

        return pd.DataFrame(self.rows)

    def to_dict(self) -> dict:
        best = self.best()
        return {
            "workload": self.workload,
            "device": self.device,
            "unit": self.unit,
            "flops_per_sample": self.flops_per_sample,
            "peak_tflops": self.peak_tflops,
            "notes": self.notes,
            "best": None if best is None else {k: best[k] for k in _best_keys(self.rate_key)},
            "amp_speedup_at_best_batch": self.amp_speedup_at_best_batch(),
            "rows": self.rows,
        }

    def summary(self) -> str:
        """The rows as a fixed-width table, then the notes."""
        key = self.rate_key
        rate = f"{self.unit}/s"
        head = f"{'batch':>6} {'variant':<24} {rate:>14} {'step ms':>9} {'TFLOP/s':>8} " \
               f"{'of peak':>8} {'busy':>6} {'peak MiB':>9}"  # fmt: skip
        lines = [f"bench training {self.workload} on {self.device}", head]

        def cell(v, fmt):
            return "-" if v is None else format(v, fmt)

        for r in self.rows:
            lines.append(
                f"{r['batch']:>6} {r['variant']:<24} {cell(r[key], ',.0f'):>14} "
                f"{cell(r['step_ms'], '.2f'):>9} {cell(r['tflops'], '.2f'):>8} "
                f"{cell(r['fraction_of_peak'], '.1%'):>8} {cell(r['busy_fraction'], '.0%'):>6} "
                f"{cell(r['peak_memory_mib'], ',.0f'):>9}" + (f"  {r['note']}" if r["note"] else "")
            )
        best = self.best()
        if best:
            lines.append(f"best: {best['variant']} at batch {best['batch']}, "
                         f"{best[key]:,.0f} {self.unit}/s")  # fmt: skip
        lines += [f"{k}: {v}" for k, v in self.notes.items()]
        return "\n".join(lines)


def _best_keys(rate_key: str) -> tuple[str, ...]:
    return ("variant", "batch", rate_key, "step_ms", "tflops", "fraction_of_peak",
            "busy_fraction", "peak_memory_mib")  # fmt: skip


def flops_per_sample(workload: SweepWorkload, device: torch.device) -> float:
    """FLOPs of one training sample's forward and backward pass, counted by PyTorch's
    ``FlopCounterMode`` on a float32 step at batch 2 (the optimizer's few are left out)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    torch.manual_seed(0)
    model = workload.model_fn().to(device).train()
    x, y = (t[:2].to(device) for t in workload.batch)
    loss_fn = setup.loss_on(workload.loss_fn, device)
    # Attention through SDPA's math path: its matrix products are counted on every
    # device (the CPU's fused SDPA kernel has no FLOP formula, the GPU's do).
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        logits, aux = train.split_output(model(x))
        loss = loss_fn(logits, y)
        if aux is not None and workload.aux_logits_weight:
            loss = loss + workload.aux_logits_weight * loss_fn(aux, y)
        loss.backward()
    return counter.get_total_flops() / x.shape[0]


def _draw(batch: tuple[torch.Tensor, torch.Tensor], n: int, device, channels_last: bool):
    """A batch of ``n`` samples drawn (with repeats) from a real batch, on the device."""
    x, y = batch
    idx = torch.randint(len(x), (n,), generator=torch.Generator().manual_seed(n))
    return train.to_device(x[idx], device, channels_last), y[idx].to(device)


def _kernel_seconds(prof) -> float:
    """The time the device was busy in a profile: the union of its kernels' and copies'
    intervals (overlapping kernels count once)."""
    spans = sorted(
        (e.time_range.start, e.time_range.end)
        for e in prof.events()
        if e.device_type == torch.autograd.DeviceType.CUDA
    )
    busy, end = 0.0, float("-inf")
    for a, b in spans:
        if b <= end:
            continue
        busy += b - max(a, end)
        end = b
    return busy / 1e6


def _busy_fraction(step, x, y, device, step_s: float, steps: int = 3) -> float | None:
    """Kernel time over wall time for ``steps`` profiled steps: near 1 the device is the
    limit, far below it the host's launches are (the step is launch-bound)."""
    if device.type != "cuda":
        return None
    from torch.profiler import ProfilerActivity, profile

    try:
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(steps):
                step(x, y)
            train.synchronize(device)
        busy = _kernel_seconds(prof)
    except RuntimeError:  # a profiler that cannot trace this device: no figure, no failure
        return None
    return round(min(1.0, busy / (steps * step_s)), 3) if busy > 0 else None


def variant_step(workload, variant: Variant, device) -> Callable:
    """The shared loop's training step (:func:`rocm_dl_guide.training.train.step_function`)
    for a fresh model of ``workload`` (a :class:`SweepWorkload` or a
    :class:`Workload`), run as ``variant`` says: precision, layout, compiler, optimizer."""
    torch.manual_seed(0)
    model = workload.model_fn().to(device)
    if variant.channels_last:
        model = model.to(memory_format=torch.channels_last)
    make_opt = workload.optimizer_fn or sgd
    optimizer = make_opt(model.parameters(), fused=variant.fused)
    trained = model
    if variant.compile:
        torch._dynamo.reset()
        trained = torch.compile(model, mode=variant.compile, dynamic=False)
    options = setup.FitOptions(
        amp=variant.amp_dtype is not None,
        amp_dtype=variant.amp_dtype,
        channels_last=variant.channels_last,
        aux_logits_weight=workload.aux_logits_weight,
        progress=False,
    )
    return train.step_function(trained, optimizer, workload.loss_fn, device, options)


def _point(workload: SweepWorkload, variant: Variant, batch: int, device, timing) -> dict:
    """One measured row (raises on failure; the caller turns that into a note)."""
    steps, warmup, repeats = timing
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    step = variant_step(workload, variant, device)
    x, y = _draw(workload.batch, batch, device, variant.channels_last)
    for _ in range(warmup):
        step(x, y)
    train.synchronize(device)
    times = []
    for _ in range(max(1, repeats)):
        t0 = time.perf_counter()
        for _ in range(steps):
            step(x, y)
        train.synchronize(device)
        times.append((time.perf_counter() - t0) / steps)
    step_s = statistics.median(times)
    rate = batch * workload.per_sample / step_s
    return {
        f"{workload.unit}_per_s": round(rate, 1),
        "step_ms": round(1000 * step_s, 3),
        "busy_fraction": _busy_fraction(step, x, y, device, step_s),
        "peak_memory_mib": (
            round(torch.cuda.max_memory_allocated() / 2**20, 1) if device.type == "cuda" else None
        ),
    }


def _why_not(variant: Variant, workload: SweepWorkload, device) -> str | None:
    if variant.channels_last and not workload.image_layout:
        return "not run: channels-last is a layout of image batches"
    if variant.compile == "reduce-overhead" and device.type != "cuda":
        return "not run: graphs (compile's reduce-overhead mode) replay GPU kernels"
    if variant.amp_dtype and setup.autocast_dtype(device) is None:
        return f"not run: autocast is not available on {device.type}"
    if variant.precision == "bf16" and device.type == "cuda" and not torch.cuda.is_bf16_supported():
        return "not run: this GPU has no bfloat16"
    return None


def sweep(
    workload: SweepWorkload,
    device: str | torch.device | None = None,
    *,
    batches: Iterable[int],
    variants: Iterable[str] | None = None,
    only: dict[str, Iterable[int]] | None = None,
    steps: int = 10,
    warmup: int = 3,
    repeats: int = 3,
    peak_tflops: float | None = None,
    budget_s: float | None = None,
    log: Callable[[str], None] | None = None,
) -> Sweep:
    """The training step of ``workload`` at every batch size and variant, side by side.

    For each variant (see :data:`FLAGS`) and batch size (ascending): a fresh model
    (seeded alike) and optimizer, ``warmup`` untimed steps (compilation happens
    there), then the median of ``repeats`` timed runs of ``steps`` steps on one
    batch kept on the device (data loading is not measured: see
    :mod:`rocm_dl_guide.training.input_speed`). Each row has the throughput, the
    step time, TFLOP/s from PyTorch's FLOP count and the fraction of
    ``peak_tflops`` (the device's dense bf16 matrix peak), the busy fraction
    from ``torch.profiler`` (GPU only) and the peak memory (GPU only). A batch
    that runs out of memory ends that variant's larger batches; a variant that
    cannot run here, or fails, is a row whose ``note`` says why. With
    ``budget_s`` the points left when it is spent are rows saying so. ``only``
    adds variants measured at the batch sizes it names alone (a compile per
    point is expensive). On a GPU, cuDNN's (MIOpen's) autotuner is on
    (``torch.backends.cudnn.benchmark``) for every variant alike.
    """
    device = torch.device(device) if device is not None else train.default_device()
    batches = sorted(set(batches))
    if not batches or batches[0] < 1:
        raise ValueError(f"batch sizes must be positive, got {batches}")
    default = GPU_VARIANTS if device.type == "cuda" else CPU_VARIANTS
    chosen = [(Variant.parse(v), batches) for v in (variants or default)]
    if variants is None and not workload.image_layout:
        chosen = [(v, b) for v, b in chosen if not v.channels_last]
    chosen += [(Variant.parse(v), sorted(set(b))) for v, b in (only or {}).items()]
    flops = flops_per_sample(workload, device)
    benchmark = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = device.type == "cuda" or benchmark
    try:
        rows = _sweep_rows(workload, device, chosen, (steps, warmup, repeats), budget_s, log)
    finally:
        torch.backends.cudnn.benchmark = benchmark
    for row in rows:
        rate = row[f"{workload.unit}_per_s"]
        if rate is not None:
            row["tflops"] = round(flops * rate / workload.per_sample / 1e12, 3)
            if peak_tflops:
                row["fraction_of_peak"] = round(row["tflops"] / peak_tflops, 4)
    notes = _notes(workload.unit, flops, device, peak_tflops)
    return Sweep(workload.name, str(device), workload.unit, rows, flops, peak_tflops, notes)


def _sweep_rows(workload, device, chosen, timing, budget_s, log) -> list[dict]:
    """The rows of :func:`sweep`, measured in order, without their FLOP figures."""
    key = f"{workload.unit}_per_s"
    started = time.perf_counter()
    rows = []
    for variant, batches in chosen:
        stop: str | None = _why_not(variant, workload, device)
        for batch in batches:
            row = {"batch": batch, "variant": variant.name, key: None, "step_ms": None,
                   "tflops": None, "fraction_of_peak": None, "busy_fraction": None,
                   "peak_memory_mib": None, "note": ""}  # fmt: skip
            rows.append(row)
            if stop is None and budget_s is not None and time.perf_counter() - started > budget_s:
                stop = f"not run: the sweep's {budget_s:.0f} s budget was spent"
            if stop is not None:
                row["note"] = stop
                continue
            if log:
                log(f"  {workload.name}: {variant.name} at batch {batch} ...")
            if variant.precision == "bf16" and device.type == "cpu" and not cpu_has_native_bf16():
                row["note"] = "emulated: this CPU has no bfloat16 instructions"
            try:
                row.update(_point(workload, variant, batch, device, timing))
            except torch.OutOfMemoryError:
                row["note"] = "out of memory"
                stop = f"not run: out of memory at batch {batch}"
            except Exception as exc:  # noqa: BLE001 - one variant's failure is its row's
                row["note"] = f"failed: {type(exc).__name__}: {exc}"[:300]
            finally:
                if device.type == "cuda":
                    torch.cuda.empty_cache()
    return rows


def _notes(unit: str, flops: float, device, peak_tflops) -> dict[str, str]:
    """Why a column is null here, and what the FLOP and peak figures are."""
    notes = {}
    if device.type != "cuda":
        notes["busy_fraction"] = "kernel time over wall time is a GPU's figure (no GPU here)"
        notes["peak_memory_mib"] = "peak memory is read from the GPU's allocator (no GPU here)"
    if not peak_tflops:
        notes["fraction_of_peak"] = (
            "no peak matrix throughput is known for this device"
            if device.type == "cuda"
            else "a CPU has no peak in the table; CPU figures say nothing about a GPU"
        )
    else:
        notes["fraction_of_peak"] = (
            f"of the device's dense bf16 matrix peak, {peak_tflops:g} TFLOP/s"
        )
    notes["tflops"] = (
        f"{flops / 1e9:.3g} GFLOP per {'sequence' if unit == 'tokens' else 'image'} "
        "(forward and backward), counted by torch.utils.flop_counter.FlopCounterMode"
    )
    return notes


def example_workload(example: str, profile, device) -> SweepWorkload:
    """The sweep's workload of a case study in the registry (``train EXAMPLE``'s name)."""
    from rocm_dl_guide.core import casestudies

    device = torch.device(device)
    return from_workload(example, casestudies.get(example).workload_function()(profile, device))


def device_peak_tflops(device: torch.device) -> float | None:
    """The GPU's dense bf16 matrix peak from the book's table; ``None`` on a CPU or an
    unlisted device."""
    from rocm_dl_guide.core.device import peak_matrix_throughput

    if device.type != "cuda":
        return None
    entry = peak_matrix_throughput(torch.cuda.get_device_name(device))
    return entry["bf16_tflops"] if entry else None


def run_plan(workload: SweepWorkload, device, plan: dict, log=None) -> Sweep:
    """:func:`sweep` of ``workload`` under a plan of :data:`GPU_PLANS` (or
    :data:`CPU_PLAN`), timed as ``make gpu-check`` times it."""
    device = torch.device(device)
    steps, warmup, repeats = (5, 3, 3) if device.type == "cuda" else (2, 1, 1)
    return sweep(
        workload, device, batches=plan["batches"], variants=plan["variants"],
        only=plan["only"], steps=steps, warmup=warmup, repeats=repeats,
        peak_tflops=device_peak_tflops(device), budget_s=plan["budget_s"], log=log,
    )  # fmt: skip


def from_record(name: str, figures: dict, device: str, unit: str = "images") -> Sweep:
    """The sweep that a GPU verification record keeps for ``name`` (its ``rows``:
    batch, variant, rate, busy fraction), for a build without a GPU."""
    key = f"{unit}_per_s"
    best = figures.get("best") or {}
    per_sample = (best.get("tflops") or 0) * 1e12 / best[key] if best.get(key) else None
    rows = []
    for batch, variant, rate, busy in figures.get("rows") or []:
        tflops = per_sample * rate / 1e12 if per_sample else None
        peak = (
            best.get("tflops") / best["fraction_of_peak"] if best.get("fraction_of_peak") else None
        )
        rows.append({"batch": batch, "variant": variant, key: rate, "step_ms": None,
                     "tflops": None if tflops is None else round(tflops, 3),
                     "fraction_of_peak": round(tflops / peak, 4) if tflops and peak else None,
                     "busy_fraction": busy, "peak_memory_mib": None, "note": ""})  # fmt: skip
    return Sweep(name, device, unit, rows, per_sample, None, {})
