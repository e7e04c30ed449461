"""Builds the whole book, as `make book` does, and checks what a reader gets.

- the build succeeds with warnings treated as errors (``-W``), and any cell
  error fails it (``nb_execution_raise_on_error``);
- every page listed in ``_toc.yml`` rendered;
- every executable page (a MyST notebook with code cells) shows outputs,
  including its provenance note;
- no page contains an error output or a traceback.
"""

import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from conftest import (  # noqa: F401
    HTML,
    ROOT,
    is_executable,
    page_failures,
    source,
    toc_files,
    toc_parents,
    tool,
)

pytestmark = pytest.mark.book


class _Text(HTMLParser):
    """Collects the classes of output blocks, the visible text of a page and,
    apart, the text of its cell outputs (what the executed code printed)."""

    def __init__(self):
        super().__init__()
        self.classes: list[str] = []
        self.text: list[str] = []
        self.output_text: list[str] = []
        self._divs = 0  # open <div>s
        self._output_at: int | None = None  # depth of the open cell_output <div>

    def handle_starttag(self, tag, attrs):
        cls = dict(attrs).get("class")
        if cls:
            self.classes.append(cls)
        if tag == "div":
            self._divs += 1
            if self._output_at is None and cls and "cell_output" in cls.split():
                self._output_at = self._divs

    def handle_endtag(self, tag):
        if tag == "div":
            if self._output_at == self._divs:
                self._output_at = None
            self._divs -= 1

    def handle_data(self, data):
        self.text.append(data)
        if self._output_at is not None:
            self.output_text.append(data)


def parse(page: str) -> _Text:
    parser = _Text()
    parser.feed((HTML / f"{page}.html").read_text(encoding="utf-8"))
    return parser


def test_build_succeeds_without_warnings(build):
    code, log = build.code, build.log
    failures = "\n".join(page_failures(log))  # a page's cell error, far above the tail
    assert code == 0, f"jupyter-book build failed:\n{failures}\n...\n{log[-6000:]}"
    # Sphinx's own warnings ("file:line: WARNING: message", "ERROR: message"), not
    # the kernels' Python logging lines ("ERROR:tornado.general:..." when a kernel's
    # ZMQ stream closes at shutdown); a cell error fails the build on its own.
    warnings = [line for line in log.splitlines() if re.search(r"\b(WARNING|ERROR): ", line)]
    assert not warnings, "\n".join(warnings)
    assert "build succeeded" in log


def test_toc_lists_only_existing_pages():
    for page in toc_files():
        assert source(page).exists(), f"_toc.yml lists {page} but {page}.md does not exist"


class _Headings(HTMLParser):
    """The text of the page's ``<h1>`` elements and all its text, whitespace collapsed."""

    def __init__(self):
        super().__init__()
        self.h1: list[str] = []
        self.all: list[str] = []
        self.in_h1 = 0

    def handle_starttag(self, tag, attrs):
        self.in_h1 += tag == "h1"

    def handle_endtag(self, tag):
        self.in_h1 -= tag == "h1" and self.in_h1 > 0

    def handle_data(self, data):
        self.all.append(data)
        if self.in_h1:
            self.h1.append(data)


def _plain(pieces: list[str]) -> str:
    text = " ".join("".join(pieces).split())
    for curly, straight in (("\u2018", "'"), ("\u2019", "'"), ("\u201c", '"'), ("\u201d", '"')):
        text = text.replace(curly, straight)  # Sphinx's smart quotes
    return text


def source_headings(page: str) -> list[str]:
    """The ``#`` and ``##`` headings of a page's source, outside front matter and code,
    without Markdown's backticks and emphasis."""
    text = source(page).read_text()
    text = re.sub(r"\A---\n.*?\n---\n", "", text, count=1, flags=re.S)
    text = re.sub(r"^(```|~~~).*?^\1\s*$", "", text, flags=re.S | re.M)
    return [re.sub(r"[`*]", "", h).strip() for h in re.findall(r"^#{1,2} (.+)$", text, re.M)]


