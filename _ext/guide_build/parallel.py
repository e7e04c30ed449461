"""Parallel execution: several pages read (and executed) at once.

Executing the pages is most of a clean build, and most of a page's time is one
process starting, importing and running on a core or two, so the pages are
read (and executed) by ``GUIDE_BUILD_JOBS`` worker processes at once (Sphinx's
parallel read; default: 2, or 1 on a one-core machine; ``GUIDE_BUILD_JOBS=1``
builds serially). Each worker takes one page at a time. The pages listed in
``guide_timed_pages``, whose figures are timings, come first and run alone,
with every thread: an exclusive lock keeps every other execution out while one
of them runs. The other pages follow, longest first (by the execution cache's
timings, or ``guide_long_pages`` when it has none), two at a time, each with
its share of the CPU threads (its provenance note says so). The execution cache
(jupyter-cache, one SQLite file) is created before the workers start, and its
connections wait for each other's writes instead of failing at once. Every
kernel runs ``_ext/kernel_startup.py`` at its start, so that shutting it down
does not cost a second of garbage collection. A page whose execution fails in a
worker writes its failing cell and traceback to the build log
(:func:`printing_failures`), which Sphinx's parallel read would otherwise drop.
"""

from __future__ import annotations

import fcntl
import functools
import os
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

from .imports import is_executable

JOBS_VAR = "GUIDE_BUILD_JOBS"
"""Worker processes that read and execute pages (1: a serial build)."""
MAX_THREADS_VAR = "GUIDE_BUILD_MAX_THREADS"
"""The CPU threads the whole build may use (default: every core). The test suite
sets it to its worker's share: a build that runs beside other tests gives no
page more threads than that, timed pages included (OpenMP threads that wait for
a descheduled sibling by spinning made a timed page 4 to 7 times slower)."""
THREADS_VAR = "ROCM_DL_GUIDE_BUILD_THREADS"
"""Set for a page that runs next to another: the CPU threads it was given, and
the machine's (``"1/2"``); ``rocm_dl_guide.core.provenance`` shows it in the note."""
PAGE_FAILED = "executing the page failed"
"""What the build log says, after the page's name, above the whole error of a page
whose execution failed in a worker (:func:`printing_failures`)."""
_slot: dict[str, Any] = {}


def _count(environ: dict[str, str] | None, name: str) -> int | None:
    """The whole number 1 or more in ``$name``, ``None`` when it is unset or empty;
    ``ValueError`` for anything else."""
    environ = os.environ if environ is None else environ
    value = environ.get(name, "").strip()
    if not value:
        return None
    try:
        count = int(value)
    except ValueError:
        raise ValueError(f"{name} must be a whole number, not {value!r}") from None
    if count < 1:
        raise ValueError(f"{name} must be 1 or more, not {count}")
    return count


def build_jobs(environ: dict[str, str] | None = None, cpus: int | None = None) -> int:
    """How many pages to execute at once: ``$GUIDE_BUILD_JOBS``, else 2 (1 on one core)."""
    cpus = cpus or os.cpu_count() or 1
    jobs = _count(environ, JOBS_VAR)
    return min(2, cpus) if jobs is None else jobs


