"""The verification record: the book's "Last verified on a GPU", from a passed GPU run.

Only ``selfcheck --gpu --record`` on a GPU, with every check passed, writes the
tracked record (:func:`write_record`); the book shows it through :func:`stamp`.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rocm_dl_guide.core.files import atomic_write
from rocm_dl_guide.selfcheck.report import REPORT_FORMAT, Report, figure_line
from rocm_dl_guide.selfcheck.runner import CHECK_NAMES

RECORD_FILE = Path(__file__).parents[1] / "data" / "gpu-verification.json"
"""The tracked verification record: written only by ``selfcheck --gpu --record``."""


class RecordError(RuntimeError):
    """A verification record asked for from a run that cannot vouch for a GPU."""


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


LABELS = {
    "mnist-pytorch": "The MNIST network",
    "cifar10": "The CIFAR-10 network",
    "inception-v3": "Inception v3",
    "kernels:softmax": "The Triton softmax",
    "kernels:matmul": "The Triton matmul",
    "kernels:vector-add": "The Triton vector add",
}
"""What the stamp calls a recorded example or check, for a reader."""


def is_amd(device: dict[str, Any]) -> bool:
    """Whether a recorded device is an AMD GPU (ROCm runtime, or AMD's name)."""
    name = str(device.get("name") or "")
    return str(device.get("runtime") or "").startswith("ROCm") or name.startswith(
        ("AMD", "Radeon", "Instinct")
    )


def device_words(device: dict[str, Any]) -> str:
    """The recorded device with its article: "an NVIDIA H200", "an AMD Instinct MI300X"."""
    name = str(device.get("name") or "unknown GPU")
    first = name.split()[0]
    acronym = first.isupper() and first[0] in "AEFHILMNORSX"
    return f"{'an' if acronym or first[0].upper() in 'AEIOU' else 'a'} {name}"


def where(record: dict[str, Any] | None = None) -> str:
    """Where the record's figures were measured, for a sentence that shows one:
    "on an NVIDIA H200 (no AMD GPU has been measured yet)" or "on an AMD
    Instinct MI300X"; "" without a record."""
    record = latest_record() if record is None else record
    if not record:
        return ""
    device = record.get("device", {})
    text = f"on {device_words(device)}"
    return text if is_amd(device) else text + " (no AMD GPU has been measured yet)"


def stamp(example: str | None = None, path: str | os.PathLike = RECORD_FILE) -> str:
    """Markdown for the book: when the PyTorch path last passed ``selfcheck --gpu``,
    on what, and (for ``example``) the figures of that run, in words."""
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
    # Plain words around the code spans, and no apostrophes: the text reads the
    # same in the source and on the page (Sphinx makes quotes curly).
    text = (
        f"**Last verified on a GPU:** `make gpu-check` passed on {record['date']}, on "
        f"{device_words(dev)} ({dev.get('runtime')}{arch}), with PyTorch {ver.get('PyTorch')} "
        f"at commit `{commit or 'unknown'}` of this guide."
    )
    if not is_amd(dev):
        text += (
            " No AMD GPU has been measured yet: these figures come from NVIDIA hardware,"
            " through the `cuda` API that PyTorch also provides on ROCm."
        )
    figs = record.get("figures", {}).get(example) if example else None
    if figs:
        label = LABELS.get(example, example)
        text += f" {label} on the {dev.get('name')}: " + figure_line(figs) + "."
    return text


@dataclass
class GpuSweep:
    """A training sweep for a page: measured on this build's GPU, or read from the record."""

    sweep: Any
    """A :class:`rocm_dl_guide.training.training_speed.Sweep`."""
    source: str
    """Where the figures come from, in words, for the page: the GPU, and for a
    record's figures that no AMD GPU has been measured where the record is not AMD's."""
    measured_here: bool


def gpu_sweep(
    example: str, profile: Any = None, path: str | os.PathLike = RECORD_FILE
) -> GpuSweep | None:
    """The GPU sweep of ``example`` (a case study, or ``tiny-lm`` at GPT-2 small's
    shape): measured now where PyTorch sees a GPU (``make gpu-check``'s plan), else
    the last verification record's rows; ``None`` where there is neither."""
    import torch

    from rocm_dl_guide.core import profiles
    from rocm_dl_guide.training import training_speed

    if torch.cuda.is_available():
        device = torch.device("cuda")
        if example == "tiny-lm":
            profile = profiles.with_data_source(profiles.get("full"), "fixtures")
        workload = training_speed.example_workload(example, profile, device)
        result = training_speed.run_plan(workload, device, training_speed.GPU_PLANS[example])
        return GpuSweep(result, f"this page's GPU, {torch.cuda.get_device_name()}", True)
    tracked = latest_record(path)
    name = "lm:mfu" if example == "tiny-lm" else example
    figures = (tracked or {}).get("figures", {}).get(name) or {}
    if not figures.get("rows"):
        return None
    unit = "tokens" if example == "tiny-lm" else "images"
    if unit == "tokens":  # lm:mfu keeps its best point flat
        figures = {**figures, "best": {k: figures.get(k) for k in ("tokens_per_s", "tflops")}
                   | {"fraction_of_peak": figures.get("mfu")}}  # fmt: skip
    device = tracked["device"]["name"]
    result = training_speed.from_record(example, figures, device, unit)
    caveat = "" if is_amd(tracked["device"]) else "no AMD GPU has been measured yet; "
    source = (
        f"{device_words(tracked['device'])} ({caveat}make gpu-check record of {tracked['date']})"
    )
    return GpuSweep(result, source, False)


def recorded(check: str, path: str | None = None) -> dict[str, Any] | None:
    """The figures of ``check`` (``kernels:softmax``, ...) in the last GPU record
    (``make gpu-check --record``), or ``None`` when no record keeps them.

    Adds ``device`` and ``date`` from the record, and works out what the record
    lacks from the guide's table of peaks for the recorded device:
    ``fraction_of_peak`` from ``tflops``, ``fraction_of_bandwidth`` from
    ``gb_per_s``. A figure the record does not hold is left out, never guessed:
    a record written before ``kernel_checks`` kept ``gb_per_s`` has none."""
    from rocm_dl_guide.core import device as devices

    rec = latest_record() if path is None else latest_record(path)
    figures = (rec or {}).get("figures", {}).get(check)
    if not figures:
        return None
    name = rec["device"].get("name", "")
    out = {**figures, "device": name, "date": rec.get("date", ""), "where": where(rec)}
    entry = devices.peak_matrix_throughput(name)
    if "tflops" in out and "fraction_of_peak" not in out and entry:
        out["peak_tflops"] = entry["bf16_tflops"]
        out["fraction_of_peak"] = out["tflops"] / entry["bf16_tflops"]
    bandwidth = devices.peak_memory_bandwidth(name)
    if bandwidth:
        out["peak_gb_per_s"] = bandwidth[0]
        if "gb_per_s" in out and "fraction_of_bandwidth" not in out:
            out["fraction_of_bandwidth"] = out["gb_per_s"] / bandwidth[0]
    return out
