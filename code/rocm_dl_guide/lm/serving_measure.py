"""Measuring a server under concurrent requests: the serving page's table and figure.

:func:`measure_side_by_side` sends streamed requests from several client
threads to one or more :class:`~rocm_dl_guide.lm.serving.Server` at each
concurrency level, after a warm-up round there (the first batch of a new shape
is slow), in interleaved rounds whose medians it reports: a busy spell of the
machine slows a round, not one row. :class:`ServeRow` is one level's figures;
:func:`table` heads them in words for the page.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass
from typing import Any

from rocm_dl_guide.core import profiles
from rocm_dl_guide.lm import serving


@dataclass
class ServeRow:
    """One concurrency level: median time to first token, median tokens/s each
    request saw, and the tokens/s of all requests together (their tokens over
    the wall time from the first request's start to the last one's end)."""

    engine: str
    concurrency: int
    continuous_batching: bool
    requests: int
    max_tokens: int
    ttft_ms: float
    tokens_per_s_per_request: float
    tokens_per_s_total: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


TABLE_COLUMNS = {
    "engine": "engine",
    "concurrency": "concurrent requests",
    "continuous_batching": "continuous batching",
    "requests": "requests timed",
    "max_tokens": "new tokens each",
    "ttft_ms": "first token (ms)",
    "tokens_per_s_per_request": "tokens/s each",
    "tokens_per_s_total": "tokens/s in all",
}
""":class:`ServeRow`'s fields as the page's table heads them."""
TABLE_FORMATS = {
    "first token (ms)": "{:,.1f}",
    "tokens/s each": "{:,.0f}",
    "tokens/s in all": "{:,.0f}",
}
"""How the page's table prints each figure column (:func:`rocm_dl_guide.core.tables.show`)."""


def table(rows: list[ServeRow], engine: bool = False) -> list[dict[str, Any]]:
    """The rows as the page shows them, under :data:`TABLE_COLUMNS`' heads
    (without the engine's column unless ``engine``)."""
    return [
        {TABLE_COLUMNS[k]: v for k, v in r.to_dict().items() if engine or k != "engine"}
        for r in rows
    ]


ROUNDS = 3
"""Timed rounds per server and concurrency level; each figure is their median."""


def measure(
    server: serving.Server,
    concurrency: int,
    requests_per_level: int | None = None,
    max_tokens: int = serving.MAX_TOKENS["smoke"],
    rounds: int = 1,
) -> ServeRow:
    """Time ``requests_per_level`` streamed requests (default: one round of
    ``concurrency``, at least 3), ``concurrency`` in flight at once, after one
    untimed warm-up round of ``concurrency`` requests; ``rounds`` times, the
    figures their medians (:func:`measure_side_by_side`)."""
    plan = [(server, (concurrency,))]
    return measure_side_by_side(plan, max_tokens, rounds, requests_per_level)[0]


def measure_side_by_side(
    plan: list[tuple[serving.Server, tuple[int, ...]]],
    max_tokens: int = serving.MAX_TOKENS["smoke"],
    rounds: int = ROUNDS,
    requests_per_level: int | None = None,
) -> list[ServeRow]:
    """Each server of ``plan`` at each of its concurrency levels, in rounds.

    One untimed warm-up at each level first (the first batch of a new shape is
    slow). Then each round times every (server, level) once, one after the
    other, so that a neighbour taking the CPU for a while slows every row of a
    round alike, not one row. A level sends ``requests_per_level`` requests a
    round (default: ``concurrency``, at least 3; a server without continuous
    batching, ``concurrency``). A row's time to first token and tokens/s per
    request are the medians over its requests of every round; its total
    tokens/s is the median of its rounds'. Rows come in ``plan``'s order."""
    if rounds < 1:
        raise ValueError(f"rounds must be at least 1, not {rounds}")
    cells = [(server, c) for server, levels in plan for c in levels]
    for server, c in cells:
        serving.send_concurrently(server, c, c, max_tokens)  # warm-up: this batch shape

    def size(server: serving.Server, c: int) -> int:
        if requests_per_level:
            return requests_per_level
        return max(c, 3) if server.continuous_batching else c

    answers: dict[int, list[serving.Completion]] = {i: [] for i in range(len(cells))}
    totals: dict[int, list[float]] = {i: [] for i in range(len(cells))}
    for _ in range(rounds):
        for i, (server, c) in enumerate(cells):
            start = time.perf_counter()
            done = serving.send_concurrently(server, size(server, c), c, max_tokens)
            answers[i] += done
            totals[i].append(sum(a.tokens for a in done) / (time.perf_counter() - start))
    return [
        ServeRow(
            engine=serving.ENGINES[server.engine],
            concurrency=c,
            continuous_batching=server.continuous_batching,
            requests=len(answers[i]),
            max_tokens=max_tokens,
            ttft_ms=statistics.median(a.ttft_s for a in answers[i]) * 1e3,
            tokens_per_s_per_request=statistics.median(a.tokens / a.total_s for a in answers[i]),
            tokens_per_s_total=statistics.median(totals[i]),
        )
        for i, (server, c) in enumerate(cells)
    ]


def measure_levels(
    server: serving.Server,
    levels: tuple[int, ...] = serving.LEVELS,
    max_tokens: int = serving.MAX_TOKENS["smoke"],
    rounds: int = ROUNDS,
) -> list[ServeRow]:
    """:func:`measure_side_by_side` of one server at each concurrency level, lowest first."""
    return measure_side_by_side([(server, tuple(levels))], max_tokens, rounds)


SERIAL_LEVELS = (1, 4)
"""Concurrency levels measured with continuous batching off: the engine serves
one request at a time, so at 16 the queue alone would take minutes."""


def scaling(rows: list[ServeRow], continuous_batching: bool = True) -> float | None:
    """Total tokens/s at the highest concurrency over that at 1 (``None`` if either is missing)."""
    mine = {r.concurrency: r for r in rows if r.continuous_batching == continuous_batching}
    if 1 not in mine or len(mine) < 2:
        return None
    return mine[max(mine)].tokens_per_s_total / mine[1].tokens_per_s_total


def max_tokens_for(profile: profiles.Profile) -> int:
    """:data:`MAX_TOKENS` of the profile."""
    return serving.MAX_TOKENS.get(profile.name, serving.MAX_TOKENS["gpu"])
