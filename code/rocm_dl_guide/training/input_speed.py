"""Whether the data keeps up: the loader's speed against the training step's.

A GPU that trains a small network at tens of thousands of images a second
waits for a ``DataLoader`` that decodes, transforms and collates them one by
one. Three rates tell whether it does: the loader alone
(:func:`loader_throughput`, batches fetched and copied to the device), the
loader feeding the training step (:func:`end_to_end`), and the step alone on
batches already on the device (``model_samples_per_s``, e.g. from
:mod:`rocm_dl_guide.training.training_speed`). :func:`measure` puts them
together in an :class:`InputSpeed`: when the end-to-end rate is well below the
step's, the loader is the bottleneck, and more workers, pinned memory or
:class:`rocm_dl_guide.core.device_data.DeviceLoader` are the remedies.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import torch

from rocm_dl_guide.training.train import split_batch, synchronize

KEEPS_UP = 0.7
"""The fraction of the step's rate below which the loader limits training."""


@dataclass(frozen=True)
class InputSpeed:
    """What :func:`measure` returns: three rates in samples per second."""

    loader_samples_per_s: float
    """The loader alone, copies to the device included."""
    end_to_end_samples_per_s: float
    """The loader feeding the training step."""
    model_samples_per_s: float
    """The training step alone, on batches already on the device (given)."""
    fraction: float
    """``end_to_end_samples_per_s / model_samples_per_s``: near 1 the data keeps up."""

    @property
    def limited_by_loader(self) -> bool:
        """Whether training runs below :data:`KEEPS_UP` of the step's own rate."""
        return self.fraction < KEEPS_UP


def _cycle(loader: Iterable) -> Iterator[Any]:
    """The loader's batches, pass after pass (a new pass where one ends)."""
    while True:
        empty = True
        for batch in loader:
            empty = False
            yield batch
        if empty:
            raise ValueError("input_speed: the loader produced no batches")


def _samples_per_s(
    loader: Iterable,
    device: str | torch.device,
    batches: int,
    warmup: int,
    step: Callable[[torch.Tensor, torch.Tensor], Any] | None,
) -> float:
    """Samples/s over ``batches`` timed batches after ``warmup`` untimed ones: each
    fetched, copied to ``device`` (asynchronously when pinned) and given to ``step``."""
    if batches < 1 or warmup < 0:
        raise ValueError(
            f"input_speed: batches must be >= 1 and warmup >= 0, got {batches}, {warmup}"
        )
    device = torch.device(device)
    source = _cycle(loader)  # a DataLoader starts its workers here, before the clock

    def one() -> int:
        x, y = split_batch(next(source))
        x = x.to(device, non_blocking=x.is_pinned())
        y = y.to(device, non_blocking=y.is_pinned())
        if step is not None:
            step(x, y)
        return int(x.shape[0])

    try:
        for _ in range(warmup):
            one()
        synchronize(device)
        start = time.perf_counter()
        samples = sum(one() for _ in range(batches))
        synchronize(device)
        return samples / max(time.perf_counter() - start, 1e-9)
    finally:
        source.close()  # ends the pass: a DataLoader's workers stop unless persistent


def loader_throughput(
    loader: Iterable, device: str | torch.device, *, batches: int, warmup: int = 2
) -> float:
    """Samples/s the loader delivers to ``device``, the copy included.

    Works for any iterable of ``(inputs, labels)`` batches: a ``DataLoader``
    (its workers, pinned memory, persistent workers and prefetching as
    configured) or a :class:`~rocm_dl_guide.core.device_data.DeviceLoader`.
    The ``warmup`` batches (worker start-up, first allocations) are not timed;
    the device is synchronised before the clock stops. The batches are drawn
    as training draws them, so a shuffling loader's generator moves on.
    """
    return _samples_per_s(loader, device, batches, warmup, None)


def end_to_end(
    loader: Iterable,
    step: Callable[[torch.Tensor, torch.Tensor], Any],
    device: str | torch.device,
    *,
    batches: int,
    warmup: int = 2,
) -> float:
    """Samples/s of training from the loader: fetch, copy, then ``step(x, y)``
    (such as :func:`rocm_dl_guide.training.train.step_function` returns)."""
    return _samples_per_s(loader, device, batches, warmup, step)


def measure(
    loader: Iterable,
    step: Callable[[torch.Tensor, torch.Tensor], Any],
    device: str | torch.device,
    model_samples_per_s: float,
    batches: int = 20,
    warmup: int = 2,
) -> InputSpeed:
    """The loader's rate and the end-to-end rate, against the step's own rate.

    ``model_samples_per_s`` is the training step's rate on batches already on
    the device, measured by the caller with the same step and batch size.
    """
    if not (math.isfinite(model_samples_per_s) and model_samples_per_s > 0):
        raise ValueError(
            f"measure: model_samples_per_s must be a positive rate, got {model_samples_per_s}"
        )
    alone = loader_throughput(loader, device, batches=batches, warmup=warmup)
    both = end_to_end(loader, step, device, batches=batches, warmup=warmup)
    return InputSpeed(alone, both, float(model_samples_per_s), both / model_samples_per_s)
