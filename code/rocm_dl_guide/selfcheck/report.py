"""The selfcheck report: each check's outcome, the machine and the versions it ran on.

:class:`Outcome` is one check's result; :class:`Report` the whole run, with its
summary figures, its readable text and its two files (``selfcheck.json``,
``selfcheck.txt``). The machine facts it records (the device, the peak matrix
throughput of the data table, the library versions, the commit) are read here.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rocm_dl_guide.core import casestudies
from rocm_dl_guide.core.device import peak_matrix_throughput
from rocm_dl_guide.core.files import atomic_write
from rocm_dl_guide.core.messages import one_line

REPORT_FORMAT = 1
EXAMPLES = tuple(
    cs.name
    for cs in casestudies.REGISTRY.values()
    if cs.workload is not None and cs.name != "tiny-lm"
)
"""The case studies selfcheck trains and times: the registry's with a training
workload, but tiny-lm, whose training is ``lm:bf16``'s and whose speed ``lm:mfu``'s."""


@dataclass
class Outcome:
    """One check's outcome: ``pass``, ``fail`` or ``skip`` (with the reason)."""

    name: str
    status: str
    detail: str
    seconds: float | None = None
    """Wall time (set by :func:`~rocm_dl_guide.selfcheck.runner.run` when the check
    does not measure its own)."""
    figures: dict[str, Any] = field(default_factory=dict)


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
        peak GPU memory and the Inception v3 target; the language-model and kernel
        checks' figures under their own names (``lm:bf16``'s tokens/s,
        ``kernels:softmax``'s ratios, ...)."""
        out: dict[str, Any] = {}
        for example in EXAMPLES:
            check = self.check(f"speed:{example}")
            if check and check.figures:
                out[example] = check.figures
        for check in self.checks:
            if check.name.startswith(NAMED_FIGURES) and check.status == "pass" and check.figures:
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
                lines.append(f"  {example}: " + figure_line(figs))
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


NAMED_FIGURES = ("lm:", "kernels:")
"""The checks whose figures the summary and the record keep under the check's name."""

UNITS = {
    "tflops": "{:,.0f} TFLOP/s",
    "gb_per_s": "{:,.0f} GB/s",
    "softmax_vs_unfused": "{:.2f} times the throughput of the unfused operators",
    "softmax_vs_torch": "{:.2f} times that of torch.softmax",
    "matmul_vs_torch": "{:.2f} times the TFLOP/s of torch.matmul",
}
"""How a named figure reads, where its unit or comparison says more than its key."""


def figure_line(figs: dict[str, Any]) -> str:
    if isinstance(figs.get("best"), dict):
        return _sweep_line(figs)
    if "mfu" in figs:
        return _mfu_line(figs)
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
        parts = [_named(k, v) for k, v in figs.items() if not isinstance(v, (list, dict))]
    return "; ".join(parts) or "no figures"


def _share(value: Any, what: str) -> list[str]:
    return [f"{100 * value:.1f}% {what}"] if isinstance(value, (int, float)) else []


def _variant_words(name: str) -> str:
    from rocm_dl_guide.training.variants import Variant

    try:
        return Variant.parse(name).words
    except ValueError:
        return name


def _sweep_line(figs: dict[str, Any]) -> str:
    """A training sweep's figures in words: the fastest setting, its share of the
    peak, how busy the GPU was, autocast against float32, the real loader."""
    best = figs["best"]
    unit, rate = ("images", best.get("images_per_s"))
    if rate is None:
        unit, rate = "tokens", best.get("tokens_per_s")
    parts = [
        f"fastest setting was {_variant_words(best['variant'])} at batch {best['batch']}, "
        f"at {rate:,.0f} {unit}/s"
    ]
    parts += _share(best.get("fraction_of_peak"), "of the peak 16-bit matrix throughput of the GPU")
    if isinstance(best.get("busy_fraction"), (int, float)):
        parts.append(f"the GPU busy {100 * best['busy_fraction']:.1f}% of the time")
    amp = figs.get("amp_speedup_at_best_batch")
    if isinstance(amp, (int, float)):
        parts.append(f"autocast {amp:.2f} times as fast as float32 at that batch")
    for e2e in figs.get("end_to_end") or []:
        where = f" at batch {e2e['batch']}" if e2e.get("batch") else ""
        model = e2e.get("model_img_per_s")
        of = f" ({model:,.0f} images/s)" if isinstance(model, (int, float)) else ""
        parts.append(
            f"fed by the real data loader ({e2e['loader'].split(',')[0]}){where}, "
            f"{100 * e2e['fraction']:.0f}% of the rate on batches already on the GPU{of}"
        )
    return "; ".join(parts)


def _mfu_line(figs: dict[str, Any]) -> str:
    """``lm:mfu`` in words: the shape, the fastest setting, its model FLOPs utilisation."""
    parts = [f"{figs['shape']}: fastest setting was {_variant_words(figs['variant'])} "
             f"at batch {figs['batch']}"]  # fmt: skip
    if isinstance(figs.get("tokens_per_s"), (int, float)):
        parts.append(f"{figs['tokens_per_s']:,.0f} tokens/s")
    parts += _share(figs.get("mfu"), "model FLOPs utilisation (MFU)")
    if isinstance(figs.get("busy_fraction"), (int, float)):
        parts.append(f"the GPU busy {100 * figs['busy_fraction']:.1f}% of the time")
    return "; ".join(parts)


def _named(key: str, value: Any) -> str:
    if key in UNITS and isinstance(value, (int, float)):
        return UNITS[key].format(value)
    return f"{key.replace('_', ' ')} {figure_text(value)}"


def figure_text(value: Any) -> str:
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
    """The peak dense 16-bit matrix throughput entry for a device name, if known
    (:func:`rocm_dl_guide.core.device.peak_matrix_throughput`, which the kernels
    chapter reads too)."""
    return peak_matrix_throughput(name)


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
            cwd=Path(__file__).parents[1],
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None
