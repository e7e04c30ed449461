"""Notebook downloads: every executable page as an ``.ipynb`` that says how to run it.

sphinx-book-theme copies each executed notebook next to the site's sources
when launch buttons are configured; this adds a first cell that says how to
install the package, and a cell that checks it is importable.

The code cells of a download are the execution cache's record of the page's
run (its outputs and execution counts). MyST-NB (1.x) writes the executed
notebook that the download is copied from correctly only for a page it has just
executed: for a page it takes from the cache (an incremental build, or a page
whose code is the same as another's) it writes the notebook as read, without
outputs, although the HTML page shows them.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from sphinx.util import logging

from . import inputs, parallel

logger = logging.getLogger(__name__)

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


def _install_cells(nb) -> int:
    """How many of the notebook's first cells are the ones :func:`add_install_cells` adds."""
    kinds = [c.get("metadata", {}).get("guide") for c in nb.cells[:2]]
    return 2 if kinds == ["install-note", "install-check"] else 0


def with_cached_run(nb, cache_folder: Path):
    """``nb`` (a page's notebook, without the install cells) with its code cells
    taken from the execution cache's run of them (outputs, execution counts);
    ``None`` when the cache has no run of these cells."""
    from jupyter_cache import get_cache

    try:
        _, merged = get_cache(str(cache_folder)).merge_match_into_notebook(nb)
    except KeyError:
        return None
    return merged


def add_install_cells(path: Path, title: str, built: str, cache_folder: Path | None = None) -> None:
    """Put the install note and the import check in front of a downloadable
    notebook, whose code cells come from the execution cache's run of them
    where ``cache_folder`` has one."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    del nb.cells[: _install_cells(nb)]
    if cache_folder is not None and cache_folder.is_dir():
        nb = with_cached_run(nb, cache_folder) or nb
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
    for docname in sorted(getattr(app.env, inputs.ATTR, {})):  # the executable pages
        path = sources / f"{docname}.ipynb"
        if path.is_file():
            title = app.env.titles[docname].astext() if docname in app.env.titles else docname
            add_install_cells(path, title, built, parallel.cache_path(app))
            count += 1
    logger.info(f"[guide] {count} downloadable notebooks")


def setup(app) -> None:
    app.connect("build-finished", _on_build_finished)
