"""Inference benchmarks: PyTorch eager versus the compiled backend, side by side.

Every measurement here follows one recipe: the same input batch for both
runtimes, warm-up runs first (the first runs allocate memory, pick kernels and
fill caches), then many timed runs, of which the *median* is reported in
milliseconds, all in the same process and the same run. The timed runs of the
two contenders alternate in blocks (:func:`measure_side_by_side`), so a busy
spell of the machine affects both alike. PyTorch and ONNX
Runtime get the same number of CPU threads. On a GPU, each timed PyTorch run
includes the copy of the batch to the GPU and of the logits back, as MIGraphX's
``offload_copy`` does, and waits for the GPU to finish.

- :func:`run` compares eager and compiled at one batch size (and, with
  ``tuning=True``, the tuning page's pair); ``python -m rocm_dl_guide bench
  inference --json`` prints its result.
- :func:`tuning_comparison` is the tuning page's measurement: MIGraphX without
  and with exhaustive tuning, or, where MIGraphX is absent, its CPU
  counterpart, ONNX Runtime with graph optimisations off and on.
- :func:`sweep` and :func:`plot_sweep`: latency and throughput at batch sizes 1,
  8 and 32 (1, 2 and 4 in the ``smoke`` profile: :func:`batch_sizes`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from rocm_dl_guide.core import plots, profiles
from rocm_dl_guide.core.messages import count
from rocm_dl_guide.core.provenance import library_versions
from rocm_dl_guide.core.tables import rounded
from rocm_dl_guide.core.timing import Timing, measure, measure_side_by_side  # noqa: F401 - re-exported
from rocm_dl_guide.optimization import backends, inference, onnx_files

if TYPE_CHECKING:  # pragma: no cover
    import pandas

BATCH_SIZES = (1, 8, 32)
SMOKE_BATCH_SIZES = (1, 2, 4)
"""The ``smoke`` profile's (two CPU cores): one run of batch 32 takes seconds there,
and the book build runs the sweep on every clean build."""


def batch_sizes(profile: profiles.Profile) -> tuple[int, ...]:
    """The batch sizes :func:`sweep` times: 1, 8 and 32, or 1, 2 and 4 in ``smoke``."""
    return SMOKE_BATCH_SIZES if profile.short_benchmarks else BATCH_SIZES


def iterations_for(batch: int, profile: profiles.Profile) -> tuple[int, int]:
    """``(warm-up runs, timed runs)`` for one batch size.

    With a GPU profile: 10 and 100 at every batch size. In the ``smoke`` profile
    (two CPU cores) fewer runs at larger batches keep a page under a minute:
    2 + 10 at batch 1, 1 + 4 up to batch 8, 1 + 3 above. On an AVX2-only CPU one
    eager Inception v3 call takes 0.35 s at batch 1 and 1.2 s at batch 4, and the
    median of these runs already separates the runtimes by several times.
    """
    if not profile.short_benchmarks:
        return 10, 100
    if batch <= 1:
        return 2, 10
    if batch <= 8:
        return 1, 4
    return 1, 3


@contextlib.contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """Run PyTorch's CPU operators on ``n`` threads inside the block."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def eager_runner(model, x: np.ndarray, device=None) -> Callable[[], np.ndarray]:
    """A function that runs ``x`` through the PyTorch ``model`` eagerly, on
    ``device`` (default: the GPU when there is one), and returns the logits on
    the host, having waited for the device."""
    import torch

    from rocm_dl_guide.core import device as devices

    dev = torch.device(device) if device is not None else devices.pick()
    model = model.to(dev).eval()
    batch = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))

    def run() -> np.ndarray:
        with torch.inference_mode():
            out = model(batch.to(dev)).float().cpu()
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
        return out.numpy()

    run.device = dev  # type: ignore[attr-defined]
    return run


LIBRARIES = ("PyTorch", "torchvision", "ONNX Runtime", "MIGraphX")
"""The libraries whose versions a benchmark records."""


