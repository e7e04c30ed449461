"""The code a page shows is the code that runs.

A page shows the package's code only by including it from the source, with the
``{literalinclude}`` directive and ``:pyobject:`` (or by printing
``inspect.getsource`` in an executed cell), never as a static copy that can
drift from what the build executed. So, for every page under ``book/``:

- no static Python block (a fenced block in Python, not a ``{code-cell}``)
  defines a function or class under a name the package defines, repeats a
  run of :data:`RUN` or more non-trivial lines of a package module (comments,
  blank lines, imports, short lines and lone brackets do not count), or, if
  shorter, consists mostly of lines of one module;
- every ``{literalinclude}`` names a file that exists, an included package
  module names its object with ``:pyobject:`` (line numbers drift), and every
  ``:pyobject:`` names a function, class or method that the file defines.

Static blocks remain for code that is not the package's: shell commands,
container recipes, the APIs of other libraries. A block that shows code the
package deliberately does not use (the original guide's listing, say) opens
with a comment containing :data:`EXEMPT`, which the reader sees too.

The checks are also run on deliberately bad pages, so that they are known to
fail when a page lists package code any other way.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import pytest
from markdown_it import MarkdownIt
from mdit_py_plugins.colon_fence import colon_fence_plugin

from conftest import ROOT

BOOK = ROOT / "book"
PACKAGE_DIR = ROOT / "code" / "rocm_dl_guide"
RUN = 3
"""Consecutive non-trivial lines shared with a package module that make a copy."""
EXEMPT = "not the package's code"
PYTHON = {"python", "python3", "py", "ipython", "ipython3", "pycon"}
CODE_DIRECTIVES = {"{code-block}", "{code}", "{sourcecode}"}


# --------------------------------------------------------------------------- pages


@dataclass
class Block:
    page: str
    line: int
    info: str
    content: str

    def where(self) -> str:
        return f"{self.page}:{self.line}"


def _parser() -> MarkdownIt:
    return MarkdownIt("commonmark").use(colon_fence_plugin)


def _directive_body(content: str) -> str:
    """A directive's content without its ``:option:`` lines (and YAML front block)."""
    lines = content.splitlines()
    if lines and lines[0].strip() == "---":
        end = next((i for i, s in enumerate(lines[1:], 1) if s.strip() == "---"), 0)
        lines = lines[end + 1 :]
    while lines and re.match(r"^:[\w-]+:", lines[0]):
        lines = lines[1:]
    return "\n".join(lines)


def blocks(text: str, page: str, offset: int = 0) -> list[Block]:
    """Every fenced block of a MyST page, also those nested in directives."""
    found = []
    for token in _parser().parse(text):
        if token.type not in ("fence", "colon_fence"):
            continue
        line = offset + (token.map[0] + 1 if token.map else 0)
        info = token.info.strip()
        found.append(Block(page, line, info, token.content))
        name = info.split()[0] if info else ""
        if name.startswith("{") and name not in ("{code-cell}", "{literalinclude}"):
            if name not in CODE_DIRECTIVES:  # an admonition, a dropdown ...: look inside
                found += blocks(_directive_body(token.content), page, line)
    return found


def is_static_python(block: Block) -> bool:
    words = block.info.split()
    if not words:
        return False
    if words[0].lower() in PYTHON:
        return True
    return words[0] in CODE_DIRECTIVES and len(words) > 1 and words[1].lower() in PYTHON


def pages() -> list[Path]:
    return sorted(BOOK.rglob("*.md"))


