"""Sphinx extension for the guide's own build needs (loaded from ``_config.yml``).

1. **Execution inputs.** MyST-NB's execution cache is keyed by a page's code
   cells, so on its own it does not notice that a page's output depends on the
   ``rocm_dl_guide`` modules it imports or on the pinned requirements. For every
   executable page this computes a fingerprint of those inputs (the modules the
   page imports, followed through the package's own imports, the package's data
   files, ``requirements.txt`` and ``pyproject.toml``) and stores it as metadata
   of the page's first code cell, which the cache hashes. Editing a module thus
   re-executes exactly the pages that import it, directly or not; an unchanged
   rebuild executes nothing. The same fingerprint marks the page outdated for
   Sphinx, which otherwise re-reads only pages whose own file changed.
2. **Notebook downloads.** Every executable page is offered as an ``.ipynb``
   (sphinx-book-theme copies the executed notebook when launch buttons are
   configured); this adds a first cell that says how to install the package,
   and a cell that checks it is importable.
3. **GPU verification stamp.** ``{guide-gpu-stamp}`` shows when the PyTorch
   path last passed ``make gpu-check`` on a GPU (the tracked record that only
   that command writes), with that run's figures.
4. **Provenance table.** The ``{guide-provenance}`` directive (on the home
   page) becomes a table of every executed page with the profile and device
   its outputs came from, when it was executed, how long that took and whether
   this build ran it or took it from the cache. The table is built from data,
   not from the note's prose: each page's provenance cell
   (``rocm_dl_guide.provenance.note``) glues a JSON record (MIME type
   ``application/vnd.rocm-dl-guide.provenance+json``) under the key
   ``guide-provenance``; MyST-NB writes a page's glued values to
   ``<jupyter_execute>/<docname>.glue.json`` when it reads the executed (or
   cached) notebook, and this extension reads the record from there. Runtime and
   cache status come from MyST-NB's execution data.
5. **Parallel execution.** Executing the pages is most of a clean build, and
   most of a page's time is one process starting, importing and running on a
   core or two, so the pages are read (and executed) by ``GUIDE_BUILD_JOBS``
   worker processes at once (Sphinx's parallel read; default: 2, or 1 on a
   one-core machine; ``GUIDE_BUILD_JOBS=1`` builds serially). Each worker takes
   one page at a time. The pages listed in ``guide_timed_pages``, whose
   figures are timings, come first and run alone, with every thread: an
   exclusive lock keeps every other execution out while one of them runs.
   The other pages follow, longest first (by the execution cache's timings, or
   ``guide_long_pages`` when it has none), two at a time, each with its share
   of the CPU threads (its provenance note says so). The execution cache
   (jupyter-cache, one SQLite file) is created before the workers start, and
   its connections wait for each other's writes instead of failing at once.
   Every kernel runs ``_ext/kernel_startup.py`` at its start, so that shutting
   it down does not cost a second of garbage collection.
"""

from __future__ import annotations

import ast
import fcntl
import hashlib
import json
import os
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

PACKAGE = "rocm_dl_guide"
META_KEY = "guide-inputs"
"""The code-cell option (cell metadata key) that carries a page's fingerprint."""
CELL_RE = re.compile(r"^```\{code-cell\}[^\n]*\n", re.M)
CELL_BODY_RE = re.compile(r"^```\{code-cell\}[^\n]*\n(.*?)^```", re.M | re.S)
PROVENANCE_KEY = "guide-provenance"
"""The glue key of a page's provenance record (``rocm_dl_guide.provenance.GLUE_KEY``)."""
PROVENANCE_KIND = "rocm_dl_guide.provenance"
PROVENANCE_MIME = "application/vnd.rocm-dl-guide.provenance+json"
"""Its MIME type (``rocm_dl_guide.provenance.RECORD_MIME``)."""

logger = logging.getLogger(__name__)


# --------------------------------------------------------------------------- fingerprints


def is_executable(text: str) -> bool:
    return bool(CELL_RE.search(text))