@pytest.mark.parametrize("page", toc_files())
def test_page_rendered(build, page):
    html = HTML / f"{page}.html"
    assert html.exists(), f"{page} was not rendered"
    parser = _Headings()
    parser.feed(html.read_text(encoding="utf-8"))
    headings = source_headings(page)
    assert headings, f"{page}.md has no heading"
    # The page's title is its <h1>, and every section heading of the source is on the page.
    assert headings[0] in _plain(parser.h1), f"{page}: <h1> is {_plain(parser.h1)!r}"
    text = _plain(parser.all)
    missing = [h for h in headings if h not in text]
    assert not missing, f"{page}: headings not rendered: {missing}"


MATH_PAGES = (
    "book/language-models/lora",
    "book/language-models/dpo",
    "book/language-models/grpo",
    "book/language-models/attention",
    "book/language-models/generation",
    "book/language-models/speculative",
    "book/language-models/quantization",
    "book/kernels/softmax",
    "book/kernels/matmul",
    "book/kernels/pytorch",
)
"""Pages that write math (``$...$``, ``$$...$$``); each must load MathJax."""


def toc_ancestors(page: str) -> set[str]:
    """The pages whose toctree holds ``page``, directly or further down: its
    chapter's page and the root."""
    parent = toc_parents()
    found = set()
    while parent.get(page):
        page = parent[page]
        found.add(page)
    return found


@pytest.mark.parametrize("page", toc_files())
def test_pages_with_math_load_mathjax(build, page):
    """Sphinx adds MathJax to the pages with math, and to the pages whose toctree
    holds one (``MathDomain.has_equations``); a page-context handler that replaced
    the builder's script list once dropped it from every page (issue 44). Whether
    it then renders is the browser test's."""
    html = (HTML / f"{page}.html").read_text(encoding="utf-8")
    has_math = 'class="math notranslate nohighlight"' in html
    assert has_math == (page in MATH_PAGES), f"{page}: math {has_math}"
    # From the site itself (guide_build.mathjax_local), so that math renders offline.
    loads = "_static/mathjax/tex-mml-chtml.js" in html
    assert "cdn.jsdelivr.net" not in html, f"{page}: loads a script from a CDN"
    holds_math = any(page in toc_ancestors(p) for p in MATH_PAGES)
    assert loads == (has_math or holds_math), f"{page}: math {has_math}, MathJax script {loads}"
    fonts = HTML / "_static" / "mathjax" / "output" / "chtml" / "fonts" / "woff-v2"
    assert (HTML / "_static" / "mathjax" / "tex-mml-chtml.js").is_file() and any(fonts.iterdir())


@pytest.mark.parametrize("page", [p for p in toc_files() if is_executable(p)])
def test_executable_page_shows_outputs_and_no_errors(build, page):
    doc = parse(page)
    n_cells = source(page).read_text().count("```{code-cell}")
    outputs = [c for c in doc.classes if "cell_output" in c]
    assert outputs, f"{page}: no cell output rendered"
    # Every page opens with its provenance note, rendered from the executed cell.
    text = " ".join(doc.text)
    assert "Provenance." in text and "profile on" in text, f"{page}: no provenance note"
    # Every code cell of the source is on the page, except those tagged remove-cell.
    tagged = r"```\{code-cell\}[^\n]*\n:tags: \[[^\]]*remove-cell"
    removed = len(re.findall(tagged, source(page).read_text()))
    cells = [c for c in doc.classes if c.split()[0] == "cell"]
    assert len(cells) == n_cells - removed, f"{page}: {len(cells)} of {n_cells} cells rendered"
    # A widget (tqdm.auto's bar in a kernel) needs JavaScript from a CDN to render.
    html = (HTML / f"{page}.html").read_text(encoding="utf-8")
    assert "application/vnd.jupyter.widget" not in html, f"{page}: a widget output"
    errors = [c for c in doc.classes if "traceback" in c or "output error" in c]
    assert not errors, f"{page}: error outputs {errors}"
    # A traceback has no place anywhere; "Error: " may be quoted in prose (the
    # troubleshooting page quotes the messages readers see) but not printed.
    assert "Traceback (most recent call last)" not in text, f"{page}: contains a traceback"
    printed = " ".join(doc.output_text)
    assert printed.strip(), f"{page}: no text in its cell outputs"
    for marker in ("Error: ", "Exception: "):
        assert marker not in printed, f"{page}: an output contains {marker!r}"
    # Paths print from ~ (files.shown): no home folder, no user name (issue 44).
    home = str(Path.home()) + "/"
    assert home not in printed, f"{page}: prints a path under {home}"
    # Nor a path of the machine that built it (issue 54): the clone, the
    # interpreter's folder. (The data and runs folders print from ~, as on the
    # public build; here they are the test session's stand-ins for them.)
    for where in machine_paths():
        assert where not in printed, f"{page}: prints the build machine's path {where}"
    # A variant that did not run is a row saying why, never a NaN cell (issue 54).
    nans = sorted({w for w in re.findall(r"[A-Za-z]+", printed) if w.lower() in ("nan", "nanx")})
    assert not nans, f"{page}: an output shows {nans}"


