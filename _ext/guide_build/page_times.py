"""Page times: how long each page took to execute, slowest first.

Executing the pages is most of a clean build. After every HTML build this
writes ``page-times.json`` next to the HTML folder (``_build/page-times.json``)
and logs the five slowest pages, so that a page that grows past its budget is
seen in the build that made it so:

- ``pages``: every executable page with its execution time (MyST-NB's
  ``runtime``), whether this build executed it or took it from the cache, and
  whether it ran alone (a timed page, :mod:`guide_build.parallel`) or next to
  another page;
- ``read_seconds``: the wall time of the build's reading phase, in which the
  pages execute (two at a time by default), and the worker count.

The budgets (no page over 60 s alone, the reading phase of a clean build within
8 minutes on two cores) are the README's; this module reports, it does not judge.
"""

from __future__ import annotations

import json
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from sphinx.util import logging

from . import inputs, parallel

FILE_NAME = "page-times.json"
SHOWN = 5
"""How many of the slowest pages the build log names."""
_clock: dict[str, float] = {}

logger = logging.getLogger(__name__)


def cache_records(cache_path: Path | None) -> dict[str, tuple[datetime, float]]:
    """Source path -> (when its last execution was cached, how long it took), from
    the execution cache (jupyter-cache). MyST-NB's own execution data cannot say
    which pages this build executed: in cache mode it executes a page into the
    cache and then reads it from there, so it reports every page as cached."""
    if cache_path is None or not cache_path.is_dir():
        return {}
    from jupyter_cache import get_cache

    found: dict[str, tuple[datetime, float]] = {}
    for record in sorted(get_cache(str(cache_path)).list_cache_records(), key=lambda r: r.created):
        seconds = float((record.data or {}).get("execution_seconds") or 0.0)
        found[str(record.uri)] = (record.created, seconds)
    return found


def page_rows(
    pages: dict[str, str],
    records: dict[str, tuple[datetime, float]],
    started: datetime,
    timed: list[str],
) -> list[dict[str, Any]]:
    """One row per page that has an execution record, slowest first (``pages``:
    docname -> source path; ``started``: when this build started, naive UTC as
    jupyter-cache records it)."""
    rows = []
    for docname, path in pages.items():
        if path not in records:
            continue
        created, seconds = records[path]
        rows.append(
            {
                "page": docname,
                "seconds": round(seconds, 1),
                "this_build": "executed" if created >= started else "from cache",
                "alone": docname in timed,
            }
        )
    return sorted(rows, key=lambda r: (-r["seconds"], r["page"]))


def summary_lines(report: dict[str, Any], shown: int = SHOWN) -> list[str]:
    """The slowest pages and the reading phase in a few lines (the build log
    shows them, and so does the test suite's summary)."""
    executed = [r for r in report["pages"] if r["this_build"] == "executed"]
    lines = [
        f"page execution: {len(executed)} pages executed in this build, "
        f"{report['executed_seconds']:.0f} s in all; reading phase "
        f"{report['read_seconds']:.0f} s of wall time with {report['jobs']} worker(s)"
    ]
    for row in report["pages"][:shown]:
        how = "alone" if row["alone"] else "beside another page"
        lines.append(f"  {row['seconds']:7.1f} s  {row['page']} ({row['this_build']}, {how})")
    return lines


def _on_config_inited(app, config) -> None:
    _clock["started"] = datetime.now(timezone.utc).replace(tzinfo=None)


def build_started() -> datetime:
    """When this build started (naive UTC, as jupyter-cache records its times):
    a page whose cache record is newer was executed by this build."""
    return _clock.get("started", datetime.min)


def _on_env_before_read(app, env, docnames) -> None:
    _clock["start"] = time.monotonic()


def _on_env_updated(app, env) -> None:
    if "start" in _clock:
        _clock["read"] = time.monotonic() - _clock.pop("start")


def _on_build_finished(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    env = app.env
    pages = {d: str(env.doc2path(d)) for d in getattr(env, inputs.ATTR, {})}  # executable ones
    rows = page_rows(
        pages,
        cache_records(parallel.cache_path(app)),
        build_started(),
        list(app.config.guide_timed_pages),
    )
    report = {
        "pages": rows,
        "executed_seconds": round(
            sum(r["seconds"] for r in rows if r["this_build"] == "executed"), 1
        ),
        "read_seconds": round(_clock.pop("read", 0.0), 1),
        "jobs": max(1, app.parallel),
    }
    path = Path(app.outdir).parent / FILE_NAME
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(report, indent=1), encoding="utf-8")
    tmp.replace(path)
    for line in summary_lines(report):
        logger.info(f"[guide] {line}")


def setup(app) -> None:
    app.connect("config-inited", _on_config_inited)
    app.connect("env-before-read-docs", _on_env_before_read, priority=100)
    app.connect("env-updated", _on_env_updated)
    app.connect("build-finished", _on_build_finished)