@dataclass
class InferenceBench:
    """What :func:`run` measured."""

    backend: str
    provider: str
    device: str
    """Where the compiled backend ran."""
    eager_device: str
    """Where PyTorch eager ran."""
    batch: int
    warmup: int
    iterations: int
    threads: int
    eager_ms: float
    compiled_ms: float
    speedup: float
    """``eager_ms / compiled_ms``."""
    max_rel_error: float
    tolerance: float
    within_tolerance: bool
    profile: str
    weights: str
    versions: dict[str, str] = field(default_factory=dict)
    note: str = ""
    """Which backend produced the outputs (:func:`inference.backend_note`)."""
    untuned_ms: float | None = None
    tuned_ms: float | None = None
    tuning_speedup: float | None = None
    tuning_method: str | None = None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        if self.untuned_ms is None:
            for key in ("untuned_ms", "tuned_ms", "tuning_speedup", "tuning_method"):
                data.pop(key)
        return data

    def display_dict(self, digits: int = 4) -> dict[str, Any]:
        """:meth:`to_dict` for reading: every float to ``digits`` significant
        digits (:func:`rounded`). ``to_dict`` keeps full precision."""
        return rounded(self.to_dict(), digits)

    def summary(self) -> str:
        lines = [
            f"Inception v3, batch {self.batch}: PyTorch eager {self.eager_ms:.1f} ms on "
            f"{self.eager_device}, {backends.BACKEND_TITLES[self.backend]} ({self.provider}) "
            f"{self.compiled_ms:.1f} ms on {self.device}: {self.speedup:.2f}x",
            f"medians of {self.iterations} runs after {self.warmup} warm-up runs, "
            f"{count(self.threads, 'CPU thread')}; max relative error {self.max_rel_error:.1e} "
            f"(tolerance {self.tolerance:.0e}); profile {self.profile}",
        ]
        if self.untuned_ms is not None:
            lines.append(
                f"{self.tuning_method}: {self.untuned_ms:.1f} ms and {self.tuned_ms:.1f} ms, "
                f"{self.tuning_speedup:.2f}x"
            )
        return "\n".join(lines)


@dataclass
class TuningResult:
    """The tuning page's pair, measured side by side (:func:`tuning_comparison`).

    ``untuned`` and ``tuned`` keep their names for the JSON record; where
    MIGraphX is absent they are ONNX Runtime's graph optimisations off and on,
    which :attr:`labels` and :attr:`title` say."""

    backend: str
    provider: str
    device: str
    method: str
    """What "untuned" and "tuned" mean here, in words."""
    untuned: Timing
    tuned: Timing
    untuned_settings: str
    tuned_settings: str
    batch: int
    threads: int
    untuned_compile_s: float
    tuned_compile_s: float
    compiled: inference.CompiledModel | None = None
    """The tuned model."""

    @property
    def speedup(self) -> float:
        return self.untuned.median_ms / self.tuned.median_ms

    @property
    def labels(self) -> tuple[str, str]:
        """The two variants by what they are: "tuned" only where MIGraphX's kernel
        search ran; elsewhere ONNX Runtime's graph optimisations off and on, with
        the device named (the ``untuned`` and ``tuned`` fields keep their names)."""
        if self.backend == "migraphx":
            return "MIGraphX default compile", "MIGraphX exhaustive_tune=True"
        where = "CPU" if self.provider == inference.CPU_EP else self.provider
        return (
            f"ONNX Runtime graph optimisations off ({where})",
            f"ONNX Runtime graph optimisations on ({where})",
        )

    @property
    def title(self) -> str:
        """What the comparison is, for a caption or a heading."""
        if self.backend == "migraphx":
            return "MIGraphX without and with exhaustive tuning"
        where = "CPU" if self.provider == inference.CPU_EP else self.provider
        return f"ONNX Runtime graph optimisations off and on ({where})"

    def frame(self):
        """One row per variant: its settings, compile time and the median, fastest
        and slowest run (the runs themselves: :attr:`untuned` and :attr:`tuned`)."""
        import pandas as pd

        rows = []
        for label, timing, settings, secs in (
            (self.labels[0], self.untuned, self.untuned_settings, self.untuned_compile_s),
            (self.labels[1], self.tuned, self.tuned_settings, self.tuned_compile_s),
        ):
            rows.append(
                {
                    "variant": label,
                    "settings": settings,
                    "compile (s)": f"{secs:.2f}",
                    "median (ms)": f"{timing.median_ms:.1f}",
                    "fastest (ms)": f"{min(timing.times_ms):.1f}",
                    "slowest (ms)": f"{max(timing.times_ms):.1f}",
                }
            )
        return pd.DataFrame(rows)


def _method(backend: str, provider: str) -> str:
    if backend == "migraphx":
        return "MIGraphX compile without and with exhaustive_tune=True"
    if provider == inference.MIGRAPHX_EP:
        return "ONNX Runtime's MIGraphX provider, graph optimisations off and on"
    return (
        "the CPU counterpart: ONNX Runtime on the CPU with graph optimisations off "
        "(ORT_DISABLE_ALL) and on (ORT_ENABLE_ALL)"
    )


