"""Tuning the GPU libraries under PyTorch: MIOpen's convolutions and TunableOp's GEMMs.

- :func:`conv_workload` times a PyTorch convolution workload (eager forward
  passes of Inception v3) and reports the MIOpen settings in force
  (``MIOPEN_FIND_ENFORCE``, ``MIOPEN_USER_DB_PATH``, ...) and what MIOpen wrote to
  its user database. The ROCm job of the book's workflow runs it three times on
  one fresh database: with MIOpen's defaults, with ``MIOPEN_FIND_ENFORCE=3``
  (MIOpen searches every convolution shape it meets and records the winners),
  and with the defaults again, now finding those records (``python -m
  rocm_dl_guide bench conv --json``; ``--baseline`` compares with the first).
  MIOpen reads these variables when PyTorch first uses it, so each setting is
  a process of its own. On a CPU there is no MIOpen: the result says so.
- :func:`tunableop_comparison` times one GEMM untuned and after PyTorch's
  TunableOp has tuned it (``torch.cuda.tunable``), and keeps the results file.
  TunableOp exists for GPUs only (rocBLAS and hipBLASLt on ROCm); on a CPU the
  result says why it did not run.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rocm_dl_guide.core import profiles
from rocm_dl_guide.optimization import bench

MIOPEN_VARS = (
    "MIOPEN_FIND_ENFORCE",
    "MIOPEN_FIND_MODE",
    "MIOPEN_USER_DB_PATH",
    "MIOPEN_SYSTEM_DB_PATH",
)
"""The environment variables that decide how MIOpen picks convolution kernels."""

TUNABLEOP_FILE = "tunableop_results.csv"


class TuningError(ValueError):
    """A baseline that cannot be compared with (unreadable, another workload)."""


# --------------------------------------------------------------------------- MIOpen


@dataclass
class ConvResult:
    """What :func:`conv_workload` returns; :meth:`to_dict` is the ``--json`` object."""

    workload: str
    device: str
    miopen_used: bool
    """True on a ROCm GPU, where PyTorch's convolutions go through MIOpen."""
    batch: int
    image_size: int
    first_ms: float
    """The first forward pass: where MIOpen looks up, or searches for, its kernels."""
    timing: bench.Timing
    miopen_env: dict[str, str]
    """The MIOpen variables set for this process (unset ones are left out)."""
    user_db_files: dict[str, int] = field(default_factory=dict)
    """File name -> bytes in ``MIOPEN_USER_DB_PATH`` after the run."""
    baseline_ms: float | None = None
    """The median of the ``--baseline`` run, when one was given."""

    @property
    def median_ms(self) -> float:
        return self.timing.median_ms

    @property
    def speedup(self) -> float | None:
        """Baseline median over this median (above 1: faster than the baseline)."""
        return self.baseline_ms / self.median_ms if self.baseline_ms else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "workload": self.workload,
            "device": self.device,
            "miopen_used": self.miopen_used,
            "batch": self.batch,
            "image_size": self.image_size,
            "first_ms": self.first_ms,
            "ms": self.median_ms,
            "warmup": self.timing.warmup,
            "iterations": self.timing.iterations,
            "miopen_env": self.miopen_env,
            "user_db_files": self.user_db_files,
            "baseline_ms": self.baseline_ms,
            "speedup_vs_baseline": self.speedup,
        }

    def summary(self) -> str:
        env = ", ".join(f"{k}={v}" for k, v in self.miopen_env.items()) or "MIOpen defaults"
        lines = [
            f"{self.workload}, batch {self.batch}, on {self.device}",
            f"first pass {self.first_ms:.1f} ms; median {self.median_ms:.2f} ms over "
            f"{self.timing.iterations} runs after {self.timing.warmup} warm-up runs",
            f"MIOpen: {env}" if self.miopen_used else "MIOpen: not used (no ROCm GPU here)",
        ]
        if self.user_db_files:
            files = ", ".join(f"{n} ({b} bytes)" for n, b in self.user_db_files.items())
            lines.append(f"user database: {files}")
        if self.speedup is not None:
            lines.append(
                f"baseline median {self.baseline_ms:.2f} ms: {self.speedup:.2f}x the baseline"
            )
        return "\n".join(lines)


