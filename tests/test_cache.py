"""The execution cache notices what a page depends on (_ext/guide_build.py).

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
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import ROOT, build_book

sys.path.insert(0, str(ROOT / "_ext"))
import guide_build  # noqa: E402

PACKAGE_DIR = ROOT / "code" / "rocm_dl_guide"


def names(paths) -> set[str]:
    return {p.stem for p in paths}


def test_page_dependencies_follow_the_package_imports():
    page = "```{code-cell} ipython3\nfrom rocm_dl_guide import cifar10\n```\n"
    deps = names(guide_build.dependencies(page, PACKAGE_DIR))
    # cifar10 imports datasets and profiles at the top, train and device inside
    # functions; datasets imports fixtures; train imports progress and plots.
    assert {"__init__", "cifar10", "datasets", "profiles", "train", "device", "fixtures"} <= deps
    assert "keras_train" not in deps and "doctor" not in deps and "imdb" not in deps


def test_page_module_forms():
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
    assert guide_build.page_modules(text) == {
        "__init__",
        "provenance",
        "tables",
        "train",
        "compat",
        "plots",
        "mnist",
    }


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
    page = "```{code-cell} ipython3\nfrom rocm_dl_guide import compat\n```\n"
    before = guide_build.fingerprint(page, tree, pkg)
    assert before == guide_build.fingerprint(page, tree, pkg)  # stable
    with (pkg / "imdb.py").open("a") as fh:  # a module the page does not use
        fh.write("\n# unrelated edit\n")
    assert guide_build.fingerprint(page, tree, pkg) == before
    with (pkg / "compat.py").open("a") as fh:
        fh.write("\n# edit\n")
    changed = guide_build.fingerprint(page, tree, pkg)
    assert changed != before
    with (tree / "requirements.txt").open("a") as fh:
        fh.write("extra-package==1.0\n")
    assert guide_build.fingerprint(page, tree, pkg) != changed


def test_inject_marks_the_first_code_cell_only():
    cell = "```{code-cell} ipython3\n"
    text = f"# T\n\n{cell}:tags: [x]\nprint(1)\n```\n\n{cell}print(2)\n```\n"
    out = guide_build.inject(text, "abc123")
    assert out.count(":guide-inputs: abc123") == 1
    assert out.index(":guide-inputs:") < out.index("print(1)")
    assert guide_build.inject("no cells here", "x") == "no cells here"


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
        from rocm_dl_guide import {module}

        Markdown("**Provenance.** Outputs on this page were produced with the `smoke` "
                 "profile on CPU (test); Python 3; executed 2026-01-01 00:00 UTC.")
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