def _module_file(package_dir: Path, name: str) -> Path | None:
    for candidate in (package_dir / f"{name}.py", package_dir / name / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _imports_of(tree: ast.AST) -> set[str]:
    """Package modules named by the import statements in ``tree`` (anywhere in it)."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            if node.module == PACKAGE:
                found |= {alias.name for alias in node.names}
            elif node.module.startswith(PACKAGE + "."):
                found.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(PACKAGE + "."):
                    found.add(alias.name.split(".")[1])
    return found


def _code_cells(text: str) -> list[str]:
    """The Python source of a MyST notebook's code cells (options and magics dropped)."""
    cells = []
    for match in CELL_BODY_RE.finditer(text):
        lines = [
            line
            for line in match.group(1).splitlines()
            if not line.lstrip().startswith(("%", "!", ":"))
        ]
        cells.append("\n".join(lines))
    return cells


def page_modules(text: str) -> set[str]:
    """The package modules a page's code cells import (``__init__`` always)."""
    found = {"__init__"}
    cells = _code_cells(text) if is_executable(text) else [text]
    for code in cells:
        try:
            found |= _imports_of(ast.parse(code))
        except SyntaxError:  # not Python: fall back to the import lines alone
            for line in code.splitlines():
                try:
                    found |= _imports_of(ast.parse(line.strip()))
                except SyntaxError:
                    continue
    return found


def module_imports(path: Path) -> set[str]:
    """The package modules a module imports anywhere (also inside functions)."""
    return _imports_of(ast.parse(path.read_text(encoding="utf-8")))


def dependencies(text: str, package_dir: Path) -> list[Path]:
    """Every package source file a page depends on: its imports, followed through."""
    todo = sorted(page_modules(text))
    seen: dict[str, Path] = {}
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        path = _module_file(package_dir, name)
        if path is None:  # a function or class imported by name, not a module
            continue
        seen[name] = path
        todo.extend(sorted(module_imports(path) - set(seen)))
    return sorted(seen.values())


def _data_files(package_dir: Path) -> list[Path]:
    return sorted(
        p
        for p in package_dir.rglob("*")
        if p.is_file() and p.suffix not in (".py", ".pyc") and "__pycache__" not in p.parts
    )


def fingerprint(text: str, root: Path, package_dir: Path) -> str:
    """A short hash of everything outside the page that its outputs depend on."""
    digest = hashlib.sha256()
    files = dependencies(text, package_dir) + _data_files(package_dir)
    files += [p for p in (root / "requirements.txt", root / "pyproject.toml") if p.is_file()]
    for path in files:
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()[:16]


def inject(text: str, value: str) -> str:
    """Add ``:guide-inputs: value`` to the page's first code cell."""
    match = CELL_RE.search(text)
    if not match:
        return text
    return text[: match.end()] + f":{META_KEY}: {value}\n" + text[match.end() :]


def _paths(app) -> tuple[Path, Path]:
    root = Path(app.confdir)
    return root, root / app.config.guide_package_dir


def _on_source_read(app, docname: str, source: list[str]) -> None:
    text = source[0]
    if not is_executable(text):
        return
    root, package_dir = _paths(app)
    value = fingerprint(text, root, package_dir)
    app.env.guide_inputs[docname] = value
    source[0] = inject(text, value)
    if app.parallel > 1:
        _execution_slot(app, docname)


def _on_env_before_read(app, env, docnames: list[str]) -> None:
    if not hasattr(env, "guide_inputs"):
        env.guide_inputs = {}
    if not hasattr(env, "guide_provenance"):
        env.guide_provenance = {}
    if app.parallel > 1 and docnames:
        prepare_execution_cache(_cache_path(app))
    _order_for_workers(app, env, docnames)


def _on_get_outdated(app, env, added, changed, removed) -> list[str]:
    """Pages whose inputs changed although their own file did not (and the home page)."""
    if not hasattr(env, "guide_inputs"):
        env.guide_inputs = {}
    root, package_dir = _paths(app)
    stale = []
    for docname in sorted(env.found_docs - set(added) - set(changed)):
        path = Path(env.doc2path(docname))
        if not path.is_file():
            continue
        text = path.read_text(encoding="utf-8")
        if is_executable(text) and env.guide_inputs.get(docname) != fingerprint(
            text, root, package_dir
        ):
            stale.append(docname)
    if stale:
        logger.info(f"[guide] inputs changed, re-executing: {', '.join(stale)}")
    if stale or added or changed:
        stale.append(app.config.root_doc)  # its provenance table changes too
    return stale


def _on_purge(app, env, docname: str) -> None:
    for attr in ("guide_inputs", "guide_provenance"):
        getattr(env, attr, {}).pop(docname, None)


# --------------------------------------------------------------------------- provenance


class ProvenanceError(ValueError):
    """A page's glued provenance record is not what the table needs."""


def provenance_from_record(record: Any) -> dict[str, Any]:
    """The table's fields (profile, device, when) from a page's provenance record.

    ``record`` is the JSON object that ``rocm_dl_guide.provenance.note`` glues
    (``Provenance.record()``). Raises :class:`ProvenanceError` if it is not one.
    """
    if not isinstance(record, dict) or record.get("kind") != PROVENANCE_KIND:
        raise ProvenanceError(f"not a {PROVENANCE_KIND} record: {record!r:.200}")
    missing = [k for k in ("profile", "device", "executed_at") if not record.get(k)]
    if missing:
        raise ProvenanceError(f"provenance record without {', '.join(missing)}")
    device = " ".join(str(record["device"]).split())
    mine, _, total = str(record.get("build_threads") or "").partition("/")
    if mine and total:
        device += f" ({mine} of {total} CPU threads: ran next to another page)"
    return {
        "profile": str(record["profile"]),
        "device": device,
        "when": str(record["executed_at"]).strip(),
        "versions": dict(record.get("versions") or {}),
    }


def provenance_from_glue(glue_data: dict[str, Any]) -> dict[str, Any] | None:
    """The provenance fields from a page's glue data (MyST-NB's ``.glue.json``:
    key -> display output), or ``None`` when the page glued no provenance."""
    output = glue_data.get(PROVENANCE_KEY)
    if output is None:
        return None
    data = output.get("data", {}) if isinstance(output, dict) else {}
    if PROVENANCE_MIME not in data:
        raise ProvenanceError(
            f"glued {PROVENANCE_KEY!r} has no {PROVENANCE_MIME} output (has {sorted(data)})"
        )
    record = data[PROVENANCE_MIME]
    if isinstance(record, str):  # some writers keep JSON outputs as text
        record = json.loads(record)
    return provenance_from_record(record)


def _glue_keys(env, docname: str) -> list[str]:
    try:
        from myst_nb.sphinx_ import NbMetadataCollector

        return list(NbMetadataCollector.get_doc_data(env).get(docname, {}).get("glue", []))
    except Exception:  # no MyST-NB data for this page
        return []


def read_glue(output_folder: str | Path, docname: str) -> dict[str, Any]:
    """The glue data MyST-NB wrote for ``docname`` in ``output_folder`` (``{}`` if none)."""
    path = Path(output_folder).joinpath(*docname.split("/"))
    path = path.with_name(path.name + ".glue.json")
    if not path.is_file():
        return {}
    return json.loads(path.read_text(encoding="utf-8"))


def _on_doctree_read(app, doctree) -> None:
    """Record the page's provenance from the data its provenance cell glued.

    MyST-NB has just read the page (executing it or taking it from the cache)
    and written its glue data; a page that glued nothing this time keeps no
    entry (a stale ``.glue.json`` from an older build is not trusted).
    """
    env = app.env
    docname = env.docname
    _release_slot()
    env.guide_provenance.pop(docname, None)
    if PROVENANCE_KEY not in _glue_keys(env, docname):
        return
    folder = getattr(getattr(env, "mystnb_config", None), "output_folder", None)
    if not folder:
        return
    try:
        info = provenance_from_glue(read_glue(folder, docname))
    except (ProvenanceError, ValueError) as exc:
        logger.warning(f"[guide] {docname}: unusable provenance record: {exc}", location=docname)
        return
    if info:
        env.guide_provenance[docname] = info


class provenance_table(nodes.General, nodes.Element):
    """Placeholder, replaced by the table once every page has been read."""


class ProvenanceDirective(SphinxDirective):
    has_content = False

    def run(self):
        return [provenance_table()]


def _toc_order(env, root: str) -> list[str]:
    order: list[str] = []

    def walk(doc: str) -> None:
        if doc in order:
            return
        order.append(doc)
        for child in env.toctree_includes.get(doc, []):
            walk(child)

    walk(root)
    return order


def _exec_data(env, docname: str) -> dict[str, Any]:
    try:
        from myst_nb.sphinx_ import NbMetadataCollector

        return NbMetadataCollector.get_exec_data(env, docname) or {}
    except Exception:  # no MyST-NB data for this page
        return {}


def rows_from(
    order: list[str],
    provenance: dict[str, dict[str, Any]],
    exec_data: dict[str, dict[str, Any]],
    titles: dict[str, str],
) -> list[dict[str, str]]:
    """The table's rows, in ``order``, for the pages with a provenance record.

    ``provenance``: docname -> :func:`provenance_from_record`'s fields;
    ``exec_data``: docname -> MyST-NB's execution data (``runtime``, ``method``).
    """
    rows = []
    for docname in order:
        info = provenance.get(docname)
        if not info:
            continue
        data = exec_data.get(docname) or {}
        runtime = data.get("runtime")
        method = data.get("method", "")
        rows.append(
            {
                "docname": docname,
                "title": titles.get(docname, docname),
                "profile": info["profile"],
                "device": info["device"],
                "executed": info["when"],
                "seconds": f"{runtime:.1f}" if isinstance(runtime, (int, float)) else "",
                "this build": {"cache": "from cache", "inline": "executed"}.get(method, method),
            }
        )
    return rows


def provenance_rows(app) -> list[dict[str, str]]:
    env = app.env
    order = _toc_order(env, app.config.root_doc)
    provenance = getattr(env, "guide_provenance", {})
    return rows_from(
        order,
        provenance,
        {doc: _exec_data(env, doc) for doc in order if doc in provenance},
        {doc: env.titles[doc].astext() for doc in order if doc in env.titles},
    )


def _table(app, fromdoc: str, rows: list[dict[str, str]]) -> nodes.Node:
    headers = ["Page", "Profile", "Device", "Executed", "Seconds", "This build"]
    keys = ["title", "profile", "device", "executed", "seconds", "this build"]
    table = nodes.table(classes=["guide-provenance"])
    group = nodes.tgroup(cols=len(headers))
    table += group
    for _ in headers:
        group += nodes.colspec(colwidth=1)
    head = nodes.thead()
    group += head
    row = nodes.row()
    for h in headers:
        row += nodes.entry("", nodes.paragraph(text=h))
    head += row
    body = nodes.tbody()
    group += body
    for data in rows:
        row = nodes.row()
        for key in keys:
            para = nodes.paragraph()
            if key == "title":
                ref = nodes.reference(
                    "", data["title"], refuri=app.builder.get_relative_uri(fromdoc, data["docname"])
                )
                para += ref
            else:
                para += nodes.Text(data[key])
            row += nodes.entry("", para)
        body += row
    return table


def _on_doctree_resolved(app, doctree, docname: str) -> None:
    for node in list(doctree.findall(provenance_table)):
        rows = provenance_rows(app)
        if not rows or not hasattr(app.builder, "get_relative_uri"):
            node.replace_self(nodes.paragraph(text="(No executed pages in this build.)"))
            continue
        node.replace_self(_table(app, docname, rows))


# --------------------------------------------------------------------------- GPU verification stamp


class GpuStampDirective(SphinxDirective):
    """``{guide-gpu-stamp} [example]``: when the PyTorch path last passed
    ``make gpu-check`` on a GPU, from the tracked verification record
    (``rocm_dl_guide.selfcheck.stamp``), with that run's figures for ``example``
    (``mnist``, ``cifar10`` or ``inception``)."""

    optional_arguments = 1
    has_content = False

    def run(self):
        from docutils.statemachine import StringList

        from rocm_dl_guide import selfcheck

        example = self.arguments[0] if self.arguments else None
        if example is not None and example not in selfcheck.EXAMPLES:
            raise self.error(f"unknown example {example!r}: one of {selfcheck.EXAMPLES}")
        if selfcheck.RECORD_FILE.is_file():
            self.env.note_dependency(str(selfcheck.RECORD_FILE))
        node = nodes.container(classes=["guide-gpu-stamp"])
        text = selfcheck.stamp(example)
        self.state.nested_parse(StringList(text.splitlines()), self.content_offset, node)
        return [node]


# --------------------------------------------------------------------------- notebooks

INSTALL_MD = """\
**Running this page as a notebook.** This notebook was exported from *{title}*
in the executable ROCm Deep Learning Guide; its outputs are those of the build
({built}). To run it yourself you need the guide's Python package and its
pinned dependencies. From a clone of the repository:

```bash
make env                       # creates .venv from requirements.txt and installs the package
.venv/bin/jupyter lab          # then open this notebook and run all cells
```

or, in an environment of your own: `pip install -r requirements.txt` and
`pip install --no-deps -e .` in the clone. On a ROCm machine, start from AMD's
PyTorch container and install `requirements-rocm.txt` instead (see the README).
Set `ROCM_DL_GUIDE_PROFILE` (`smoke`, `gpu` or `full`) before starting the
kernel to choose how much work the examples do.
"""

CHECK_CODE = """\
# Check that the guide's package is importable before running the rest.
try:
    import rocm_dl_guide
except ImportError as exc:
    raise ImportError(
        "this notebook needs the rocm_dl_guide package: see the first cell"
    ) from exc
print("rocm_dl_guide", rocm_dl_guide.__version__, "is installed")"""


def add_install_cells(path: Path, title: str, built: str) -> None:
    """Put the install note and the import check in front of a downloadable notebook."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    if nb.cells and nb.cells[0].get("metadata", {}).get("guide") == "install-note":
        return
    note = nbformat.v4.new_markdown_cell(INSTALL_MD.format(title=title, built=built))
    note.metadata["guide"] = "install-note"
    check = nbformat.v4.new_code_cell(CHECK_CODE)
    check.metadata["guide"] = "install-check"
    nb.cells[:0] = [note, check]
    nbformat.validate(nb)
    tmp = path.with_suffix(".ipynb.tmp")
    nbformat.write(nb, tmp)
    tmp.replace(path)


def _on_build_finished(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    built = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    sources = Path(app.outdir) / "_sources"
    count = 0
    for docname in sorted(app.env.guide_inputs):
        path = sources / f"{docname}.ipynb"
        if path.is_file():
            title = app.env.titles[docname].astext() if docname in app.env.titles else docname
            add_install_cells(path, title, built)
            count += 1
    rows = provenance_rows(app)
    (Path(app.outdir) / "_static" / "provenance.json").write_text(json.dumps(rows, indent=1))
    logger.info(f"[guide] {count} downloadable notebooks, provenance of {len(rows)} pages")


def _on_page_context(app, pagename, templatename, context, doctree) -> None:
    """Drop scripts added twice: sphinx-thebe's inline configuration is registered
    twice under Jupyter Book 1.0, which redeclares ``const THEBE_JS_URL`` and
    raises a SyntaxError in every page's console. Runs first: the event stops at
    the first handler that returns a template name."""
    scripts = context.get("script_files")
    if not scripts:
        return
    seen: set[tuple[str, str]] = set()
    unique = []
    for script in scripts:
        attributes = getattr(script, "attributes", {}) or {}
        filename = getattr(script, "filename", script) or ""  # None and "" alike
        key = (str(filename), str(attributes.get("body", "")))
        if key in seen:
            continue
        seen.add(key)
        unique.append(script)
    context["script_files"] = unique


# --------------------------------------------------------------------------- parallel execution

JOBS_VAR = "GUIDE_BUILD_JOBS"
"""Worker processes that read and execute pages (1: a serial build)."""
THREADS_VAR = "ROCM_DL_GUIDE_BUILD_THREADS"
"""Set for a page that runs next to another: the CPU threads it was given, and
the machine's (``"1/2"``); ``rocm_dl_guide.provenance`` shows it in the note."""
_slot: dict[str, Any] = {}


def build_jobs(environ: dict[str, str] | None = None, cpus: int | None = None) -> int:
    """How many pages to execute at once: ``$GUIDE_BUILD_JOBS``, else 2 (1 on one core)."""
    environ = os.environ if environ is None else environ
    cpus = cpus or os.cpu_count() or 1
    value = environ.get(JOBS_VAR, "").strip()
    if not value:
        return min(2, cpus)
    try:
        jobs = int(value)
    except ValueError:
        raise ValueError(f"{JOBS_VAR} must be a whole number, not {value!r}") from None
    if jobs < 1:
        raise ValueError(f"{JOBS_VAR} must be 1 or more, not {jobs}")
    return jobs


def threads_for(jobs: int, cpus: int, timed: bool) -> int | None:
    """CPU threads for one page's kernel: all of them (``None``: leave the
    default) for a timed page or a serial build, else an equal share."""
    if timed or jobs <= 1:
        return None
    return max(1, cpus // jobs)


def _execution_slot(app, docname: str) -> None:
    """Before a page executes (in a worker process): wait for the lock, shared
    by ordinary pages, exclusive for timed ones, and give the page's kernel its
    share of the threads through the environment it inherits."""
    timed = docname in app.config.guide_timed_pages
    cpus = os.cpu_count() or 1
    threads = threads_for(app.parallel, cpus, timed)
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


KERNEL_STARTUP = Path(__file__).with_name("kernel_startup.py")
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


def _cache_path(app) -> Path | None:
    if getattr(app.config, "nb_execution_mode", "") != "cache":
        return None
    cache_path = getattr(app.config, "nb_execution_cache_path", "") or ".jupyter_cache"
    return Path(app.srcdir, cache_path)


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
    path = _cache_path(app)
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
    """The order the workers take pages in: the timed pages first (they run one
    after the other, alone, while nothing else runs), then the rest longest
    first, so that the last page to finish is a short one. ``seconds`` are the
    last execution times the cache remembers; pages it does not know are
    ranked by ``long`` (the configured slow pages, in that order), then by name."""
    rank = {d: i for i, d in enumerate(long)}

    def key(d: str) -> tuple:
        return (d not in timed, -seconds.get(d, 0.0), rank.get(d, len(rank)), d)

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


def _on_merge(app, env, docnames, other) -> None:
    """Bring what a worker process recorded for its pages into the main environment."""
    for attr in ("guide_inputs", "guide_provenance"):
        mine = getattr(env, attr, None)
        if mine is None:
            mine = {}
            setattr(env, attr, mine)
        theirs = getattr(other, attr, {})
        mine.update({d: theirs[d] for d in docnames if d in theirs})


def setup(app):
    app.add_config_value("guide_package_dir", f"code/{PACKAGE}", "env")
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
    app.connect("env-merge-info", _on_merge)
    app.add_node(
        provenance_table,
        html=(lambda self, node: None, lambda self, node: None),
    )
    app.add_directive("guide-provenance", ProvenanceDirective)
    app.add_directive("guide-gpu-stamp", GpuStampDirective)
    app.connect("env-before-read-docs", _on_env_before_read)
    app.connect("env-get-outdated", _on_get_outdated)
    app.connect("env-purge-doc", _on_purge)
    app.connect("source-read", _on_source_read)
    app.connect("doctree-read", _on_doctree_read)
    app.connect("doctree-resolved", _on_doctree_resolved)
    app.connect("build-finished", _on_build_finished)
    app.connect("html-page-context", _on_page_context, priority=100)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