def read_baseline(path: str | os.PathLike) -> dict[str, Any]:
    """The JSON object of an earlier ``bench conv --json`` run, from ``path``."""
    try:
        text = Path(path).read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise TuningError(f"cannot read the baseline {path}: {exc.strerror or exc}") from None
    try:
        data = json.loads(text.splitlines()[-1] if text else "")
    except json.JSONDecodeError:
        raise TuningError(
            f"{path} is not the JSON output of 'bench conv --json' (its last line is not JSON)"
        ) from None
    if not isinstance(data, dict) or not isinstance(data.get("ms"), (int, float)):
        raise TuningError(f"{path} has no 'ms' figure: not the output of 'bench conv --json'")
    return data


def _user_db_files(environ: dict[str, str]) -> dict[str, int]:
    folder = environ.get("MIOPEN_USER_DB_PATH")
    if not folder or not Path(folder).is_dir():
        return {}
    return {p.name: p.stat().st_size for p in sorted(Path(folder).iterdir()) if p.is_file()}


def conv_workload(
    profile: profiles.Profile,
    batch: int | None = None,
    device=None,
    warmup: int | None = None,
    iterations: int | None = None,
    baseline: dict[str, Any] | None = None,
) -> ConvResult:
    """Time eager Inception v3 forward passes (random weights: the kernels, not the
    answers, are measured) at ``batch`` (default: 32 on a GPU profile, 1 in
    ``smoke``), 299 x 299. The first pass is timed on its own; then ``warmup``
    untimed passes and the median of ``iterations`` timed ones."""
    import torch

    from rocm_dl_guide.casestudies import inception_pretrained
    from rocm_dl_guide.core import device as devices

    dev = torch.device(device) if device is not None else devices.pick()
    batch = batch or (1 if profile.short_benchmarks else 32)
    default_warmup, default_iterations = bench.iterations_for(batch, profile)
    warmup = default_warmup if warmup is None else warmup
    iterations = default_iterations if iterations is None else iterations
    if baseline is not None and int(baseline.get("batch", batch)) != batch:
        raise TuningError(
            f"the baseline ran batch {baseline.get('batch')}, this run batch {batch}: "
            "compare like with like"
        )
    on_gpu = dev.type == "cuda"
    miopen_used = on_gpu and torch.version.hip is not None
    torch.manual_seed(0)
    model = inception_pretrained.random_inception().to(dev).eval()
    x = torch.randn(
        batch, 3, inception_pretrained.EVAL_SIZE, inception_pretrained.EVAL_SIZE, device=dev
    )

    def forward() -> None:
        with torch.inference_mode():
            model(x)
        if on_gpu:
            torch.cuda.synchronize(dev)

    start = time.perf_counter()
    forward()
    first_ms = (time.perf_counter() - start) * 1e3
    timing = bench.measure(forward, warmup, iterations)
    environ = dict(os.environ)
    return ConvResult(
        workload="Inception v3 forward passes (eager PyTorch, random weights)",
        device=str(devices.describe()) if device is None else str(dev),
        miopen_used=miopen_used,
        batch=batch,
        image_size=inception_pretrained.EVAL_SIZE,
        first_ms=first_ms,
        timing=timing,
        miopen_env={k: environ[k] for k in MIOPEN_VARS if k in environ},
        user_db_files=_user_db_files(environ),
        baseline_ms=float(baseline["ms"]) if baseline is not None else None,
    )


# --------------------------------------------------------------------------- TunableOp


@dataclass
class TunableOpResult:
    """What :func:`tunableop_comparison` returns."""

    ran: bool
    reason: str
    """Why it did not run (empty when it ran)."""
    device: str
    shape: tuple[int, int, int]
    """``(m, n, k)``: an m x k matrix times a k x n one."""
    dtype: str
    untuned: bench.Timing | None = None
    tuned: bench.Timing | None = None
    results_file: Path | None = None
    results: list[str] = field(default_factory=list)
    """The tuned entries TunableOp holds (operator, parameters, chosen kernel, time)."""

    @property
    def speedup(self) -> float | None:
        if self.untuned is None or self.tuned is None:
            return None
        return self.untuned.median_ms / self.tuned.median_ms

    def frame(self):
        import pandas as pd

        rows = [
            {"GEMM": label, "median (ms)": t.median_ms, "timed runs": t.iterations}
            for label, t in (("default (untuned)", self.untuned), ("TunableOp", self.tuned))
            if t is not None
        ]
        return pd.DataFrame(rows)


