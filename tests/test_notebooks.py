"""Every executable page, downloaded from the built site as a notebook, runs top
to bottom in a fresh kernel.

This is what a reader does with a downloaded page: no Sphinx, no MyST-NB
machinery, just the ``.ipynb`` from the page's download menu and the installed
package. The notebook must open with the note on how to install the package.
"""

import nbformat
import pytest
from nbclient import NotebookClient

from conftest import HTML, is_executable, toc_files

pytestmark = [pytest.mark.book, pytest.mark.notebook]
PAGES = [p for p in toc_files() if is_executable(p)]


@pytest.mark.parametrize("page", PAGES)
def test_downloaded_notebook_runs_in_a_fresh_kernel(build, page, tmp_path):
    assert build.code == 0, "the book did not build"
    download = HTML / "_sources" / f"{page}.ipynb"
    assert download.is_file(), f"{page}: no .ipynb download in the built site"
    nb = nbformat.read(download, as_version=4)
    nbformat.validate(nb)
    first = nb.cells[0]
    assert first.cell_type == "markdown" and "pip install" in first.source
    assert "import rocm_dl_guide" in nb.cells[1].source
    assert nb.metadata["kernelspec"]["name"] == "python3"
    # the downloaded copy carries the build's outputs; run it afresh elsewhere
    client = NotebookClient(
        nb, timeout=900, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()  # raises CellExecutionError on any failing cell
    code_cells = [c for c in nb.cells if c.cell_type == "code"]
    assert code_cells and all(c.get("execution_count") for c in code_cells)
    assert any(c.outputs for c in code_cells)
    for cell in code_cells:
        for out in cell.outputs:
            assert out.output_type != "error", f"{page}: {out.get('ename')}: {out.get('evalue')}"