MACHINE_MARKERS = ("/tmp/", "/root/", "/home/", ".venv/", "site-packages/")
"""Parts of a path that name the machine or environment that built a page, not
the reader's (issue 56): the guide's own folders print from their variables
(``$ROCM_DL_GUIDE_RUNS/...``) or from ``~``."""
FLOAT_INTEGER = re.compile(r"-?[\d,]+\.0+")
LONG_DECIMALS = re.compile(r"\d+\.\d{6,}\b")


def too_precise(cell: str) -> bool:
    """A figure with six decimals or more and five significant digits or more:
    pandas' default ("0.688699", "18.000000"), not a small figure ("0.000102")."""
    for match in LONG_DECIMALS.finditer(cell):
        if len(match.group().replace(".", "").lstrip("0")) >= 5:
            return True
    return False


def output_tables(page: str) -> list[list[list[str]]]:
    """Each table in the page's cell outputs as rows of its data cells' text."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup((HTML / f"{page}.html").read_text(encoding="utf-8"), "html.parser")
    tables = []
    for out in soup.select("div.cell_output"):
        for table in out.select("table"):
            rows = [
                [td.get_text(" ", strip=True) for td in tr.select("td")]
                for tr in table.select("tr")
            ]
            tables.append([r for r in rows if r])
    return tables


@pytest.mark.parametrize("page", [p for p in toc_files() if is_executable(p)])
def test_outputs_name_no_machine_and_print_numbers_for_reading(build, page):
    """No output holds a path of the build's machine or environment, and a table's
    figures print for reading: no column of whole numbers printed as floats
    ("18.000000", "4192.0") and no six-decimal figure, pandas' default (issue 56).
    A record printed whole (JSON, a dict) keeps the precision of the file."""
    assert build.code == 0, "the book did not build"
    printed = " ".join(parse(page).output_text)
    for marker in MACHINE_MARKERS:
        assert marker not in printed, f"{page}: an output shows a machine path ({marker!r})"
    for table in output_tables(page):
        cells = [c for row in table for c in row]
        assert not any(too_precise(c) for c in cells), (
            f"{page}: a table prints a figure with six decimals or more (pandas' default)"
        )
        for column in zip(*(r for r in table if len(r) == len(table[0])), strict=True):
            figures = [c for c in column if re.fullmatch(r"-?[\d,]+(\.\d+)?", c)]
            floats = [c for c in figures if "." in c]
            # Three or more: two measured figures at one decimal can both end in .0
            # by chance (the generation page's 4.0 and 10.0 ms, 2026-11-28).
            assert not (len(floats) > 2 and all(FLOAT_INTEGER.fullmatch(c) for c in floats)), (
                f"{page}: whole numbers printed as floats: {floats[:4]}"
            )


def prose(page: str) -> str:
    """The reading text of a built page: no code, no cell outputs, whitespace collapsed."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup((HTML / f"{page}.html").read_text(encoding="utf-8"), "html.parser")
    main = soup.select_one("article") or soup
    for node in main.select("pre, code, div.cell_output, div.highlight, script, style"):
        node.decompose()
    return " ".join(main.get_text(" ").split())