def tune_gemm(
    gemm: Callable[[], None], results_file: Path, warmup: int, iterations: int
) -> tuple[bench.Timing, list[str]]:
    """Let TunableOp tune the GEMM that ``gemm`` runs, then time it tuned.

    TunableOp is switched on with its results file; the first call of a shape
    it has no result for tries the candidate kernels and keeps the fastest;
    with tuning off again, the timed calls use that kernel. Returns the timing
    and the results TunableOp holds (also written to ``results_file``, in
    TunableOp's own CSV format, which PyTorch itself writes only when the process
    exits).
    """
    from torch.cuda import tunable

    tunable.set_filename(str(results_file))
    tunable.enable(True)
    tunable.tuning_enable(True)
    try:
        gemm()  # the first call of a new shape is where TunableOp tunes it
        tunable.tuning_enable(False)
        tuned = bench.measure(gemm, warmup, iterations)
        entries = tunable.get_results()
        write_results(results_file, tunable.get_validators(), entries)
        results = [", ".join(str(f) for f in entry) for entry in entries]
    finally:
        tunable.tuning_enable(False)
        tunable.enable(False)
    return tuned, results


def write_results(path: Path, validators, entries) -> None:
    """TunableOp's results file: its ``Validator`` lines (library versions),
    then one line per tuned GEMM (operator, parameters, solution, milliseconds),
    the file ``PYTORCH_TUNABLEOP_FILENAME`` reads back in a later run."""
    from rocm_dl_guide.core.files import atomic_write

    lines = [",".join(("Validator", *map(str, v))) for v in validators]
    lines += [",".join(map(str, entry)) for entry in entries]
    with atomic_write(Path(path), "w") as f:
        f.write("\n".join(lines) + "\n")


def tunableop_comparison(
    m: int = 4096,
    n: int = 4096,
    k: int = 4096,
    dtype: str = "float16",
    folder: str | os.PathLike | None = None,
    warmup: int = 10,
    iterations: int = 50,
) -> TunableOpResult:
    """One GEMM timed with the default kernel choice, then tuned by TunableOp and
    timed again, in one process. The results file (``tunableop_results.csv``)
    goes to ``folder`` (default: the run folder ``tunableop``); a later process
    that enables TunableOp with the same file uses the tuned kernels at once."""
    import torch

    from rocm_dl_guide.core import device as devices
    from rocm_dl_guide.core import runs

    shape = (m, n, k)
    if not devices.gpu_available():
        return TunableOpResult(
            ran=False,
            reason="TunableOp tunes GEMMs on a GPU (rocBLAS and hipBLASLt on ROCm, cuBLAS "
            "and cuBLASLt on CUDA); PyTorch sees no GPU here",
            device=str(devices.describe()),
            shape=shape,
            dtype=dtype,
        )
    dev = torch.device("cuda")
    torch.manual_seed(0)
    a = torch.randn(m, k, device=dev, dtype=getattr(torch, dtype))
    b = torch.randn(k, n, device=dev, dtype=getattr(torch, dtype))

    def gemm() -> None:
        torch.matmul(a, b)
        torch.cuda.synchronize(dev)

    target = Path(folder) if folder is not None else runs.runs_dir("tunableop")
    target.mkdir(parents=True, exist_ok=True)
    results_file = target / TUNABLEOP_FILE
    results_file.unlink(missing_ok=True)  # tune afresh, not from an older run's file
    untuned = bench.measure(gemm, warmup, iterations)
    tuned, results = tune_gemm(gemm, results_file, warmup, iterations)
    return TunableOpResult(
        ran=True,
        reason="",
        device=str(devices.describe()),
        shape=shape,
        dtype=dtype,
        untuned=untuned,
        tuned=tuned,
        results_file=results_file,
        results=results,
    )


def int8_recorded(path: str | os.PathLike | None = None) -> bool:
    """Whether ``bench precision`` (the int8 page) has recorded an int8 setting
    for this CPU yet, in the record that
    :func:`~rocm_dl_guide.optimization.ort_int8.chosen_int8` reads."""
    from rocm_dl_guide.optimization import ort_int8

    path = Path(path) if path else ort_int8.choice_file()
    return ort_int8.machine_key() in ort_int8.read_choices(path)
