"""Every executable page, downloaded from the built site as a notebook, is the
notebook the build executed, and runs as a reader runs it.

This is what a reader does with a downloaded page: no Sphinx, no MyST-NB
machinery, just the ``.ipynb`` from the page's download menu and the installed
package. The guarantee is proved in two parts, so that the book is executed
once per test run, not twice:

- **Every download is the executed page** (all pages, no kernel). Its code
  cells are the page's code cells, in the page's order, and each holds exactly
  the outputs of the build's run of those cells: the execution cache's record,
  found by jupyter-cache's own hash of the cells (which includes the page's
  inputs fingerprint), the record the HTML page was rendered from. Their
  execution counts are 1, 2, 3 ... in order: one kernel ran them top to
  bottom, as a fresh kernel does. In front of them come the install note and
  the import check.
- **A fresh kernel gives the same result** (a few pages, executed again). A
  fresh kernel differs from the build's only in what is outside the notebook:
  its working directory (the build runs a page in the page's folder, a reader
  wherever the download landed), the files and caches it finds, the processes
  it starts and the ports it listens on. :data:`FRESH_KERNEL` runs again, in an
  empty folder, the cheapest page of each kind that touches these: the data page
  (temporary folders, files and the data cache), the multi-node page (torchrun
  workers, launched as subprocesses with their own working directory and
  environment) and the serving page (a server on a free port and its model
  folder). A page that only computes in its kernel cannot differ.
"""

import nbformat
import pytest
from myst_nb.core.read import read_myst_markdown_notebook
from nbclient import NotebookClient

from conftest import HTML, ROOT, hang_limit, is_executable, source, toc_files

pytestmark = [pytest.mark.book, pytest.mark.notebook]
PAGES = [p for p in toc_files() if is_executable(p)]
FRESH_KERNEL = [
    "book/frameworks/data",
    "book/distributed/multi-node",
    "book/language-models/serving",
]


def download(page: str) -> nbformat.NotebookNode:
    path = HTML / "_sources" / f"{page}.ipynb"
    assert path.is_file(), f"{page}: no .ipynb download in the built site"
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    return nb


def cached_run(download: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The execution cache's notebook for a download's cells (without the two
    install cells), found the way MyST-NB finds it: by jupyter-cache's hash."""
    from jupyter_cache import get_cache

    page = nbformat.from_dict(download)
    page.cells = page.cells[2:]
    cache = get_cache(str(ROOT / ".jupyter_cache"))
    try:
        record = cache.match_cache_notebook(page)
    except KeyError:
        pytest.fail("the execution cache has no run of the download's cells")
    return cache.get_cache_bundle(record.pk).nb


def code_cells(nb) -> list:
    return [c for c in nb.cells if c.cell_type == "code"]


@pytest.mark.parametrize("page", PAGES)
def test_download_holds_the_cells_the_build_executed(build, page):
    assert build.code == 0, "the book did not build"
    nb = download(page)
    note, check, *rest = nb.cells
    assert note.cell_type == "markdown" and "pip install" in note.source
    assert note.metadata.get("guide") == "install-note"
    assert check.cell_type == "code" and check.metadata.get("guide") == "install-check"
    assert "import rocm_dl_guide" in check.source
    assert nb.metadata["kernelspec"]["name"] == "python3"

    cells = [c for c in rest if c.cell_type == "code"]
    page_cells = code_cells(read_myst_markdown_notebook(source(page).read_text()))
    assert [c.source for c in cells] == [c.source for c in page_cells], (
        f"{page}: the download's code cells are not the page's, in its order"
    )
    ran = code_cells(cached_run(nb))
    assert [c.source for c in ran] == [c.source for c in cells]
    for mine, theirs in zip(cells, ran, strict=True):
        assert mine.outputs == theirs.outputs, (
            f"{page}: a cell's outputs are not the build's: {mine.source[:80]!r}"
        )
    counts = [c.get("execution_count") for c in cells]
    assert counts == list(range(1, len(cells) + 1)), (
        f"{page}: execution counts {counts}: not one kernel running the cells top to bottom"
    )
    for cell in cells:
        for out in cell.outputs:
            assert out.output_type != "error", f"{page}: {out.get('ename')}: {out.get('evalue')}"
    assert any(c.outputs for c in cells), f"{page}: no outputs"


def test_fresh_kernel_pages_are_executable_pages():
    assert set(FRESH_KERNEL) <= set(PAGES)


@pytest.mark.parametrize("page", FRESH_KERNEL)
def test_downloaded_notebook_runs_in_a_fresh_kernel(build, page, tmp_path):
    assert build.code == 0, "the book did not build"
    nb = download(page)
    # the downloaded copy carries the build's outputs; run it afresh elsewhere.
    # A cell's budget is 100 s (was a fixed 300 s limit; the serving page took
    # 240 s in all under make test-slow): it is stopped after hang_limit of it.
    client = NotebookClient(
        nb,
        timeout=round(hang_limit(100)),  # nbclient takes whole seconds
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()  # raises CellExecutionError on any failing cell
    cells = code_cells(nb)
    assert cells and all(c.get("execution_count") for c in cells)
    assert any(c.outputs for c in cells)
    for cell in cells:
        for out in cell.outputs:
            assert out.output_type != "error", f"{page}: {out.get('ename')}: {out.get('evalue')}"


VISIBLE_ONLY = [
    "book/prerequisites/hardware",
    "book/prerequisites/compatibility",
    "book/frameworks/data",
    "book/kernels/programming-model",
    "book/kernels/pytorch",
    "book/training/fast-training",
]
"""Pages run from the code they show alone (issue 56): a reader who copies
each visible cell into a fresh notebook, in order, gets no error. Cheap pages
of every chapter the book opens with; ``tests/test_visible_code.py`` checks
the names in every page's visible cells statically."""


@pytest.mark.parametrize("page", VISIBLE_ONLY)
def test_a_page_runs_from_its_visible_cells_alone(page, tmp_path):
    from test_visible_code import visible_cells

    assert is_executable(page)
    cells = visible_cells(source(page).read_text(encoding="utf-8"))
    assert cells, f"{page}: no visible code"
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    client = NotebookClient(
        nb,
        timeout=round(hang_limit(100)),  # nbclient takes whole seconds
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()  # raises CellExecutionError, naming the cell, on any failing cell
    assert all(c.get("execution_count") for c in nb.cells)
    assert any(c.outputs for c in nb.cells), f"{page}: the visible cells printed nothing"
