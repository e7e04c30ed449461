"""Every executable page, exported as a notebook, runs top to bottom in a fresh kernel.

This is what a reader does with a downloaded page: no Sphinx, no MyST-NB
machinery, just the notebook and the installed package.
"""

import jupytext
import nbformat
import pytest
from nbclient import NotebookClient

from test_book import is_executable, source, toc_files

PAGES = [p for p in toc_files() if is_executable(p)]


@pytest.mark.parametrize("page", PAGES)
def test_page_runs_as_a_notebook(page, tmp_path):
    nb = jupytext.read(source(page))
    assert nb.metadata["kernelspec"]["name"] == "python3"
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
    nbformat.validate(nb)
