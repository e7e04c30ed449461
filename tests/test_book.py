"""Builds the whole book, as `make book` does, and checks what a reader gets.

- the build succeeds with warnings treated as errors (``-W``), and any cell
  error fails it (``nb_execution_raise_on_error``);
- every page listed in ``_toc.yml`` rendered;
- every executable page (a MyST notebook with code cells) shows outputs,
  including its provenance note;
- no page contains an error output or a traceback.
"""

import re
import subprocess
import time
from html.parser import HTMLParser
from pathlib import Path

import pytest
import yaml

from conftest import ROOT, tool

HTML = ROOT / "_build" / "html"
pytestmark = pytest.mark.book


def toc_files() -> list[str]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [toc["root"]]

    def walk(entries):
        for entry in entries or []:
            if "file" in entry:
                files.append(entry["file"])
            walk(entry.get("sections"))
            walk(entry.get("chapters"))

    for part in toc.get("parts", []):
        walk(part.get("chapters"))
    walk(toc.get("chapters"))
    return files


def source(page: str) -> Path:
    return ROOT / f"{page}.md"


def is_executable(page: str) -> bool:
    return "```{code-cell}" in source(page).read_text()


@pytest.fixture(scope="module")
def build():
    start = time.monotonic()
    proc = subprocess.run(
        [tool("jupyter-book"), "build", str(ROOT), "-W", "-n", "--keep-going"],
        capture_output=True,
        text=True,
        timeout=3600,
    )
    elapsed = time.monotonic() - start
    log = proc.stdout + proc.stderr
    print(f"book build: exit {proc.returncode} in {elapsed:.0f} s")
    return proc.returncode, log


class _Text(HTMLParser):
    """Collects the classes of output blocks and the visible text of a page."""

    def __init__(self):
        super().__init__()
        self.classes: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        cls = dict(attrs).get("class")
        if cls:
            self.classes.append(cls)

    def handle_data(self, data):
        self.text.append(data)


def parse(page: str) -> _Text:
    parser = _Text()
    parser.feed((HTML / f"{page}.html").read_text(encoding="utf-8"))
    return parser


def test_build_succeeds_without_warnings(build):
    code, log = build
    assert code == 0, f"jupyter-book build failed:\n{log[-6000:]}"
    # Sphinx's own warnings ("file: WARNING: message"), not the kernels' log lines.
    warnings = [line for line in log.splitlines() if re.search(r"(WARNING|ERROR):", line)]
    assert not warnings, "\n".join(warnings)
    assert "build succeeded" in log


def test_toc_lists_only_existing_pages():
    for page in toc_files():
        assert source(page).exists(), f"_toc.yml lists {page} but {page}.md does not exist"


@pytest.mark.parametrize("page", toc_files())
def test_page_rendered(build, page):
    html = HTML / f"{page}.html"
    assert html.exists(), f"{page} was not rendered"
    assert len(html.read_text(encoding="utf-8")) > 2000


@pytest.mark.parametrize("page", [p for p in toc_files() if is_executable(p)])
def test_executable_page_shows_outputs_and_no_errors(build, page):
    doc = parse(page)
    n_cells = source(page).read_text().count("```{code-cell}")
    outputs = [c for c in doc.classes if "cell_output" in c]
    assert outputs, f"{page}: no cell output rendered"
    # Every page opens with its provenance note, rendered from the executed cell.
    text = " ".join(doc.text)
    assert "Provenance." in text and "profile on" in text, f"{page}: no provenance note"
    assert n_cells >= 1
    errors = [c for c in doc.classes if "traceback" in c or "output error" in c]
    assert not errors, f"{page}: error outputs {errors}"
    for marker in ("Traceback (most recent call last)", "Error: ", "Exception: "):
        assert marker not in text, f"{page}: contains {marker!r}"


def test_no_page_contains_a_traceback(build):
    for page in toc_files():
        body = (HTML / f"{page}.html").read_text(encoding="utf-8")
        assert "Traceback (most recent call last)" not in body, page
        assert 'class="output traceback' not in body, page


def test_glued_numbers_are_filled_in(build):
    """Numbers in the prose come from executed cells: no unresolved glue keys."""
    for page in toc_files():
        if not is_executable(page):
            continue
        src = source(page).read_text()
        for key in re.findall(r"\{glue:text\}`([^`]+)`", src):
            body = (HTML / f"{page}.html").read_text(encoding="utf-8")
            assert f"glue:text}}`{key}`" not in body, f"{page}: glue {key} not resolved"


# Figures each page must show (at least this many images rendered from cell
# outputs): the plots the issues ask for.
FIGURES = {
    "book/frameworks/pytorch": 1,  # MNIST loss/accuracy curves
    "book/frameworks/tensorflow": 1,
    "book/training/inception-pretrained": 1,  # the photo
    "book/training/inception-tiny-imagenet": 2,  # sample crops, the loss plot
    "book/training/cifar10": 3,  # sample grid, curves, per-class accuracy
    # first image + colour bar, 25-image grid, curves, single predictions, batch
    "book/training/fashion-mnist": 7,
    "book/training/imdb": 1,  # loss and accuracy curves
}


class _Images(HTMLParser):
    """The ``src`` of every image inside a cell's output."""

    def __init__(self):
        super().__init__()
        self.depth = 0  # >0 while inside a cell_output element
        self.stack: list[bool] = []
        self.sources: list[str] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "img" and self.depth:
            self.sources.append(attrs.get("src", ""))
        if tag in ("div", "section"):
            opens = "cell_output" in (attrs.get("class") or "")
            self.stack.append(opens)
            self.depth += opens

    def handle_endtag(self, tag):
        if tag in ("div", "section") and self.stack:
            self.depth -= self.stack.pop()


@pytest.mark.parametrize("page", sorted(FIGURES))
def test_pages_show_their_figures(build, page):
    html = HTML / f"{page}.html"
    parser = _Images()
    parser.feed(html.read_text(encoding="utf-8"))
    assert len(parser.sources) >= FIGURES[page], f"{page}: images {parser.sources}"
    for src in parser.sources:
        if src.startswith("data:"):
            continue
        target = (html.parent / src).resolve()
        assert target.is_file() and target.stat().st_size > 1000, f"{page}: {src} missing"