def test_the_site_states_each_fact_once(build):
    """Claims that once disagreed between pages (issue 56) agree across the built site."""
    assert build.code == 0, "the book did not build"
    texts = {page: prose(page) for page in toc_files()}
    for page, text in texts.items():
        # "the guide" named two books; AMD's guide is the seed, this guide the book.
        assert not re.search(r"\bthe guide\b", text, re.IGNORECASE), (
            f"{page}: says 'the guide': {re.search(r'.{60}the guide.{60}', text, re.I)}"
        )
        # A command's options print as typed: "--record", never an en dash
        # (smartquotes_action "qe" in _config.yml keeps "--" as two hyphens).
        dashed = re.search(r"(?:^|\s)\u2013[a-z][\w-]*", text)
        assert not dashed, f"{page}: an option printed with an en dash: {dashed.group()!r}"
        # MIGraphX is part of ROCm in the legacy stream only; the Core SDK ships it apart.
        for sentence in re.findall(r"[^.]*MIGraphX is part of ROCm[^.]*\.", text):
            assert "legacy" in sentence, f"{page}: {sentence}"
    home = texts["book/index"]
    assert "public build, on" not in home, "the home page claims a data source"
    summary = re.search(r"This build: [^.]*\.", home)
    assert summary, "the home page's data-source sentence is built from this build"
    rows = json.loads((HTML / "_static" / "provenance.json").read_text(encoding="utf-8"))
    assert f"all {len(rows)} executed pages" in summary.group() or "of its" in summary.group()
    for words in ("on generated fixtures", "on real data"):
        assert (words in summary.group()) == any(
            words in " ".join(parse(row["docname"]).output_text) for row in rows
        ), f"the home page's summary and the pages' provenance notes disagree on {words!r}"


def machine_paths() -> list[str]:
    """Folders that name the machine that built the book, not the reader's."""
    import conftest

    return sorted({str(ROOT) + "/", str(conftest.BIN) + "/"})


def test_provenance_table_is_built_from_every_pages_record(build):
    """The home page's table comes from the record each provenance cell glues
    (not from the note's prose): one row per executed page, in reading order."""
    import json

    rows = json.loads((HTML / "_static" / "provenance.json").read_text(encoding="utf-8"))
    executable = [p for p in toc_files() if is_executable(p)]
    assert [row["docname"] for row in rows] == executable
    for row in rows:
        assert row["profile"] in ("smoke", "gpu", "full"), row
        assert row["device"].startswith(("CPU", "GPU")), row
        assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", row["executed"]), row
        assert row["seconds"] and row["this build"] in ("executed", "from cache"), row
    # "This build" agrees with the page-time report (both from the execution cache).
    times = json.loads((HTML.parent / "page-times.json").read_text(encoding="utf-8"))
    this_build = {r["page"]: r["this_build"] for r in times["pages"]}
    assert {r["docname"]: r["this build"] for r in rows} == this_build
    home = parse("book/index")
    assert any("guide-provenance" in c for c in home.classes)
    text = " ".join(home.text)
    assert all(row["device"] in text and row["executed"] in text for row in rows)


def test_gpu_stamp_on_the_home_page_and_the_pytorch_case_studies(build):
    """The stamp comes from the tracked verification record (or says there is
    none yet); the PyTorch case studies and the kernels pages show that run's
    figures for themselves."""
    from rocm_dl_guide.selfcheck import record

    pages = {
        "book/index": None,
        "book/frameworks/pytorch": "mnist-pytorch",
        "book/training/cifar10": "cifar10",
        "book/training/inception-tiny-imagenet": "inception-v3",
        "book/training/inception-pretrained": None,
        "book/kernels/softmax": "kernels:softmax",
        "book/kernels/matmul": "kernels:matmul",
        "book/training/fast-training": None,
    }
    for page, example in pages.items():
        body = (HTML / f"{page}.html").read_text(encoding="utf-8")
        assert "guide-gpu-stamp" in body, page
        expected = re.sub(r"[*`]", "", record.stamp(example))
        text = re.sub(r"\s+", " ", " ".join(parse(page).text))
        assert expected.split(":")[0] in text, page  # "Last verified on a GPU"
        if record.latest_record() is None:
            assert "not yet" in text, page
        else:
            assert record.latest_record()["date"] in text, page
            figures = record.latest_record()["figures"].get(example or "")
            if figures:  # the run's figures for the page, as the record gives them
                assert expected.rstrip(".").split(f"{example}: ")[-1] in text, page


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
    "book/training/inception-tiny-imagenet": 3,  # sample crops, the loss plot, speed by batch
    "book/training/fast-training": 1,  # CIFAR-10's speed and busy fraction by batch
    "book/training/cifar10": 3,  # sample grid, curves, per-class accuracy
    # first image + colour bar, 25-image grid, curves, single predictions, batch
    "book/training/fashion-mnist": 7,
    "book/training/imdb": 1,  # loss and accuracy curves
    "book/distributed/tensorflow": 1,  # multi-worker and one-worker training curves
    "book/optimization/benchmark": 1,  # latency and throughput by batch size
    "book/optimization/precision": 1,  # speed against agreement
    "book/optimization/int8": 1,  # speed against agreement, int8
    "book/kernels/softmax": 1,  # bandwidth of the four versions
    "book/kernels/matmul": 1,  # TFLOP/s of the kernel and torch.matmul
}


