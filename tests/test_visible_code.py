"""A reader can copy every example (issue 56): the code a page shows runs as shown.

Static and cheap, so ``make check`` runs it:

- each page's visible code cells (all but those tagged ``remove-input`` or
  ``remove-cell``), taken alone and in order, use no name that they do not
  define or import themselves (ruff's undefined-name rule, F821, over them as
  one notebook: it reads IPython's magics as IPython does);
- each static ```` ```python ```` snippet stands alone the same way;
- a listing of the package's source (``literalinclude`` with ``:pyobject:``)
  calls no private helper (function or class ``_name``) of its module that
  the page does not list too.

``tests/test_notebooks.py`` runs a few pages from their visible cells alone
in a fresh kernel.
"""

from __future__ import annotations

import ast
import json
import re
import subprocess
from pathlib import Path

import nbformat

from conftest import is_executable, source, toc_files, tool

HIDDEN = {"remove-input", "remove-cell"}
PAGES = toc_files()
SNIPPET = re.compile(r"^```(?:python|python3|py)\n(.*?)^```", re.S | re.M)
LISTING = re.compile(r"^```\{literalinclude\} ([^\n]+)\n((?::[^\n]*\n)*)", re.M)


def visible_cells(text: str) -> list[str]:
    """The sources of a MyST page's code cells that the rendered page shows, in order."""
    from myst_nb.core.read import read_myst_markdown_notebook

    nb = read_myst_markdown_notebook(text)
    return [
        c.source
        for c in nb.cells
        if c.cell_type == "code" and not HIDDEN & set(c.metadata.get("tags", []))
    ]


def undefined_names(sources: dict[str, list[str]], folder: Path) -> list[str]:
    """ruff's F821 findings for each named list of cell sources, run as one notebook each."""
    for name, cells in sources.items():
        nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
        nb.metadata["kernelspec"] = {
            "name": "python3",
            "display_name": "Python 3",
            "language": "python",
        }
        nbformat.write(nb, folder / f"{name}.ipynb")
    proc = subprocess.run(
        [tool("ruff"), "check", "--no-cache", "--isolated", "--select", "F821",
         "--output-format", "json", str(folder)],
        capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr
    return [
        f"{Path(f['filename']).stem} cell {f.get('cell')}: {f['message']}"
        for f in json.loads(proc.stdout or "[]")
    ]


def unshown_helpers(page: Path, text: str) -> list[str]:
    """Private module-level functions and classes (``_x``) that a listed object
    uses and the page does not list (the listed helpers are checked too)."""
    listed: dict[Path, set[str]] = {}
    for m in LISTING.finditer(text):
        options = dict(re.findall(r":(\w+):[ ]?([^\n]*)", m.group(2)))
        if "pyobject" in options:
            path = (page.parent / m.group(1).strip()).resolve()
            listed.setdefault(path, set()).add(options["pyobject"].strip())
    missing = []
    for path, objects in listed.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        # helpers are functions and classes; a private constant is a value, named
        top = {
            node.name: node
            for node in tree.body
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        }
        for obj in sorted(objects):
            node = top.get(obj.split(".")[0])
            if node is None:
                missing.append(f"{path.name}: no {obj} to list")
                continue
            used = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
            for name in sorted(used):
                if name.startswith("_") and name in top and name not in objects:
                    missing.append(f"{path.name}:{obj} uses {name}, which the page does not list")
    return missing


def test_visible_cells_of_every_page_use_only_names_they_define(tmp_path):
    pages = {
        page.replace("/", "__"): visible_cells(source(page).read_text(encoding="utf-8"))
        for page in PAGES
        if is_executable(page)
    }
    pages = {page: cells for page, cells in pages.items() if cells}  # not only a hidden note
    assert len(pages) > 30, sorted(pages)
    found = undefined_names(pages, tmp_path)
    assert not found, "visible code uses names it never defines:\n" + "\n".join(found)


def test_every_static_python_snippet_stands_alone(tmp_path):
    snippets = {}
    for page in PAGES:
        for i, code in enumerate(SNIPPET.findall(source(page).read_text(encoding="utf-8"))):
            snippets[f"{page.replace('/', '__')}__{i}"] = [code]
    assert snippets, "the pages show static snippets (MIGraphX, TRL)"
    found = undefined_names(snippets, tmp_path)
    assert not found, "a snippet uses names it never defines:\n" + "\n".join(found)


def test_every_listing_shows_the_private_helpers_it_calls():
    found = []
    for page in PAGES:
        path = source(page)
        found += [f"{page}: {m}" for m in unshown_helpers(path, path.read_text(encoding="utf-8"))]
    assert not found, "\n".join(found)


def test_the_checks_find_what_they_look_for(tmp_path):
    """The three checks flag a page that breaks each rule (they can fail)."""
    module = tmp_path / "code" / "mod.py"
    module.parent.mkdir()
    module.write_text(
        "def _helper(x):\n    return x\n\n\ndef shown(x):\n    return _helper(x) + 1\n"
    )
    page = tmp_path / "book" / "kernels" / "made-up.md"
    text = (
        "```{code-cell} ipython3\n:tags: [remove-cell]\nhidden = 1\n```\n\n"
        "```{code-cell} ipython3\nimport math\nx = math.pi\n%time math.cos(x)\n"
        "print(x, hidden)\n```\n\n"
        "```python\nprogram.run(image)\n```\n\n"
        "```{literalinclude} ../../code/mod.py\n:language: python\n:pyobject: shown\n```\n"
    )
    assert visible_cells(text) == ["import math\nx = math.pi\n%time math.cos(x)\nprint(x, hidden)"]
    (tmp_path / "cells").mkdir()
    (tmp_path / "snippet").mkdir()
    cells = undefined_names({"page": visible_cells(text)}, tmp_path / "cells")
    assert len(cells) == 1 and "`hidden`" in cells[0], cells  # the magic read as IPython does
    snippet = undefined_names({"snippet": SNIPPET.findall(text)}, tmp_path / "snippet")
    assert {m.split(": ", 1)[1] for m in snippet} >= {
        "Undefined name `program`",
        "Undefined name `image`",
    }
    assert unshown_helpers(page, text) == [
        "mod.py:shown uses _helper, which the page does not list"
    ]
    listing = "```{literalinclude} ../../code/mod.py\n:pyobject: _helper\n```"
    assert not unshown_helpers(page, text + "\n" + listing + "\n")
