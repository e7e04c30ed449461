"""The execution cache notices what a page depends on (_ext/guide_build/).

Unit level: which package modules a page depends on, followed through the
package's own imports, and a fingerprint that changes exactly when one of
them (or the pins) changes. Build level: a small book in a temporary folder,
built with the real extension, whose two pages import two different modules
of a stand-in package; editing one module re-executes only the page that
imports it, an unchanged rebuild executes nothing, and editing the pinned
requirements re-executes both.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from conftest import ROOT, Build, build_book, build_failure_summary

sys.path.insert(0, str(ROOT / "_ext"))
from guide_build import imports, inputs, parallel, provenance_table  # noqa: E402

PACKAGE_DIR = ROOT / "code" / "rocm_dl_guide"


def names(paths) -> set[str]:
    return {p.stem for p in paths}


def test_page_dependencies_follow_the_package_imports():
    page = "```{code-cell} ipython3\nfrom rocm_dl_guide.casestudies import cifar10\n```\n"
    deps = names(imports.dependencies(page, PACKAGE_DIR))
    # cifar10 imports datasets and profiles at the top, train and device inside
    # functions; datasets imports fixtures; train imports progress and plots.
    assert {"__init__", "cifar10", "datasets", "profiles", "train", "device", "fixtures"} <= deps
    assert "keras_train" not in deps and "doctor" not in deps and "imdb" not in deps


def write_package(root: Path, files: dict[str, str]) -> Path:
    """A made-up ``rocm_dl_guide`` in ``root/code``: relative path -> source."""
    package_dir = root / "code" / "rocm_dl_guide"
    for name, source in {"__init__.py": '__version__ = "0"\n', **files}.items():
        (package_dir / name).parent.mkdir(parents=True, exist_ok=True)
        (package_dir / name).write_text(textwrap.dedent(source))
    return package_dir


def test_page_module_forms(tmp_path):
    flat = {f"{m}.py": "" for m in ("provenance", "tables", "train", "compat", "plots", "mnist")}
    package_dir = write_package(tmp_path, {**flat, "sub/__init__.py": "", "sub/mod.py": ""})
    text = textwrap.dedent(
        """
        from rocm_dl_guide import provenance, tables as t
        from rocm_dl_guide.train import runs_dir
        import rocm_dl_guide.compat
        from rocm_dl_guide import (
            plots,
            mnist,
        )
        """
    )
    assert imports.page_modules(text, package_dir) == {
        "__init__",
        "provenance",
        "tables",
        "train",
        "compat",
        "plots",
        "mnist",
    }
    # a subpackage's module, a name from a subpackage's __init__, a name from
    # the package's __init__; a page has no package to resolve ``from .`` against
    text = textwrap.dedent(
        """
        from rocm_dl_guide.sub import mod, NAME
        from rocm_dl_guide import __version__
        import rocm_dl_guide.sub.mod as m
        from . import tables
        """
    )
    assert imports.page_modules(text, package_dir) == {"__init__", "sub", "sub.mod"}


# A made-up package with a subpackage (``sub``) and a subpackage in that
# (``sub.deep``), importing each other in every form the reader resolves.
SUBPACKAGES = {
    "profiles.py": "",
    "helpers.py": "from . import profiles\n",  # relative, at the top level
    "unrelated.py": "",
    "sub/__init__.py": "from rocm_dl_guide import profiles\nNAME = 1\n",
    "sub/mod.py": """\
        from . import leaf
        from .. import helpers
        from .deep import inner
        from .names import CONSTANT
        """,
    "sub/leaf.py": "def f():\n    from rocm_dl_guide.sub import other, NAME\n",
    "sub/names.py": "CONSTANT = 1\n",
    "sub/other.py": "",
    "sub/unused.py": "from . import mod\n",
    # an __init__'s relative imports start from its own package
    "sub/deep/__init__.py": "from . import inner\nfrom .. import names\n",
    "sub/deep/inner.py": "from ...helpers import X\nfrom .... import beyond_the_top\n",
}


def test_module_imports_resolve_relative_imports_in_subpackages(tmp_path):
    package_dir = write_package(tmp_path, SUBPACKAGES)

    def imported(path):
        return imports.module_imports(package_dir / path, package_dir)

    assert imported("sub/mod.py") == {"sub.leaf", "helpers", "sub.deep.inner", "sub.names"}
    assert imported("sub/leaf.py") == {"sub.other", "sub"}  # NAME is defined in sub/__init__
    assert imported("sub/__init__.py") == {"profiles"}
    assert imported("sub/deep/__init__.py") == {"sub.deep.inner", "sub.names"}
    assert imported("sub/deep/inner.py") == {"helpers"}  # nothing beyond the top
    assert imported("helpers.py") == {"profiles"}
    assert imports.module_name(package_dir / "sub/deep/inner.py", package_dir) == "sub.deep.inner"
    assert imports.module_name(package_dir / "sub/deep/__init__.py", package_dir) == "sub.deep"
    assert imports.module_name(package_dir / "__init__.py", package_dir) == "__init__"
    assert imports.ancestors("sub.deep.inner") == ["__init__", "sub", "sub.deep"]


def test_page_dependencies_go_through_subpackages(tmp_path):
    """Importing ``rocm_dl_guide.sub.mod`` runs ``sub/__init__.py`` too, and
    everything the two import, absolutely or relatively."""
    package_dir = write_package(tmp_path, SUBPACKAGES)
    page = "```{code-cell} ipython3\nimport rocm_dl_guide.sub.mod\n```\n"
    deps = {p.relative_to(package_dir).as_posix() for p in imports.dependencies(page, package_dir)}
    assert deps == {
        "__init__.py",
        "sub/__init__.py",  # run by importing sub.mod
        "profiles.py",  # sub/__init__: absolute; helpers: from . import
        "sub/mod.py",
        "sub/leaf.py",  # from . import
        "helpers.py",  # from .. import
        "sub/deep/__init__.py",  # run by from .deep import inner
        "sub/deep/inner.py",
        "sub/names.py",  # from .names import CONSTANT
        "sub/other.py",  # sub/leaf, inside a function
    }


def test_editing_a_module_changes_exactly_the_pages_that_import_it(tmp_path):
    """Editing any module re-executes exactly the pages that import it, directly
    or through the package (its subpackages' __init__ files included)."""
    package_dir = write_package(tmp_path, SUBPACKAGES)
    pages = {
        "mod": "import rocm_dl_guide.sub.mod",
        "helpers": "from rocm_dl_guide import helpers",
        "inner": "from rocm_dl_guide.sub.deep import inner",
    }
    pages = {k: f"```{{code-cell}} ipython3\n{v}\n```\n" for k, v in pages.items()}
    edits = {
        # inner: imported by mod through ``from .deep import inner``
        "sub/deep/inner.py": {"mod", "inner"},
        "sub/names.py": {"mod", "inner"},  # inner's page runs sub/deep/__init__
        "sub/leaf.py": {"mod"},
        "sub/other.py": {"mod"},
        "sub/__init__.py": {"mod", "inner"},
        "profiles.py": {"mod", "helpers", "inner"},
        "helpers.py": {"mod", "helpers", "inner"},
        "__init__.py": {"mod", "helpers", "inner"},
        "sub/unused.py": set(),
        "unrelated.py": set(),
    }
    for path, expected in edits.items():
        before = {k: inputs.fingerprint(v, tmp_path, package_dir) for k, v in pages.items()}
        with (package_dir / path).open("a") as fh:
            fh.write("\n# edited\n")
        after = {k: inputs.fingerprint(v, tmp_path, package_dir) for k, v in pages.items()}
        assert {k for k in pages if after[k] != before[k]} == expected, path


@pytest.fixture
def tree(tmp_path) -> Path:
    """A copy of the package and the pins, to edit."""
    shutil.copytree(
        PACKAGE_DIR,
        tmp_path / "code" / "rocm_dl_guide",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    shutil.copy2(ROOT / "requirements.txt", tmp_path / "requirements.txt")
    shutil.copy2(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    return tmp_path


def test_fingerprint_changes_only_with_what_the_page_uses(tree):
    pkg = tree / "code" / "rocm_dl_guide"
    page = "```{code-cell} ipython3\nfrom rocm_dl_guide.doctor import compat\n```\n"
    before = inputs.fingerprint(page, tree, pkg)
    assert before == inputs.fingerprint(page, tree, pkg)  # stable
    with (pkg / "imdb.py").open("a") as fh:  # a module the page does not use
        fh.write("\n# unrelated edit\n")
    assert inputs.fingerprint(page, tree, pkg) == before
    with (pkg / "doctor" / "compat.py").open("a") as fh:
        fh.write("\n# edit\n")
    changed = inputs.fingerprint(page, tree, pkg)
    assert changed != before
    with (tree / "requirements.txt").open("a") as fh:
        fh.write("extra-package==1.0\n")
    assert inputs.fingerprint(page, tree, pkg) != changed


def test_fingerprint_changes_with_the_profile_and_the_data_source(tree):
    """A build on real data (the published site) or under another profile must
    not reuse outputs computed on fixtures: the settings are in the fingerprint."""
    pkg = tree / "code" / "rocm_dl_guide"
    page = "```{code-cell} ipython3\nfrom rocm_dl_guide.doctor import compat\n```\n"
    default = inputs.fingerprint(page, tree, pkg, environ={})
    real = inputs.fingerprint(page, tree, pkg, environ={"ROCM_DL_GUIDE_DATA_SOURCE": "real"})
    gpu = inputs.fingerprint(page, tree, pkg, environ={"ROCM_DL_GUIDE_PROFILE": "gpu"})
    assert len({default, real, gpu}) == 3
    assert inputs.fingerprint(page, tree, pkg, environ={"HOME": "/elsewhere"}) == default


def test_inject_marks_the_first_code_cell_only():
    cell = "```{code-cell} ipython3\n"
    text = f"# T\n\n{cell}:tags: [x]\nprint(1)\n```\n\n{cell}print(2)\n```\n"
    out = inputs.inject(text, "abc123")
    assert out.count(":guide-inputs: abc123") == 1
    assert out.index(":guide-inputs:") < out.index("print(1)")
    assert inputs.inject("no cells here", "x") == "no cells here"
    # The page's name goes in too: two pages with the same code (index pages'
    # provenance cells) must not share one execution-cache record.
    named = inputs.inject(text, "abc123", "book/a")
    assert named.count(":guide-page: book/a") == 1
    assert inputs.inject(text, "abc123", "book/b") != named


# --------------------------------------------------------------------------- provenance data

# Runs in a fresh interpreter with an IPython shell (what a kernel has), so that
# the record goes through the real glue() and display machinery.
_GLUE_SCRIPT = """
import json, sys
from IPython.core.interactiveshell import InteractiveShell
from IPython.utils.capture import capture_output
from traitlets.config import Config

config = Config()
config.HistoryManager.hist_file = ":memory:"
InteractiveShell.instance(config=config)
from rocm_dl_guide.core import provenance

prov = provenance.Provenance(**json.loads(sys.argv[1]))
with capture_output() as captured:
    provenance.record(prov)
print(json.dumps([{"data": o.data, "metadata": o.metadata} for o in captured.outputs]))
"""


def _glued_outputs(tmp_path, **fields) -> list[dict]:
    import json
    import subprocess

    env = {**os.environ, "IPYTHONDIR": str(tmp_path / "ipython")}
    done = subprocess.run(
        [sys.executable, "-c", _GLUE_SCRIPT, json.dumps(fields)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=True,
    )
    return json.loads(done.stdout)


def test_provenance_record_reaches_the_table_as_data(tmp_path):
    """note()'s glued record -> MyST-NB's glue data -> the extension's table row,
    without building a book. The device is one the old regular expression over
    the prose got wrong (it stopped at the first semicolon)."""
    import json

    import nbformat
    from docutils import nodes
    from myst_nb.ext.glue import extract_glue_data_cell

    from rocm_dl_guide.core import provenance

    assert provenance_table.PROVENANCE_KEY == provenance.GLUE_KEY
    assert provenance_table.PROVENANCE_KIND == provenance.RECORD_KIND
    assert provenance_table.PROVENANCE_MIME == provenance.RECORD_MIME
    device = "GPU 0: AMD Instinct MI300X (gfx942; 192 GB), ROCm 6.4. via PyTorch"
    fields = {
        "profile": "gpu",
        "device": device,
        "versions": {"Python": "3.12.3", "PyTorch": "2.7.0"},
        "executed_at": "2026-02-03 04:05 UTC",
    }
    outputs = _glued_outputs(tmp_path, **fields)
    # What the executed notebook holds, and what MyST-NB makes of it.
    cell = nbformat.v4.new_code_cell("provenance.note(profile)")
    cell.outputs = [nbformat.v4.new_output("display_data", **o) for o in outputs]
    nbformat.validate(nbformat.v4.new_notebook(cells=[cell]))  # a valid notebook file
    glue = dict(extract_glue_data_cell(cell))
    assert cell.outputs == []  # recorded, not shown
    folder = tmp_path / "jupyter_execute"
    (folder / "book" / "training").mkdir(parents=True)
    (folder / "book" / "training" / "page.glue.json").write_text(json.dumps(glue))

    info = provenance_table.provenance_from_glue(
        provenance_table.read_glue(folder, "book/training/page")
    )
    assert info["profile"] == "gpu" and info["device"] == device
    assert info["when"] == "2026-02-03 04:05 UTC" and info["versions"]["PyTorch"] == "2.7.0"

    order = ["book/index", "book/training/page", "book/training/other"]
    rows = provenance_table.rows_from(
        order,
        {"book/training/page": info},
        {"book/training/page": {"runtime": 12.345, "method": "cache"}},
        {"book/training/page": "A page"},
        set(),
    )
    assert rows == [
        {
            "docname": "book/training/page",
            "title": "A page",
            "profile": "gpu",
            "device": device,
            "executed": "2026-02-03 04:05 UTC",
            "seconds": "12.3",
            "this build": "from cache",
        }
    ]
    # A page this build executed says so, though MyST-NB's method says "cache".
    again = provenance_table.rows_from(
        order,
        {"book/training/page": info},
        {"book/training/page": {"runtime": 12.345, "method": "cache"}},
        {"book/training/page": "A page"},
        {"book/training/page"},
    )
    assert again[0]["this build"] == "executed"
    builder = type("Builder", (), {"get_relative_uri": lambda self, a, b: b + ".html"})()
    table = provenance_table._table(type("App", (), {"builder": builder})(), "book/index", rows)
    cells = [entry.astext() for entry in table.findall(nodes.entry)]
    assert cells[:6] == ["Page", "Profile", "Device", "Executed", "Seconds", "This build"]
    assert cells[6:] == ["A page", "gpu", device, "2026-02-03 04:05 UTC", "12.3", "from cache"]


def test_provenance_from_glue_rejects_what_is_not_a_record():
    assert provenance_table.provenance_from_glue({}) is None  # the page glued no provenance
    assert provenance_table.provenance_from_glue({"other": {"data": {}}}) is None
    MIME = provenance_table.PROVENANCE_MIME
    good = {"kind": "rocm_dl_guide.core.provenance", "profile": "smoke", "device": "CPU (x)"}
    bad = [
        {"guide-provenance": {"data": {"text/plain": "'smoke'"}}},  # no record output
        {"guide-provenance": {"data": {"application/json": good}}},  # not its MIME type
        {"guide-provenance": {"data": {MIME: {"profile": "smoke"}}}},  # not a record
        {"guide-provenance": {"data": {MIME: good}}},  # no executed_at
    ]
    for glue in bad:
        with pytest.raises(provenance_table.ProvenanceError):
            provenance_table.provenance_from_glue(glue)
    record = {**good, "executed_at": "2026-01-01 00:00 UTC"}
    info = provenance_table.provenance_from_glue({"guide-provenance": {"data": {MIME: record}}})
    assert info["profile"] == "smoke" and info["when"] == "2026-01-01 00:00 UTC"


def test_reading_any_page_reads_the_home_page_too():
    """The home page's provenance table changes whenever a page is read again."""
    found = {"index", "book/a", "book/b"}
    docnames = ["book/a"]
    provenance_table.read_home_too(docnames, "index", found)
    assert docnames == ["book/a", "index"]
    provenance_table.read_home_too(docnames, "index", found)
    assert docnames == ["book/a", "index"]  # once
    nothing: list[str] = []
    provenance_table.read_home_too(nothing, "index", found)
    assert nothing == []  # an unchanged rebuild reads nothing
    elsewhere = ["book/a"]
    provenance_table.read_home_too(elsewhere, "home", found)
    assert elsewhere == ["book/a"]  # not one of the book's pages


def test_a_page_run_next_to_another_says_so_in_its_note_and_the_table(monkeypatch):
    from rocm_dl_guide.core import profiles, provenance

    assert parallel.THREADS_VAR == provenance.BUILD_THREADS_VAR
    monkeypatch.setenv(profiles.ENV_VAR, "smoke")
    monkeypatch.delenv(provenance.BUILD_THREADS_VAR, raising=False)
    alone = provenance.collect(profiles.current(), "none")
    assert alone.build_threads == "" and "next to another page" not in alone.markdown()
    monkeypatch.setenv(provenance.BUILD_THREADS_VAR, "1/2")
    shared = provenance.collect(profiles.current(), "none")
    assert "ran it next to another page, with 1 of the 2 CPU threads" in shared.markdown()
    info = provenance_table.provenance_from_record(shared.record())
    assert info["device"].endswith("(1 of 2 threads, beside another page)")


def test_the_build_summary_names_a_small_group_of_pages():
    """The home page's sentence names the page that ran on real data, not just a count."""
    record = {"profile": "smoke", "device": "CPU (x)", "data_source": "fixtures"}
    pages = {f"book/p{i}": dict(record) for i in range(5)}
    pages["book/fm"] = record | {"data_source": "real"}
    text = provenance_table.build_summary(pages, {"book/fm": "Fashion-MNIST"})
    assert "5 with the smoke profile on generated fixtures" in text
    assert "; 1, Fashion-MNIST, with the smoke profile on real data" in text
    pages["book/pt"] = record | {"device": "CPU (x, 2 cores)"}
    assert provenance_table.build_summary(pages).endswith(", on CPU (x).")  # one machine
    alone = provenance_table.build_summary({"book/p0": record})
    assert alone.startswith("This build: the one executed page ran with the smoke profile on")


def test_parallel_build_jobs_and_thread_shares():
    assert parallel.build_jobs({}, cpus=2) == 2
    assert parallel.build_jobs({}, cpus=1) == 1
    assert parallel.build_jobs({"GUIDE_BUILD_JOBS": "1"}, cpus=16) == 1
    assert parallel.build_jobs({"GUIDE_BUILD_JOBS": " 4 "}, cpus=2) == 4
    for bad in ("two", "0", "-1"):
        with pytest.raises(ValueError, match="GUIDE_BUILD_JOBS"):
            parallel.build_jobs({"GUIDE_BUILD_JOBS": bad}, cpus=2)
    assert parallel.threads_for(jobs=2, cpus=2, timed=False) == 1
    assert parallel.threads_for(jobs=2, cpus=16, timed=False) == 8
    assert parallel.threads_for(jobs=3, cpus=2, timed=False) == 1
    assert parallel.threads_for(jobs=2, cpus=2, timed=True) is None  # every thread
    assert parallel.threads_for(jobs=1, cpus=2, timed=False) is None  # serial build
    assert parallel.thread_budget(2, {}) == 2
    assert parallel.thread_budget(2, {parallel.MAX_THREADS_VAR: "1"}) == 1
    assert parallel.thread_budget(2, {parallel.MAX_THREADS_VAR: "8"}) == 2
    for bad in ("x", "0"):
        with pytest.raises(ValueError, match=parallel.MAX_THREADS_VAR):
            parallel.thread_budget(2, {parallel.MAX_THREADS_VAR: bad})
    assert parallel._one_page_per_chunk(["a", "b", "c"], 2) == [["a"], ["b"], ["c"]]


def test_execution_cache_is_created_before_the_workers_and_waits_for_locks(tmp_path):
    """Two workers writing to jupyter-cache's SQLite file at once queue, not fail."""
    import multiprocessing
    import sqlite3

    from jupyter_cache import get_cache

    cache = tmp_path / "cache"
    parallel.prepare_execution_cache(cache)
    assert (cache / "global.db").is_file() and (cache / "__version__.txt").is_file()
    parallel.prepare_execution_cache(cache)  # again: the wrapper is not stacked
    # another process holds the write lock for 7 s, longer than SQLite's default 5 s
    ready = multiprocessing.get_context("fork").Event()
    holder = multiprocessing.get_context("fork").Process(
        target=_hold_write_lock, args=(cache / "global.db", ready, 7.0)
    )
    holder.start()
    try:
        assert ready.wait(30)
        page = tmp_path / "page.ipynb"
        page.write_text('{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}')
        record = get_cache(str(cache)).add_nb_to_project(str(page))  # waits, then writes
        assert record.uri == str(page)
    finally:
        holder.join(30)
    assert holder.exitcode == 0
    with pytest.raises(sqlite3.OperationalError, match="locked"):  # what it prevents
        blocker = sqlite3.connect(cache / "global.db", timeout=0)
        blocker.execute("BEGIN EXCLUSIVE")
        sqlite3.connect(cache / "global.db", timeout=0.1).execute("BEGIN EXCLUSIVE")


def test_a_failed_build_is_summarised_at_the_end_of_the_session():
    log = "\n".join(
        ["Running Jupyter-Book", "reading sources... [ 50%] book/a"]
        + [f"line {i}" for i in range(100)]
        + ["/src/book/b.md: WARNING: Executing notebook failed: CellExecutionError"]
        + ["Traceback (most recent call last):", "ValueError: bad page"]
    )
    summary = build_failure_summary(Build(code=1, log=log, seconds=12.0), tail=3)
    assert summary[0] == "the book did not build (exit 1 after 12 s)"
    assert summary[1].endswith("WARNING: Executing notebook failed: CellExecutionError")
    assert summary[2:4] == ["Traceback (most recent call last):", "ValueError: bad page"]
    assert summary[-3:] == log.splitlines()[-3:]
    quiet = build_failure_summary(Build(code=2, log="a\nb", seconds=1.0), tail=1)
    assert quiet[1] == "(no warning or error lines in the log)" and quiet[-1] == "b"


def _hold_write_lock(db: Path, ready, seconds: float) -> None:
    import sqlite3

    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("BEGIN EXCLUSIVE")
    ready.set()
    time.sleep(seconds)
    conn.execute("COMMIT")


def test_execution_order_puts_timed_pages_first_then_the_longest():
    docs = ["a", "bench", "b", "c", "slow", "tuning"]
    order = parallel.execution_order(
        docs, timed=["tuning", "bench"], long=["slow", "c"], seconds={"bench": 60.0, "b": 9.0}
    )
    # timed pages first (in their configured order, whatever the cache says),
    # then by the cache's seconds, then by the configured slow pages, then by name
    assert order == ["tuning", "bench", "b", "slow", "c", "a"]
    # Sphinx starts two tasks, then takes the last queued one first
    assert parallel.queue_order(order, 2) == ["tuning", "bench", "a", "c", "slow", "b"]


def _append(args) -> None:
    import time

    path, name = args
    time.sleep(0.3)  # long enough for every task to be queued before this one ends
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(name + "\n")


def test_sphinx_workers_take_pages_in_the_intended_order(tmp_path):
    """queue_order against Sphinx's own ParallelTasks: the pages run in order."""
    from sphinx.util.parallel import ParallelTasks

    log = tmp_path / "order.txt"
    order = ["p0", "p1", "p2", "p3", "p4"]
    tasks = ParallelTasks(1)  # one worker: the pages run strictly one after another
    for name in parallel.queue_order(order, 1):
        tasks.add_task(_append, (str(log), name))
    tasks.join()
    assert log.read_text(encoding="utf-8").split() == order


def test_a_timed_page_holds_the_execution_lock_alone(tmp_path, monkeypatch):
    import fcntl
    from types import SimpleNamespace

    def app(timed):
        config = SimpleNamespace(guide_timed_pages=["book/timed"] if timed else [])
        return SimpleNamespace(config=config, parallel=2, doctreedir=str(tmp_path))

    lock = tmp_path / "guide-execution.lock"
    monkeypatch.setattr(parallel.os, "cpu_count", lambda: 2)
    monkeypatch.setenv("OMP_NUM_THREADS", "7")
    monkeypatch.delenv(parallel.MAX_THREADS_VAR, raising=False)  # xdist workers set it
    parallel._execution_slot(app(timed=True), "book/timed")
    try:
        assert "OMP_NUM_THREADS" not in os.environ  # every thread for a timed page
        with open(lock) as other, pytest.raises(BlockingIOError):
            fcntl.flock(other, fcntl.LOCK_SH | fcntl.LOCK_NB)  # nothing else may run
    finally:
        parallel._release_slot()
    monkeypatch.setenv(parallel.MAX_THREADS_VAR, "1")  # as the test suite runs the build
    parallel._execution_slot(app(timed=True), "book/timed")
    try:
        assert os.environ["OMP_NUM_THREADS"] == "1"  # every thread the build may use
        assert os.environ[parallel.THREADS_VAR] == "1/2"
    finally:
        parallel._release_slot()
        os.environ.pop(parallel.THREADS_VAR, None)
    monkeypatch.delenv(parallel.MAX_THREADS_VAR)
    parallel._execution_slot(app(timed=False), "book/plain")
    try:
        assert os.environ["OMP_NUM_THREADS"] == "1"
        assert os.environ[parallel.THREADS_VAR] == "1/2"
        with open(lock) as other:
            fcntl.flock(other, fcntl.LOCK_SH | fcntl.LOCK_NB)  # another page may run
            with pytest.raises(BlockingIOError):
                fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a timed one may not
    finally:
        parallel._release_slot()
        os.environ.pop(parallel.THREADS_VAR, None)


def test_timed_pages_exist_and_report_timings():
    import yaml

    config = yaml.safe_load((ROOT / "_config.yml").read_text(encoding="utf-8"))
    timed = config["sphinx"]["config"]["guide_timed_pages"]
    assert "book/optimization/benchmark" in timed and "book/optimization/precision" in timed
    for page in timed + config["sphinx"]["config"]["guide_long_pages"]:
        assert (ROOT / f"{page}.md").is_file(), page
    # the PDF extension, which would switch the parallel read off, stays off
    assert config["latex"]["use_jupyterbook_latex"] is False


def test_note_outside_a_kernel_records_nothing(capsys, monkeypatch):
    from rocm_dl_guide.core import profiles, provenance

    monkeypatch.setenv(profiles.ENV_VAR, "smoke")
    shown = provenance.note(profiles.current(), framework="none")
    assert "Provenance." in shown.data and capsys.readouterr().out == ""


# --------------------------------------------------------------------------- a real build

HEADER = textwrap.dedent(
    """\
    ---
    jupytext:
      text_representation:
        extension: .md
        format_name: myst
    kernelspec:
      display_name: Python 3
      language: python
      name: python3
    ---
    """
)


def _page(title: str, module: str) -> str:
    return HEADER + textwrap.dedent(
        f"""
        # {title}

        ```{{code-cell}} ipython3
        from IPython.display import Markdown
        from myst_nb import glue
        from rocm_dl_guide import {module}

        # What rocm_dl_guide.core.provenance.note does: the record as glued data (the
        # table is built from it), the prose for the reader (never parsed).
        class Record:
            def _repr_mimebundle_(self, include=None, exclude=None):
                record = {{
                    "kind": "rocm_dl_guide.core.provenance", "version": 1, "profile": "smoke",
                    "device": "CPU (stand-in; {title})", "executed_at": "2026-01-01 00:00 UTC",
                }}
                return {{"{provenance_table.PROVENANCE_MIME}": record, "text/plain": "record"}}

        glue("guide-provenance", Record(), display=False)
        Markdown("**Provenance.** Prose for the reader, which the table does not read.")
        ```

        ```{{code-cell}} ipython3
        print("value", {module}.VALUE)
        ```
        """
    )


@pytest.fixture
def small_book(tmp_path) -> Path:
    book = tmp_path / "book"
    pkg = book / "code" / "rocm_dl_guide"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text('__version__ = "0"\n')
    (pkg / "alpha.py").write_text("VALUE = 1\n")
    (pkg / "beta.py").write_text("VALUE = 10\n")
    (book / "requirements.txt").write_text("numpy==2.0.0\n")
    (book / "a.md").write_text(_page("Page A", "alpha"))
    (book / "b.md").write_text(_page("Page B", "beta"))
    (book / "index.md").write_text("# Small book\n\n```{guide-provenance}\n```\n")
    (book / "_toc.yml").write_text(
        "format: jb-book\nroot: index\nchapters:\n  - file: a\n  - file: b\n"
    )
    (book / "_config.yml").write_text(
        textwrap.dedent(
            f"""\
            title: Small
            only_build_toc_files: true
            exclude_patterns: [_build, code, "*.txt", ".*"]
            execute:
              execute_notebooks: cache
              cache: {book / ".jupyter_cache"}
            sphinx:
              local_extensions:
                guide_build: {ROOT / "_ext"}
              config:
                nb_execution_raise_on_error: true
            """
        )
    )
    return book


def _executed(build) -> set[str]:
    assert build.code == 0, build.log[-4000:]
    return {Path(p).stem for p in build.executed}


@pytest.mark.book  # four builds of a small book: not in `make check`
def test_rebuilds_execute_exactly_the_dependent_pages(small_book):
    # The kernel imports the stand-in package from the small book, not the real one.
    env = {**os.environ, "PYTHONPATH": str(small_book / "code")}
    html = small_book / "_build" / "html"

    assert _executed(build_book(small_book, timeout=600, env=env)) == {"a", "b"}
    assert "value 1" in (html / "a.html").read_text()

    assert _executed(build_book(small_book, timeout=600, env=env)) == set()  # unchanged

    (small_book / "code" / "rocm_dl_guide" / "alpha.py").write_text("VALUE = 2\n")
    assert _executed(build_book(small_book, timeout=600, env=env)) == {"a"}
    assert "value 2" in (html / "a.html").read_text()  # not stale
    assert "value 10" in (html / "b.html").read_text()

    with (small_book / "requirements.txt").open("a") as fh:
        fh.write("pandas==2.0.0\n")
    assert _executed(build_book(small_book, timeout=600, env=env)) == {"a", "b"}

    home = (html / "index.html").read_text()
    assert "guide-provenance" in home and "Page A" in home and "Page B" in home
    # The table's profile, device and time come from the glued records.
    assert "CPU (stand-in; Page A)" in home and "CPU (stand-in; Page B)" in home
    assert "2026-01-01 00:00 UTC" in home and ">smoke<" in home


def test_build_kernels_freeze_what_is_left_at_exit(monkeypatch):
    """Every page's kernel runs _ext/kernel_startup.py (the build sets
    PYTHONSTARTUP, which IPython kernels honour): at exit, after every other exit
    handler, the objects still alive are frozen, so the interpreter's last garbage
    collections skip them."""
    monkeypatch.setenv(parallel.JOBS_VAR, "1")
    monkeypatch.setenv("PYTHONSTARTUP", "")  # restored after the test
    parallel._on_config_inited(SimpleNamespace(parallel=1), None)
    startup = os.environ["PYTHONSTARTUP"]
    assert Path(startup) == parallel.KERNEL_STARTUP and Path(startup).is_file()
    code = textwrap.dedent(
        f"""
        import atexit, gc
        atexit.register(lambda: print("at exit", gc.get_freeze_count()))  # runs last
        exec(open({startup!r}).read())
        print("before", gc.get_freeze_count())
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    ).stdout.split()
    assert out[:2] == ["before", "0"]
    assert out[2:4] == ["at", "exit"] and int(out[4]) > 1000


def test_timed_pages_the_cache_does_not_know_keep_their_configured_order():
    timed = ["lm/pretraining", "ddp", "lm/lora"]
    order = parallel.execution_order(["a", "lm/lora", "ddp", "lm/pretraining"], timed, [], {})
    assert order == ["lm/pretraining", "ddp", "lm/lora", "a"]
    # and so do those it knows: QLoRA reads the LoRA run, however long each took
    seconds = {"lm/qlora": 90.0, "lm/lora": 30.0}
    order = parallel.execution_order(["lm/qlora", "lm/lora"], ["lm/lora", "lm/qlora"], [], seconds)
    assert order == ["lm/lora", "lm/qlora"]


def _read_failing_page(docname: str) -> None:
    """A worker's read of a page whose cell raised, as MyST-NB reports it."""
    from myst_nb.core.execute.base import ExecutionError

    def read_doc(name):
        try:
            raise RuntimeError("the cell's own error: loss is nan at step 7")
        except RuntimeError as cell_error:
            raise ExecutionError(f"/book/{name}.md") from cell_error

    parallel.printing_failures(read_doc)(docname)


def _read_stopped_page(docname: str) -> None:
    def read_doc(name):
        raise AttributeError("'NoneType' object has no attribute 'cleanup_resources'")

    parallel.printing_failures(read_doc)(docname)


def test_a_parallel_build_log_carries_the_failing_cell_and_its_traceback(capfd):
    """Sphinx's parallel read reports a worker's failure by its one line; the
    failing cell's error reaches the log only through printing_failures."""
    from sphinx.errors import SphinxParallelError
    from sphinx.util.parallel import ParallelTasks

    from conftest import page_failures

    tasks = ParallelTasks(2)
    tasks.add_task(_read_failing_page, "training/mnist")
    with pytest.raises(SphinxParallelError) as raised:
        tasks.join()
    assert "nan at step 7" not in str(raised.value)  # what Sphinx alone would show
    log = capfd.readouterr().err
    failure = "\n".join(page_failures(log))
    assert failure.startswith(f"training/mnist: {parallel.PAGE_FAILED}:")
    assert "RuntimeError: the cell's own error: loss is nan at step 7" in failure
    assert "ExecutionError: /book/training/mnist.md" in failure
    # a worker stopped after another's failure raises while it shuts down: not printed
    tasks = ParallelTasks(2)
    tasks.add_task(_read_stopped_page, "index")
    with pytest.raises(SphinxParallelError, match="cleanup_resources"):
        tasks.join()
    assert parallel.PAGE_FAILED not in capfd.readouterr().err
