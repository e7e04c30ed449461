"""Execution inputs: re-execute a page when what it imports changes.

MyST-NB's execution cache is keyed by a page's code cells, so on its own it
does not notice that a page's output depends on the ``rocm_dl_guide`` modules
it imports or on the pinned requirements. For every executable page this
computes a fingerprint of those inputs (the modules the page imports, followed
through the package's own imports and subpackages by :mod:`guide_build.imports`,
the package's data files, ``requirements.txt`` and ``pyproject.toml``, and
the run's profile and data source) and stores it as metadata of the page's
first code cell, which the cache hashes.
Editing a module thus re-executes exactly the pages that import it, directly or
not; an unchanged rebuild executes nothing. The same fingerprint marks the page
outdated for Sphinx, which otherwise re-reads only pages whose own file changed.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from pathlib import Path

from sphinx.util import logging

from . import envdata
from .imports import CELL_RE, PACKAGE, dependencies, is_executable

META_KEY = "guide-inputs"
"""The code-cell option (cell metadata key) that carries a page's fingerprint."""
ATTR = "guide_inputs"
"""``env.guide_inputs``: docname -> the fingerprint its last reading injected."""

logger = logging.getLogger(__name__)


def _data_files(package_dir: Path) -> list[Path]:
    return sorted(
        p
        for p in package_dir.rglob("*")
        if p.is_file() and p.suffix not in (".py", ".pyc") and "__pycache__" not in p.parts
    )


RUN_SETTINGS = ("ROCM_DL_GUIDE_PROFILE", "ROCM_DL_GUIDE_DATA_SOURCE")
"""The environment variables that choose what a page computes (sizes, real data
or fixtures): a build under other values executes the pages again instead of
reusing outputs computed for other settings."""


def fingerprint(
    text: str, root: Path, package_dir: Path, environ: Mapping[str, str] | None = None
) -> str:
    """A short hash of everything outside the page that its outputs depend on:
    the code it imports, the package's data, the pins and :data:`RUN_SETTINGS`."""
    environ = os.environ if environ is None else environ
    digest = hashlib.sha256()
    for var in RUN_SETTINGS:
        digest.update(f"{var}={environ.get(var, '').strip()}\0".encode())
    files = dependencies(text, package_dir) + _data_files(package_dir)
    files += [p for p in (root / "requirements.txt", root / "pyproject.toml") if p.is_file()]
    for path in files:
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()[:16]


PAGE_KEY = "guide-page"
"""The code-cell option that names the page. Two pages with the same code (an
index page's provenance cell) would otherwise share one execution-cache
record, whose path is the last of them: the page-time report and the
provenance table would then miss the other one."""


def inject(text: str, value: str, page: str = "") -> str:
    """Add ``:guide-inputs: value`` (and ``:guide-page: page``) to the page's
    first code cell."""
    match = CELL_RE.search(text)
    if not match:
        return text
    options = f":{META_KEY}: {value}\n" + (f":{PAGE_KEY}: {page}\n" if page else "")
    return text[: match.end()] + options + text[match.end() :]


def _paths(app) -> tuple[Path, Path]:
    root = Path(app.confdir)
    return root, root / app.config.guide_package_dir


def _on_source_read(app, docname: str, source: list[str]) -> None:
    text = source[0]
    if not is_executable(text):
        return
    root, package_dir = _paths(app)
    value = fingerprint(text, root, package_dir)
    envdata.pages(app.env, ATTR)[docname] = value
    source[0] = inject(text, value, docname)


def _on_get_outdated(app, env, added, changed, removed) -> list[str]:
    """Executable pages whose inputs changed although their own file did not."""
    recorded = envdata.pages(env, ATTR)
    root, package_dir = _paths(app)
    stale = []
    for docname in sorted(env.found_docs - set(added) - set(changed)):
        path = Path(env.doc2path(docname))
        if not path.is_file():
            continue
        text = path.read_text(encoding="utf-8")
        if is_executable(text) and recorded.get(docname) != fingerprint(text, root, package_dir):
            stale.append(docname)
    if stale:
        logger.info(f"[guide] inputs changed, re-executing: {', '.join(stale)}")
    return stale


def setup(app) -> None:
    app.add_config_value("guide_package_dir", f"code/{PACKAGE}", "env")
    envdata.keep_per_page(app, ATTR)
    app.connect("env-get-outdated", _on_get_outdated)
    app.connect("source-read", _on_source_read)