def _name(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


# --------------------------------------------------------------------------- package


def _strip_comment(line: str) -> str:
    """``line`` without a trailing ``# comment`` (a ``#`` inside quotes stays)."""
    quote = ""
    i = 0
    while i < len(line):
        ch = line[i]
        if quote:
            if ch == "\\":
                i += 1
            elif line.startswith(quote, i):
                i += len(quote) - 1
                quote = ""
        elif line.startswith(('"""', "'''"), i):
            quote = line[i : i + 3]
            i += 2
        elif ch in "\"'":
            quote = ch
        elif ch == "#":
            return line[:i]
        i += 1
    return line


_TRIVIAL = re.compile(r"^[\s()\[\]{},:;.]*$")


def significant_lines(code: str) -> list[str]:
    """The lines that make code a copy: comments dropped, whitespace and trailing
    commas normalised; blank lines, imports, lone brackets and short lines left out."""
    out = []
    for raw in code.splitlines():
        line = " ".join(_strip_comment(raw).split()).rstrip(",").rstrip()
        if len(line) < 12 or _TRIVIAL.match(line):
            continue
        if line.startswith(("import ", "from ")) and " import " in f" {line}":
            continue
        out.append(line)
    return out


def runs(lines: list[str], n: int = RUN) -> set[tuple[str, ...]]:
    return {tuple(lines[i : i + n]) for i in range(len(lines) - n + 1)}


def _defined(tree: ast.Module) -> set[str]:
    """Top-level functions and classes, and the methods of top-level classes."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        if isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    names.add(f"{node.name}.{item.name}")
    return names


@dataclass
class Package:
    names: dict[str, str]
    """Function and class name -> the module that defines it (its path in the package)."""
    runs: dict[tuple[str, ...], str]
    """Every run of RUN significant lines -> a module that has it."""
    lines: dict[str, set[str]]
    """Module -> its significant lines."""


def read_package(package_dir: Path = PACKAGE_DIR) -> Package:
    names: dict[str, str] = {}
    shared: dict[tuple[str, ...], str] = {}
    lines: dict[str, set[str]] = {}
    for path in sorted(package_dir.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        where = path.relative_to(package_dir).as_posix()
        text = path.read_text(encoding="utf-8")
        for name in _defined(ast.parse(text)):
            if "." not in name:
                names.setdefault(name, where)
        significant = significant_lines(text)
        lines[where] = set(significant)
        for run in runs(significant):
            shared.setdefault(run, where)
    return Package(names, shared, lines)


@cache
def package() -> Package:
    return read_package()


# --------------------------------------------------------------------------- checks


def listing_problems(block: Block, pkg: Package) -> list[str]:
    """Why a static Python block is a copy of package code ([] if it is not)."""
    first = next((s.strip() for s in block.content.splitlines() if s.strip()), "")
    if first.startswith("#") and EXEMPT in first:
        return []
    problems = []
    try:
        tree = ast.parse(block.content)
    except SyntaxError:
        tree = None  # a fragment: only the line check applies
    if tree is not None:
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                if node.name in pkg.names:
                    problems.append(
                        f"{block.where()}: a static listing defines {node.name!r}, which "
                        f"{pkg.names[node.name]} defines: include it with "
                        "{literalinclude} and :pyobject: instead"
                    )
    lines = significant_lines(block.content)
    for run in runs(lines):
        if run in pkg.runs:
            problems.append(
                f"{block.where()}: a static listing copies these lines of "
                f"{pkg.runs[run]}: {' | '.join(run)}"
            )
            return problems
    for module, known in pkg.lines.items():  # a short excerpt: most of its lines
        shared = [line for line in lines if line in known]
        if len(shared) >= 2 and 2 * len(shared) >= len(lines):
            problems.append(
                f"{block.where()}: a static listing is mostly lines of {module}: "
                + " | ".join(shared)
            )
            break
    return problems


def _options(content: str) -> dict[str, str]:
    opts = {}
    for line in content.splitlines():
        m = re.match(r"^:([\w-]+):\s*(.*)$", line)
        if not m:
            break
        opts[m[1]] = m[2].strip()
    return opts


def pyobjects(path: Path) -> set[str]:
    """What ``:pyobject:`` can name in ``path``: functions, classes and their
    methods, dotted as Sphinx names them (``Class.method``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()

    def walk(body, prefix: str) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                found.add(prefix + node.name)
                if isinstance(node, ast.ClassDef):
                    walk(node.body, f"{prefix}{node.name}.")

    walk(tree.body, "")
    return found


def include_problems(block: Block, page: Path) -> list[str]:
    """What is wrong with a ``{literalinclude}`` block ([] if nothing)."""
    arg = block.info.split(maxsplit=1)[1].strip() if len(block.info.split()) > 1 else ""
    if not arg:
        return [f"{block.where()}: literalinclude without a file"]
    target = (ROOT / arg.lstrip("/")) if arg.startswith("/") else (page.parent / arg)
    target = target.resolve()
    if not target.is_file():
        return [f"{block.where()}: literalinclude of {arg}, which does not exist"]
    opts = _options(block.content)
    obj = opts.get("pyobject")
    in_package = target.suffix == ".py" and target.is_relative_to(PACKAGE_DIR.resolve())
    if in_package and not obj:
        return [
            f"{block.where()}: {arg} is package code: name the object with :pyobject: "
            "(line numbers and markers drift when the module changes)"
        ]
    if in_package and ({"lines", "start-at", "start-after"} & opts.keys()):
        return [f"{block.where()}: {arg}: use :pyobject: alone, not line ranges"]
    if obj:
        if target.suffix != ".py":
            return [f"{block.where()}: :pyobject: {obj} in {arg}, which is not Python"]
        if obj not in pyobjects(target):
            return [f"{block.where()}: {arg} defines no {obj!r} for :pyobject:"]
        if in_package and any(part.startswith("_") for part in obj.split(".")):
            return [
                f"{block.where()}: :pyobject: {obj} is private: a page is a contract, "
                "so it shows only public names"
            ]
    return []


def text_problems(text: str, page: Path, name: str, pkg: Package | None = None) -> list[str]:
    """Every problem of the page ``text``, which lies at ``page`` (for its includes)."""
    pkg = pkg or package()
    problems = []
    for block in blocks(text, name):
        if block.info.startswith("{literalinclude}"):
            problems += include_problems(block, page)
        elif is_static_python(block):
            problems += listing_problems(block, pkg)
    return problems


def page_problems(page: Path) -> list[str]:
    return text_problems(page.read_text(encoding="utf-8"), page, _name(page))


# --------------------------------------------------------------------------- the book


def test_there_are_pages_and_package_code():
    assert len(pages()) >= 10
    assert {"Net", "transform", "preprocess", "transforms_for"} <= package().names.keys()


@pytest.mark.parametrize("page", pages(), ids=_name)
def test_page_shows_package_code_only_from_the_source(page):
    problems = page_problems(page)
    assert not problems, "\n".join(problems)


def visible_glue(text: str, name: str) -> list[str]:
    """``glue`` lines in the code cells a reader sees: they only feed numbers to
    the prose, so they belong in a ``remove-cell`` cell after the code (issue 44)."""
    found = []
    for block in blocks(text, name):
        if not block.info.startswith("{code-cell}"):
            continue
        tags = re.search(r"^:tags: \[(.*?)\]", block.content, flags=re.M)
        if tags and re.search(r"remove-cell|remove-input", tags.group(1)):
            continue
        for i, line in enumerate(block.content.splitlines()):
            if re.match(r"\s*(glue\(|from myst_nb import glue)", line):
                found.append(f"{block.page}:{block.line + 1 + i}: {line.strip()[:60]}")
    return found


@pytest.mark.parametrize("page", pages(), ids=_name)
def test_pages_show_no_glue(page):
    found = visible_glue(page.read_text(encoding="utf-8"), _name(page))
    assert not found, "glue in a visible cell (move it to a remove-cell cell):\n" + "\n".join(found)


def test_the_glue_check_catches_a_visible_glue():
    page = (
        "```{code-cell} ipython3\nx = 1\nglue('x', x, display=False)\n```\n\n"
        "```{code-cell} ipython3\n:tags: [remove-cell]\n\nglue('y', 2, display=False)\n```\n"
    )
    assert visible_glue(page, "p.md") == ["p.md:3: glue('x', x, display=False)"]


def test_package_listings_are_included_from_the_source():
    """The listings that used to be static copies are included, object by object."""
    included = {}
    for page in pages():
        for block in blocks(page.read_text(encoding="utf-8"), _name(page)):
            obj = _options(block.content).get("pyobject")
            if block.info.startswith("{literalinclude}") and obj:
                included.setdefault(_name(page), set()).add(obj)
    assert {"transform", "Net"} <= included.get("book/training/cifar10.md", set())
    assert "preprocess" in included.get("book/training/inception-pretrained.md", set())
    assert {"transforms_for", "finetune_model"} <= included.get(
        "book/training/inception-tiny-imagenet.md", set()
    )
    assert "export_onnx" in included.get("book/optimization/migraphx-python.md", set())


# --------------------------------------------------------------------------- the checks fail


BAD_PAGE = """\
# A page that copies package code

```{code-cell} ipython3
from rocm_dl_guide.casestudies import cifar10
```

```python
class Net(nn.Module):
    pass
```

```python
model = make_it()
x = self.pool(F.relu(self.conv1(x)))  # copied, with a comment of its own
x = self.pool(F.relu(self.conv2(x)))
x = torch.flatten(x, 1)
```

:::{note}
```{code-block} python
def preprocess(image):
    return image
```
:::

```python
# The original guide's listing, not the package's code: it fails (no fc1).
class Net(nn.Module):
    pass
```

```bash
python -m rocm_dl_guide doctor
```

```python
import torch
from torch import nn
print(torch.__version__)
```

```{literalinclude} ../../code/rocm_dl_guide/casestudies/cifar10.py
:pyobject: NoSuchNet
```

```{literalinclude} ../../code/rocm_dl_guide/casestudies/cifar10.py
:lines: 40-60
```

```{literalinclude} ../../code/rocm_dl_guide/no_such_module.py
:pyobject: Net
```

```{literalinclude} ../../code/rocm_dl_guide/casestudies/cifar10.py
:language: python
:pyobject: Net.forward
```

```python
model.fc = torch.nn.Linear(model.fc.in_features, num_classes)
model.aux_logits = False
model.AuxLogits = None
```
"""


def test_the_checks_catch_a_page_that_copies_package_code():
    # As if the page were book/training/copies.md (never written: its includes
    # resolve from there).
    problems = text_problems(BAD_PAGE, BOOK / "training" / "copies.md", "copies.md")
    text = "\n".join(problems)
    assert "copies.md:7: a static listing defines 'Net'" in text
    assert "copies.md:12: a static listing copies these lines of casestudies/cifar10.py" in text
    # nested in a note
    assert "defines 'preprocess', which casestudies/inception_pretrained.py defines" in text
    assert "copies.md:26" not in text  # the original guide's listing, labelled as such
    assert "copies.md:36" not in text  # imports and a print are nobody's copy
    assert "defines no 'NoSuchNet'" in text
    assert "copies.md:46: ../../code/rocm_dl_guide/casestudies/cifar10.py is package code" in text
    assert "no_such_module.py, which does not exist" in text
    assert "copies.md:59: a static listing is mostly lines of casestudies/inception.py" in text
    assert len(problems) == 7, text  # Net.forward (a method) is a valid :pyobject:


def test_the_checks_catch_a_page_that_includes_a_private_name():
    page = (
        "```{literalinclude} ../../code/rocm_dl_guide/training/train.py\n"
        ":pyobject: _epoch_line\n```\n\n"
        "```{literalinclude} ../../code/rocm_dl_guide/training/train.py\n"
        ":pyobject: train_step\n```\n"
    )
    problems = text_problems(page, BOOK / "training" / "private.md", "private.md")
    assert len(problems) == 1 and ":pyobject: _epoch_line is private" in problems[0]