def threads_for(jobs: int, cpus: int, timed: bool) -> int | None:
    """CPU threads for one page's kernel: all of them (``None``: leave the
    default) for a timed page or a serial build, else an equal share."""
    if timed or jobs <= 1:
        return None
    return max(1, cpus // jobs)


def thread_budget(cpus: int, environ: dict[str, str] | None = None) -> int:
    """The threads the build may use: ``$GUIDE_BUILD_MAX_THREADS``, at most ``cpus``."""
    budget = _count(environ, MAX_THREADS_VAR)
    return cpus if budget is None else min(budget, cpus)


def _execution_slot(app, docname: str) -> None:
    """Before a page executes (in a worker process): wait for the lock, shared
    by ordinary pages, exclusive for timed ones, and give the page's kernel its
    share of the threads through the environment it inherits."""
    timed = docname in app.config.guide_timed_pages
    cpus = os.cpu_count() or 1
    budget = thread_budget(cpus)
    threads = threads_for(app.parallel, budget, timed)
    if threads is None and budget < cpus:
        threads = budget  # a timed page gets every thread the build may use
    for var in ("OMP_NUM_THREADS", THREADS_VAR):
        os.environ.pop(var, None)
    if threads is not None:
        os.environ["OMP_NUM_THREADS"] = str(threads)
        os.environ[THREADS_VAR] = f"{threads}/{cpus}"
    path = Path(app.doctreedir) / "guide-execution.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    fh = open(path, "a+")  # noqa: SIM115 - held until _release_slot
    fcntl.flock(fh, fcntl.LOCK_EX if timed else fcntl.LOCK_SH)
    _slot["lock"] = fh


def _release_slot() -> None:
    fh = _slot.pop("lock", None)
    if fh is not None:
        fcntl.flock(fh, fcntl.LOCK_UN)
        fh.close()


def _one_page_per_chunk(arguments, nproc, maxbatch=10):
    """Sphinx's ``make_chunks`` for this build: one page per worker task, so
    that two workers share the pages as they finish, not in fixed thirds."""
    return [[name] for name in arguments]


KERNEL_STARTUP = Path(__file__).parent.parent / "kernel_startup.py"
"""The file every page's kernel runs at its start (``PYTHONSTARTUP``): a faster exit."""


def _on_config_inited(app, config) -> None:
    # Set here, in the main process: the page workers and their kernels inherit it.
    os.environ["PYTHONSTARTUP"] = str(KERNEL_STARTUP)
    jobs = build_jobs()
    if jobs > 1 and app.parallel <= 1:
        app.parallel = jobs
    if app.parallel > 1:
        import sphinx.builders

        if hasattr(sphinx.builders, "make_chunks"):
            sphinx.builders.make_chunks = _one_page_per_chunk


SQLITE_WAIT_S = 120.0
"""How long a worker's connection to the execution cache waits for another's write."""


def cache_path(app) -> Path | None:
    """The execution cache's folder, or ``None`` when pages are not executed into one."""
    if getattr(app.config, "nb_execution_mode", "") != "cache":
        return None
    folder = getattr(app.config, "nb_execution_cache_path", "") or ".jupyter_cache"
    return Path(app.srcdir, folder)


def prepare_execution_cache(path: Path | None) -> None:
    """Make jupyter-cache safe for pages executed by several processes at once.

    jupyter-cache creates its SQLite database (tables and version file) the
    first time a process opens a cache folder that has none, so two workers
    starting on a clean build would both create it; here the main process
    creates it before any worker exists. Its connections use SQLite's default
    wait of 5 seconds for a lock another process holds; they wait
    :data:`SQLITE_WAIT_S` instead, so that two pages finishing together queue
    their writes rather than one failing with "database is locked".
    """
    from jupyter_cache import get_cache
    from jupyter_cache.cache import db as cache_db

    original = cache_db.create_engine
    if not getattr(original, "guide_waits", False):

        def create_engine(url, *args, **kwargs):
            connect_args = dict(kwargs.pop("connect_args", {}) or {})
            connect_args.setdefault("timeout", SQLITE_WAIT_S)
            return original(url, *args, connect_args=connect_args, **kwargs)

        create_engine.guide_waits = True
        cache_db.create_engine = create_engine
    if path is not None:
        path.mkdir(parents=True, exist_ok=True)
        get_cache(str(path)).db  # noqa: B018 - creates the database now


def _previous_seconds(app) -> dict[str, float]:
    """Source path -> how long its last execution took, from the execution cache."""
    path = cache_path(app)
    if path is None or not path.is_dir():
        return {}
    try:
        from jupyter_cache import get_cache

        records = get_cache(str(path)).list_cache_records()
    except Exception:  # an unreadable cache only loses the ordering
        return {}
    seconds: dict[str, float] = {}
    for record in sorted(records, key=lambda r: r.created):
        seconds[str(record.uri)] = float((record.data or {}).get("execution_seconds") or 0.0)
    return seconds


def execution_order(
    docnames: list[str], timed: list[str], long: list[str], seconds: dict[str, float]
) -> list[str]:
    """The order the workers take pages in: the timed pages first, in their
    configured order (they run one after the other, alone, while nothing else
    runs, so their order changes no total; a page that uses another's results,
    LoRA the pretrained model and QLoRA the LoRA run, is listed after it), then
    the rest longest first, so that the last page to finish is a short one.
    ``seconds`` are the last execution times the cache remembers; pages it does
    not know are ranked by ``long`` (the configured slow pages, in that order),
    then by name."""
    rank = {d: i for i, d in enumerate(long)}
    timed_rank = {d: i for i, d in enumerate(timed)}

    def key(d: str) -> tuple:
        return (
            d not in timed,
            timed_rank.get(d, 0),
            -seconds.get(d, 0.0),
            rank.get(d, len(rank)),
            d,
        )

    return sorted(docnames, key=key)


def queue_order(order: list[str], nproc: int) -> list[str]:
    """The list to hand to Sphinx so that its workers take pages in ``order``.

    Sphinx's ``ParallelTasks`` (7.x) starts the first ``nproc`` tasks at once
    and queues the rest, and a free worker takes the task queued *last*
    (``dict.popitem``). So the first ``nproc`` pages go in order, the rest
    reversed.
    """
    return order[:nproc] + order[nproc:][::-1]


def _order_for_workers(app, env, docnames: list[str]) -> None:
    if app.parallel <= 1:
        return
    by_path = _previous_seconds(app)
    seconds = {d: by_path.get(str(env.doc2path(d)), 0.0) for d in docnames}
    order = execution_order(
        docnames, app.config.guide_timed_pages, app.config.guide_long_pages, seconds
    )
    docnames[:] = queue_order(order, app.parallel)


def _on_env_before_read(app, env, docnames: list[str]) -> None:
    if app.parallel > 1 and docnames:
        prepare_execution_cache(cache_path(app))
    _order_for_workers(app, env, docnames)


def _on_source_read(app, docname: str, source: list[str]) -> None:
    if app.parallel > 1 and is_executable(source[0]):
        _execution_slot(app, docname)


def _on_doctree_read(app, doctree) -> None:
    _release_slot()  # the page has been executed (or taken from the cache)


def printing_failures(read_doc: Callable[..., Any], stream: TextIO | None = None):
    """``read_doc`` that writes the whole error of a page whose execution failed
    (MyST-NB's ``ExecutionError``: a cell raised, the kernel died or timed out)
    to ``stream`` (standard error), with its cause, before it raises.

    A worker of Sphinx's parallel read sends its log to the main process only
    when the page succeeds, and the main process reports a failure by the
    exception's one line: "ExecutionError: /…/book/x.md". The failing cell and
    its traceback, which MyST-NB chains to that exception and logs, would be
    lost. Other errors are left as they are: the workers the main process stops
    after a failure raise errors of their own while they shut their kernels
    down, which would only mislead here."""

    @functools.wraps(read_doc)
    def read(docname: str, *args: Any, **kwargs: Any) -> Any:
        try:
            return read_doc(docname, *args, **kwargs)
        except Exception as err:
            if not is_execution_error(err):
                raise
            lines = traceback.format_exception(err)
            out = stream or sys.stderr
            out.write(f"\n{docname}: {PAGE_FAILED}:\n")
            out.write("".join(lines))
            out.flush()
            raise

    return read


def is_execution_error(err: BaseException) -> bool:
    """Whether ``err`` is MyST-NB's error for a page whose execution failed."""
    kind = type(err)
    return kind.__name__ == "ExecutionError" and kind.__module__.startswith("myst_nb.")


def _on_builder_inited(app) -> None:
    if app.parallel > 1:
        app.builder.read_doc = printing_failures(app.builder.read_doc)


def setup(app) -> None:
    # Pages whose figures are timings: executed alone, with every CPU thread.
    app.add_config_value("guide_timed_pages", [], "env")
    # The slowest other pages, started first when the execution cache has no timings.
    app.add_config_value("guide_long_pages", [], "env")
    # sphinx-external-toc loads sphinx-multitoc-numbering, which does not
    # declare parallel safety. It only replaces the TOC collector's section
    # numbering, which runs in the main process after every page was read.
    app.setup_extension("sphinx_multitoc_numbering")
    app.extensions["sphinx_multitoc_numbering"].parallel_read_safe = True
    app.connect("config-inited", _on_config_inited)
    app.connect("builder-inited", _on_builder_inited)
    app.connect("env-before-read-docs", _on_env_before_read)
    app.connect("source-read", _on_source_read)
    app.connect("doctree-read", _on_doctree_read)