def tuning_comparison(
    profile: profiles.Profile,
    prepared: onnx_files.ExportedInception | None = None,
    batch: int = 1,
    warmup: int | None = None,
    iterations: int | None = None,
    backend: str | None = None,
    threads: int | None = None,
) -> TuningResult:
    """Compile the model untuned and tuned and time both on the same batch.

    MIGraphX: the default compile against ``exhaustive_tune=True``. Without
    MIGraphX, ONNX Runtime with graph optimisations off against all of them,
    which is the CPU counterpart and is labelled so in :attr:`TuningResult.method`.
    """
    prepared = prepared or onnx_files.export_inception(profile)
    name = backends.select_backend(backend)
    threads = threads or inference.default_threads()
    w, n = iterations_for(batch, profile)
    warmup = w if warmup is None else warmup
    iterations = n if iterations is None else iterations
    x = inference.image_batch(batch_size=batch)
    path = prepared.onnx.path
    if name == "migraphx":
        untuned = inference.compile_model(path, name, batch_size=batch, tuned=False)
        tuned = inference.compile_model(path, name, batch_size=batch, tuned=True)
    else:
        untuned = inference.compile_model(path, name, optimize=False, threads=threads)
        tuned = inference.compile_model(path, name, optimize=True, threads=threads)
    timings = measure_side_by_side(
        {"untuned": lambda: untuned.run(x), "tuned": lambda: tuned.run(x)}, warmup, iterations
    )
    t_untuned, t_tuned = timings["untuned"], timings["tuned"]
    return TuningResult(
        backend=name,
        provider=tuned.provider,
        device=tuned.device,
        method=_method(name, tuned.provider),
        untuned=t_untuned,
        tuned=t_tuned,
        untuned_settings=untuned.settings,
        tuned_settings=tuned.settings,
        batch=batch,
        threads=threads,
        untuned_compile_s=untuned.compile_seconds,
        tuned_compile_s=tuned.compile_seconds,
        compiled=tuned,
    )


def run(
    profile: profiles.Profile,
    batch: int = 1,
    iterations: int | None = None,
    warmup: int | None = None,
    backend: str | None = None,
    tuning: bool = False,
    threads: int | None = None,
    prepared: onnx_files.ExportedInception | None = None,
) -> InferenceBench:
    """PyTorch eager against the compiled backend at one batch size, on the
    sample photo repeated ``batch`` times; with ``tuning``, also
    :func:`tuning_comparison`."""
    if batch < 1:
        raise ValueError(f"batch must be at least 1, got {batch}")
    name = backends.select_backend(backend)
    prepared = prepared or onnx_files.export_inception(profile)
    threads = threads or inference.default_threads()
    w, n = iterations_for(batch, profile)
    warmup = w if warmup is None else warmup
    iterations = n if iterations is None else iterations
    x = inference.image_batch(batch_size=batch)
    compiled = inference.compile_model(prepared.onnx.path, name, batch_size=batch, threads=threads)
    with torch_threads(threads):
        eager = eager_runner(prepared.model, x)
        reference = eager()
        ours = compiled.run(x)
        timings = measure_side_by_side(
            {"eager": eager, "compiled": lambda: compiled.run(x)}, warmup, iterations
        )
    t_eager, t_compiled = timings["eager"], timings["compiled"]
    err = inference.max_rel_error(ours, reference)
    tol = inference.tolerance_for(compiled, str(eager.device))  # type: ignore[attr-defined]
    result = InferenceBench(
        backend=name,
        provider=compiled.provider,
        device=compiled.device,
        eager_device=_device_words(eager.device),  # type: ignore[attr-defined]
        batch=batch,
        warmup=warmup,
        iterations=iterations,
        threads=threads,
        eager_ms=t_eager.median_ms,
        compiled_ms=t_compiled.median_ms,
        speedup=t_eager.median_ms / t_compiled.median_ms,
        max_rel_error=err,
        tolerance=tol,
        within_tolerance=err <= tol,
        profile=prepared.profile,
        weights=prepared.loaded.note,
        versions=library_versions(LIBRARIES),
        note=inference.backend_note(compiled),
    )
    if tuning:
        tr = tuning_comparison(profile, prepared, batch, warmup, iterations, name, threads)
        result.untuned_ms = tr.untuned.median_ms
        result.tuned_ms = tr.tuned.median_ms
        result.tuning_speedup = tr.speedup
        result.tuning_method = tr.method
    return result


def _device_words(dev) -> str:
    from rocm_dl_guide.core import device as devices

    if dev.type == "cpu":
        return inference.cpu_description()
    return str(devices.describe())