class _Images(HTMLParser):
    """The ``src`` of every image inside a cell's output or a glued, numbered figure."""

    def __init__(self):
        super().__init__()
        self.depth = 0  # >0 while inside a cell_output element
        self.stack: list[bool] = []
        self.sources: list[str] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "img" and self.depth:
            self.sources.append(attrs.get("src", ""))
        if tag in ("div", "section", "figure"):
            opens = tag == "figure" or "cell_output" in (attrs.get("class") or "")
            self.stack.append(opens)
            self.depth += opens

    def handle_endtag(self, tag):
        if tag in ("div", "section", "figure") and self.stack:
            self.depth -= self.stack.pop()


LOSSES = re.compile(r"train loss ([\d.]+) acc ([\d.]+) \| val loss ([\d.]+) acc ([\d.]+)")


def _epoch_lines(page: str) -> list[tuple[float, ...]]:
    """The epochs a page prints as ``runs.losses_text`` does, in page order."""
    text = " ".join(" ".join(parse(page).text).split())
    return [tuple(map(float, m.groups())) for m in LOSSES.finditer(text)]


@pytest.mark.parametrize("page", ["book/distributed/fsdp", "book/distributed/multi-node"])
def test_pages_that_say_same_numbers_as_ddp_show_them(build, page):
    """The FSDP page says its epoch ends with the DDP page's losses, and the
    multi-node page says two agents give one agent's numbers: both list their
    own run's epoch beside the DDP page's (glued from it). Each figure the
    reader compares agrees to its last printed digit (one unit of rounding)."""
    lines = _epoch_lines(page)  # its run's log line, its bullet, then the DDP page's
    assert len(lines) >= 2, f"{page}: expected its run's epoch and the DDP page's, got {lines}"
    *own, ddp = lines
    for line in own:
        assert line == pytest.approx(ddp, abs=1.5e-4), f"{page}: {line} against DDP's {ddp}"


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


def test_unchanged_rebuild_executes_nothing_and_is_fast(build):
    """A second build with nothing changed takes every page from the cache.

    Both times are written to ``_build/build-timings.json``. The tenth-of-the-
    clean-build target is checked when the first build started without an
    execution cache (a clean checkout, as in CI). Counting executed pages would
    not tell: pages with the same code share one cache entry, so even a clean
    build executes fewer notebooks than there are pages.
    """
    import json

    from conftest import build_book

    assert build.code == 0
    again = build_book()
    assert again.code == 0, again.log[-4000:]
    assert again.executed == [], f"re-executed although nothing changed: {again.executed}"
    clean = build.clean
    (ROOT / "_build" / "build-timings.json").write_text(
        json.dumps(
            {
                "first_build_seconds": round(build.seconds, 1),
                "first_build_executed_pages": len(build.executed),
                "first_build_was_clean": clean,
                "unchanged_rebuild_seconds": round(again.seconds, 1),
                "first_build_page_times": build.page_times,
            },
            indent=1,
        )
    )
    print(
        f"first build {build.seconds:.0f} s ({len(build.executed)} pages executed), "
        f"unchanged rebuild {again.seconds:.0f} s"
    )
    assert again.seconds < 60
    if clean:
        assert again.seconds <= build.seconds / 10
