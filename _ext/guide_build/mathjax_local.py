"""MathJax from the site itself, not from a CDN.

Sphinx's pages load MathJax 3 from ``cdn.jsdelivr.net`` by default, so a
reader offline (an air-gapped cluster, a copy of the site on a laptop) sees
raw ``\\( ... \\)``. This copies MathJax 3.2.2's browser files from the
``django-static-mathjax`` wheel (requirements) into ``_static/mathjax/`` and
points ``mathjax_path`` there: the TeX and MathML component Sphinx uses, its
lazily loaded TeX extensions, the CommonHTML fonts and the menu. A build
without the wheel fails with what to install, never with a page that looks
right online only.
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

from sphinx.errors import ExtensionError

COMPONENT = "tex-mml-chtml.js"
"""The component Sphinx's default ``mathjax_path`` names."""

COPIED = (COMPONENT, "input", "output/chtml", "ui", "a11y", "adaptors")
"""What of MathJax's ``es5`` folder the pages need (not the SVG output or the
speech rule engine, which no page asks for)."""

TARGET = "mathjax"
"""The folder under ``_static`` the files go to."""


def source() -> Path:
    """MathJax's ``es5`` folder in the installed wheel."""
    spec = importlib.util.find_spec("mathjax")  # finds the files; imports nothing
    if spec is None or not spec.submodule_search_locations:
        raise ExtensionError(
            "MathJax's files are missing: install django-static-mathjax "
            "(requirements-tools.txt; make env installs it)"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "static" / "mathjax" / "es5"


def _on_config_inited(app, config) -> None:
    if not (source() / COMPONENT).is_file():
        raise ExtensionError(f"{source() / COMPONENT} is missing: reinstall django-static-mathjax")
    config.mathjax_path = f"{TARGET}/{COMPONENT}"


def _on_build_finished(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    root = source()
    dest = Path(app.outdir) / "_static" / TARGET
    for part in COPIED:
        if (root / part).is_dir():
            shutil.copytree(root / part, dest / part, dirs_exist_ok=True)
        else:
            dest.mkdir(parents=True, exist_ok=True)
            shutil.copy2(root / part, dest / part)


def setup(app) -> None:
    app.connect("config-inited", _on_config_inited)
    app.connect("build-finished", _on_build_finished)
