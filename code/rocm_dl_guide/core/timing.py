"""Timing by the guide's one recipe: warm-up runs first, then timed runs, whose
median is the figure; contenders timed side by side, in alternating blocks.

:mod:`rocm_dl_guide.optimization.bench` and every other page that times something use these
(``bench`` re-exports them under its own name, as before).
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass
class Timing:
    """Wall-clock times of repeated runs of one function."""

    times_ms: list[float]
    warmup: int

    @property
    def median_ms(self) -> float:
        return statistics.median(self.times_ms)

    @property
    def iterations(self) -> int:
        return len(self.times_ms)


def measure(fn: Callable[[], Any], warmup: int, iterations: int) -> Timing:
    """Call ``fn`` ``warmup`` times untimed, then ``iterations`` times timed."""
    if iterations < 1:
        raise ValueError(f"iterations must be at least 1, got {iterations}")
    if warmup < 0:
        raise ValueError(f"warm-up runs cannot be negative, got {warmup}")
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(iterations):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e3)
    return Timing(times, warmup)


def measure_side_by_side(
    fns: dict[str, Callable[[], Any]], warmup: int, iterations: int, rounds: int = 5
) -> dict[str, Timing]:
    """Time several functions on the same terms: each gets ``warmup`` untimed
    calls, then ``iterations`` timed calls, handed out in up to ``rounds``
    alternating blocks (A B, then B A, ...), so that a slow spell of the
    machine (another process, frequency scaling) falls on all of them alike
    rather than on whichever happened to run then."""
    if iterations < 1:
        raise ValueError(f"iterations must be at least 1, got {iterations}")
    if warmup < 0:
        raise ValueError(f"warm-up runs cannot be negative, got {warmup}")
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    rounds = max(1, min(rounds, iterations))
    sizes = [iterations // rounds + (1 if r < iterations % rounds else 0) for r in range(rounds)]
    times: dict[str, list[float]] = {name: [] for name in fns}
    names = list(fns)
    for r, size in enumerate(sizes):
        for name in names if r % 2 == 0 else reversed(names):
            fn = fns[name]
            for _ in range(size):
                start = time.perf_counter()
                fn()
                times[name].append((time.perf_counter() - start) * 1e3)
    return {name: Timing(times[name], warmup) for name in names}
