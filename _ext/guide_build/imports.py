"""Which ``rocm_dl_guide`` modules a page or a module imports: the import reader.

A module's name is its dotted name inside the package: ``train`` for
``train.py``, ``doctor.system`` for ``doctor/system.py``, ``doctor`` for
``doctor/__init__.py`` and ``__init__`` for the package's own ``__init__.py``.
The reader sees every import statement (also inside functions and under
``TYPE_CHECKING``), absolute (``rocm_dl_guide.doctor.system``) and relative
(``from . import x``, ``from .system import y``, ``from .. import profiles``,
resolved against the importing module's package). ``from P import n`` names
the module ``P.n`` when that is a module of the package, else ``P`` itself (a
name that ``P``'s module or ``__init__`` defines). Importing ``a.b.c`` also runs
``a/__init__.py`` and ``a/b/__init__.py``: :func:`dependencies` follows those
too. The book's execution cache (:mod:`guide_build.inputs`) and the package's
architecture test (``tests/test_architecture.py``) both read imports here.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from pathlib import Path

PACKAGE = "rocm_dl_guide"
ROOT_MODULE = "__init__"
"""The name of the package's own ``__init__.py``."""
CELL_RE = re.compile(r"^```\{code-cell\}[^\n]*\n", re.M)
CELL_BODY_RE = re.compile(r"^```\{code-cell\}[^\n]*\n(.*?)^```", re.M | re.S)

Parts = tuple[str, ...]


def _name(parts: Parts) -> str:
    return ".".join(parts) or ROOT_MODULE


def _parts(name: str) -> Parts:
    return () if name == ROOT_MODULE else tuple(name.split("."))


def child(package: str, name: str) -> str:
    """The dotted name of ``name`` inside ``package``: ``child("doctor", "system")``
    is ``doctor.system``, ``child("__init__", "train")`` is ``train``."""
    return _name(_parts(package) + (name,))


def is_executable(text: str) -> bool:
    """Whether a page has code cells (MyST-NB executes it)."""
    return bool(CELL_RE.search(text))


def module_file(package_dir: Path, name: str) -> Path | None:
    """The source file of module ``name`` (a dotted name), ``None`` if there is none.

    A package's ``__init__.py`` comes before a module file of the same name, as
    in Python's own import system."""
    base = package_dir.joinpath(*_parts(name))
    for candidate in (base / "__init__.py", base.with_name(base.name + ".py")):
        if candidate.is_file():
            return candidate
    return None


def module_name(path: Path, package_dir: Path) -> str:
    """The dotted name of the module in ``path`` (``doctor.system``, ``doctor``, ``__init__``)."""
    parts = path.relative_to(package_dir).with_suffix("").parts
    return _name(parts[:-1] if parts[-1] == "__init__" else parts)


def package_name(path: Path, package_dir: Path) -> str:
    """The package that relative imports in ``path`` start from (``from . import x``):
    its own name for an ``__init__.py``, else the name of the folder it is in."""
    name = module_name(path, package_dir)
    if path.name == "__init__.py":
        return name
    return _name(_parts(name)[:-1])


def ancestors(name: str) -> list[str]:
    """The packages that importing ``name`` initialises first, outermost first:
    ``doctor.system`` -> ``["__init__", "doctor"]``; ``__init__`` -> ``[]``."""
    parts = _parts(name)
    return [_name(parts[:i]) for i in range(len(parts))]


def from_module(node: ast.ImportFrom, package: str | None) -> str | None:
    """The package module that ``from X import ...`` takes its names from, ``X``
    resolved (``None``: a module outside the package, or a relative import
    where there is no ``package`` to resolve it against, as in a page)."""
    if node.level == 0:
        parts = (node.module or "").split(".")
        return _name(tuple(parts[1:])) if parts[0] == PACKAGE else None
    if package is None:
        return None
    base = _parts(package)
    up = node.level - 1
    if up > len(base):  # beyond the top of the package: an ImportError in Python
        return None
    base = base[: len(base) - up]
    return _name(base + tuple(node.module.split("."))) if node.module else _name(base)


def imports_of(tree: ast.AST, package: str | None, is_module: Callable[[str], bool]) -> set[str]:
    """The package modules that the import statements in ``tree`` (anywhere in
    it) name, as dotted names. ``package``: where relative imports start from
    (``None`` ignores them); ``is_module(name)``: whether the package has a
    module ``name``, which tells ``from P import n`` (module ``P.n``) from
    ``from P import function`` (module ``P``)."""
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            source = from_module(node, package)
            if source is None:
                continue
            for alias in node.names:
                sub = child(source, alias.name)
                found.add(sub if alias.name != "*" and is_module(sub) else source)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == PACKAGE:
                    found.add(_name(tuple(parts[1:])))
    return found


def _is_module_in(package_dir: Path) -> Callable[[str], bool]:
    return lambda name: module_file(package_dir, name) is not None


def module_imports(path: Path, package_dir: Path) -> set[str]:
    """The package modules that the module in ``path`` (a file inside
    ``package_dir``) imports anywhere, also inside functions; relative imports
    resolved. Its own ``__init__`` packages are not added (see :func:`ancestors`)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return imports_of(tree, package_name(path, package_dir), _is_module_in(package_dir))


def code_cells(text: str) -> list[str]:
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


def page_modules(text: str, package_dir: Path) -> set[str]:
    """The package modules a page's code cells import (``__init__`` always)."""
    found = {ROOT_MODULE}
    is_module = _is_module_in(package_dir)
    cells = code_cells(text) if is_executable(text) else [text]
    for code in cells:
        try:
            found |= imports_of(ast.parse(code), None, is_module)
        except SyntaxError:  # not Python: fall back to the import lines alone
            for line in code.splitlines():
                try:
                    found |= imports_of(ast.parse(line.strip()), None, is_module)
                except SyntaxError:
                    continue
    return found


def dependencies(text: str, package_dir: Path) -> list[Path]:
    """Every package source file a page depends on: the modules it imports,
    the packages' ``__init__.py`` files that importing them runs, and so on
    through what each of those imports (absolute or relative)."""
    todo = sorted(page_modules(text, package_dir), reverse=True)
    seen: dict[str, Path | None] = {}
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen[name] = path = module_file(package_dir, name)
        todo.extend(a for a in ancestors(name) if a not in seen)
        if path is not None:  # else: not a module of the package
            todo.extend(sorted(module_imports(path, package_dir) - set(seen)))
    return sorted(p for p in seen.values() if p is not None)
