"""Training speed of the shared loop's step by variant: float32, autocast (AMP),
channels-last and both, measured side by side in one run.

This is the throughput harness behind the Inception v3 page's AMP table and
``selfcheck``'s training-speed checks. It times exactly the step every case
study trains with (:func:`rocm_dl_guide.training.train.step_function`), on a few batches
kept on the device so that data loading is not measured. (Inference precision,
fp32 against bf16 and int8, is :mod:`rocm_dl_guide.optimization.precision`.)
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


_VARIANTS = (
    ("float32", None, False),
    ("channels_last", None, True),
    ("amp", "auto", False),
    ("amp+channels_last", "auto", True),
)
"""``(name, autocast dtype, channels_last)``: the rows :func:`compare`
measures by default (``auto``: bfloat16 where supported, else float16)."""
_EXTRA_VARIANTS = (
    ("amp-bfloat16", "bfloat16", False),
    ("amp-float16", "float16", False),
    ("amp-float16+channels_last", "float16", True),
)
"""Rows measured only when asked for by name: autocast with a fixed dtype
(float16 trains with a gradient scaler)."""


@dataclass
class SpeedComparison:
    """What :func:`compare` returns: one row per variant, measured in one run."""

    frame: pandas.DataFrame
    """Columns ``variant``, ``dtype`` (autocast's), ``channels_last``,
    ``images_per_second`` (median of the repeats), ``speedup`` (relative to
    float32) and ``note`` (why a variant was skipped or failed, or a caveat)."""
    device: str
    """The device the variants ran on."""
    batch_size: int | None = None
    """Images per training step, when the caller knows it."""
    image_size: int | None = None
    """Input height and width, when the caller knows it."""

    def speedup(self, variant: str) -> float:
        """The named variant's speed-up over float32 (``nan`` if it did not run)."""
        rows = self.frame.loc[self.frame["variant"] == variant, "speedup"]
        return float(rows.iloc[0]) if len(rows) else float("nan")

    def fastest(self) -> tuple[str, float]:
        """``(variant, speed-up over float32)`` of the fastest variant that ran."""
        row = self.frame.loc[self.frame["speedup"].idxmax()]
        return str(row["variant"]), float(row["speedup"])


def _run_steps(step: Callable, data: list, n: int) -> int:
    """``n`` training steps cycling over ``data``; returns the number of images seen."""
    images = 0
    for k in range(n):
        x, y = data[k % len(data)]
        step(x, y)
        images += x.shape[0]
    return images


def _time_variant(step: Callable, device, data: list, steps: int, warmup: int, repeats: int):
    """Median images/s over ``repeats`` timed runs of ``steps`` steps, after ``warmup``."""
    _run_steps(step, data, warmup)
    train.synchronize(device)
    rates = []
    for _ in range(max(1, repeats)):
        t0 = time.perf_counter()
        images = _run_steps(step, data, steps)
        train.synchronize(device)
        rates.append(images / max(time.perf_counter() - t0, 1e-9))
    return statistics.median(rates)


def _variant_dtype(device: torch.device, amp: str | None) -> tuple[torch.dtype | None, str]:
    """The autocast dtype of a variant on ``device``, or ``(None, why not)``."""
    if amp is None:
        return None, ""
    auto = setup.autocast_dtype(device)
    if auto is None:
        return None, f"skipped: autocast is not available on {device.type}"
    if amp == "auto":
        return auto, ""
    dtype = getattr(torch, amp)
    if dtype == torch.bfloat16 and device.type == "cuda" and not torch.cuda.is_bf16_supported():
        return None, "skipped: this GPU does not support bfloat16"
    if dtype == torch.float16 and device.type == "cpu":
        return None, "skipped: float16 autocast with a grad scaler is a GPU's recipe"
    return dtype, ""


def _measure_variant(
    row: dict, amp: str | None, model_fn, batches, device, loss_fn, lr, aux_logits_weight, timing
) -> None:
    """Fill ``row`` with one variant's images/s, or a note saying why it has none."""
    use_amp = amp is not None
    dtype, why_not = _variant_dtype(device, amp)
    if use_amp and dtype is None:
        row["note"] = why_not
        return
    if dtype == torch.bfloat16 and device.type == "cpu" and not cpu_has_native_bf16():
        row["dtype"] = "bfloat16"
        row["note"] = (
            "skipped: this CPU has no native bfloat16 (AVX512-BF16/AMX), so autocast would "
            "be emulated and many times slower; the gain is a GPU's"
        )
        return
    if use_amp:
        row["dtype"] = str(dtype).replace("torch.", "")
        if device.type == "cpu":
            row["note"] = "CPU bfloat16 autocast: rarely faster without AMX; the gain is a GPU's"
    cl = row["channels_last"]
    try:
        torch.manual_seed(0)
        model = model_fn()
        opts = setup.FitOptions(
            amp=dtype is not None,
            amp_dtype=None if dtype is None else str(dtype).replace("torch.", ""),
            channels_last=cl,
            aux_logits_weight=aux_logits_weight,
            progress=False,
        )
        opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
        step = train.step_function(model, opt, loss_fn, device, opts)
        data = [(train.to_device(x, device, cl), y.to(device)) for x, y in batches]
        row["images_per_second"] = _time_variant(step, device, data, *timing)
    except Exception as exc:  # an unsupported op under autocast must not end the comparison
        row["note"] = f"failed: {type(exc).__name__}: {exc}"[:200]


def compare(
    model_fn: Callable[[], nn.Module],
    loader: Iterable,
    device: str | torch.device | None = None,
    *,
    steps: int = 20,
    warmup: int = 5,
    repeats: int = 3,
    loss_fn: Callable | None = None,
    lr: float = 0.01,
    aux_logits_weight: float | None = None,
    variants: Iterable[str] | None = None,
) -> SpeedComparison:
    """Training-step throughput of float32 vs autocast vs channels_last (vs both), one run.

    For each variant a fresh model from ``model_fn()`` (seeded alike) is trained
    with SGD on a few batches taken once from ``loader`` and kept on the device,
    so data loading is not measured: ``warmup`` steps first, then ``repeats``
    timed runs of ``steps`` steps each, with the device synchronised around each.
    ``variants`` picks rows by name: the default four, and also ``amp-bfloat16``,
    ``amp-float16`` and ``amp-float16+channels_last`` (a fixed autocast dtype).
    """
    import pandas as pd

    device = torch.device(device) if device is not None else train.default_device()
    wanted = set(variants) if variants is not None else None
    known = [v[0] for v in _VARIANTS + _EXTRA_VARIANTS]
    if wanted and wanted - set(known):
        raise ValueError(f"unknown variant(s) {sorted(wanted - set(known))}: choose from {known}")
    batches = []
    for batch in loader:
        batches.append(train.split_batch(batch))
        if len(batches) >= 4:
            break
    if not batches:
        raise ValueError("training_speed.compare: the loader produced no batches")
    rows = []
    for name, use_amp, cl in _VARIANTS + _EXTRA_VARIANTS:
        if (wanted is None and (name, use_amp, cl) in _VARIANTS) or (wanted and name in wanted):
            row = {
                "variant": name,
                "dtype": "float32",
                "channels_last": cl,
                "images_per_second": float("nan"),
                "note": "",
            }
            rows.append(row)
            _measure_variant(
                row,
                use_amp,
                model_fn,
                batches,
                device,
                loss_fn,
                lr,
                aux_logits_weight,
                (steps, warmup, repeats),
            )
    frame = pd.DataFrame(rows)
    base = frame.loc[frame["variant"] == "float32", "images_per_second"]
    frame["speedup"] = frame["images_per_second"] / (
        float(base.iloc[0]) if len(base) else float("nan")
    )
    columns = ["variant", "dtype", "channels_last", "images_per_second", "speedup", "note"]
    return SpeedComparison(frame[columns], str(device))