@dataclass
class Sweep:
    """What :func:`sweep` returns: the table and what produced it."""

    frame: pandas.DataFrame
    """One row per (batch, runtime): ``batch``, ``runtime``, ``warm-up runs``,
    ``timed runs``, ``latency (ms)``, ``ms per image``, ``images/s``, ``speedup``."""
    backend: str
    provider: str
    device: str
    """What the compiled model ran on."""
    eager_device: str
    """What PyTorch eager ran on."""
    threads: int
    max_rel_error: float
    """The largest relative error of the compiled logits against PyTorch's, at any batch."""
    versions: dict[str, str]
    profile: str
    weights: str
    """The weights note (pretrained or random, and why)."""
    note: str
    """Which backend produced the outputs (:func:`inference.backend_note`)."""
    runs: dict[int, InferenceBench] = field(default_factory=dict)
    """What :func:`run` returned at each batch size."""

    def row(self, batch: int, eager: bool = False) -> pandas.Series:
        """The compiled model's row at ``batch`` (PyTorch eager's with ``eager=True``)."""
        is_eager = self.frame["runtime"] == "PyTorch eager"
        rows = self.frame[is_eager if eager else ~is_eager].set_index("batch")
        return rows.loc[batch]

    def plot(self):
        """Two panels: median latency per batch and throughput; returns the Figure."""
        return plot_sweep(self.frame, self.device)


def sweep(
    profile: profiles.Profile,
    batches: tuple[int, ...] | None = None,
    prepared: onnx_files.ExportedInception | None = None,
    backend: str | None = None,
    threads: int | None = None,
    runs: tuple[int, int] | None = None,
) -> Sweep:
    """Latency and throughput of PyTorch eager and the compiled backend at each
    batch size: :func:`run` once per batch, one table row per (batch, runtime).
    ``runs`` is ``(warm-up, timed)`` for every batch size (default:
    :func:`iterations_for`); ``batches`` default to :func:`batch_sizes`."""
    import pandas as pd

    batches = batches or batch_sizes(profile)
    prepared = prepared or onnx_files.export_inception(profile)
    name = backends.select_backend(backend)
    threads = threads or inference.default_threads()
    results: dict[int, InferenceBench] = {}
    rows = []
    for batch in batches:
        warmup, iterations = runs or (None, None)
        r = results[batch] = run(
            profile, batch, iterations, warmup, name, threads=threads, prepared=prepared
        )
        label = f"{backends.BACKEND_TITLES[name]} ({r.provider})"
        for runtime, ms in (("PyTorch eager", r.eager_ms), (label, r.compiled_ms)):
            rows.append(
                {
                    "batch": batch,
                    "runtime": runtime,
                    "warm-up runs": r.warmup,
                    "timed runs": r.iterations,
                    "latency (ms)": ms,
                    "ms per image": ms / batch,
                    "images/s": 1e3 * batch / ms,
                    "speedup": r.eager_ms / ms,
                }
            )
    last = results[batches[-1]] if batches else None
    return Sweep(
        frame=pd.DataFrame(rows),
        backend=name,
        provider=last.provider if last else "",
        device=last.device if last else "",
        eager_device=last.eager_device if last else "",
        threads=threads,
        max_rel_error=max((r.max_rel_error for r in results.values()), default=0.0),
        versions=library_versions(LIBRARIES),
        profile=prepared.profile,
        weights=prepared.loaded.note,
        note=last.note if last else "",
        runs=results,
    )


SWEEP_FORMATS = {
    "latency (ms)": "{:.1f}",
    "ms per image": "{:.1f}",
    "images/s": "{:.1f}",
    "speedup": "{:.2f}x",
}
"""How a page shows a :class:`Sweep` table's figures (``tables.show(formats=...)``)."""


def plot_sweep(frame: pandas.DataFrame, device: str = ""):
    """Two panels from a :class:`Sweep` table: median latency per batch and throughput."""
    import matplotlib.pyplot as plt

    batches = sorted(frame["batch"].unique())
    runtimes = list(dict.fromkeys(frame["runtime"]))
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    subs = {r: frame[frame["runtime"] == r].set_index("batch").loc[batches] for r in runtimes}
    for ax, column, title, unit in (
        (axes[0], "latency (ms)", "Latency (median per batch)", "ms"),
        (axes[1], "images/s", "Throughput", "images per second"),
    ):
        plots.grouped_bars(ax, [str(b) for b in batches], {r: subs[r][column] for r in runtimes})
        ax.set_xlabel("batch size")
        ax.set_ylabel(unit)
        ax.set_title(title)
        ax.grid(axis="y", alpha=0.3)
    # A log scale labelled in plain milliseconds at 1-2-5 steps (matplotlib's
    # default mixes 10^n major labels with 2x10^n minor ones).
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    axes[0].set_yscale("log")
    axes[0].yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axes[0].yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axes[0].yaxis.set_minor_formatter(NullFormatter())
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(runtimes), frameon=False)
    fig.suptitle(f"Inception v3 inference on {device}", fontsize=10)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    return fig
