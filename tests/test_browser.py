"""The built site in a real browser: headless Chromium (Debian's package,
installed by ``make browser``) driven by Playwright.

For every page in the table of contents: it loads without console errors,
failed requests or uncaught exceptions; every image loads; executed pages
show their cell outputs; every page reads like a guide (test_page_reads_like_a_guide).
The search page finds a term. Screenshots of the home page, one case study and
the three longest pages are written to ``_build/screenshots/`` for review.
"""

from __future__ import annotations

import functools
import http.server
import shutil
import threading
from pathlib import Path

import pytest

from conftest import HTML, ROOT, is_executable, toc_files
from test_book import FIGURES, MATH_PAGES, _Images

pytestmark = [pytest.mark.book, pytest.mark.browser]
SCREENSHOTS = ROOT / "_build" / "screenshots"
CASE_STUDY = "book/training/cifar10"


def chromium_path() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    pytest.fail("Chromium is not installed: run `make browser` (Debian: apt-get install chromium)")


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):  # keep the test output clean
        pass


@pytest.fixture(scope="module")
def site(build):
    """The built HTML served on a free port of the loopback interface."""
    assert build.code == 0, "the book did not build"
    handler = functools.partial(_Quiet, directory=str(HTML))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api")
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=chromium_path(), args=["--no-sandbox"])
        yield b
        b.close()


CDN = "https://cdn.jsdelivr.net/**"
"""Sphinx's default home of MathJax: the site serves its own copy
(``guide_build.mathjax_local``), so a request here is a page that breaks offline."""


class Visit:
    """A page opened in a fresh tab, with everything that went wrong while loading."""

    def __init__(self, browser, url: str):
        self.page = browser.new_page(viewport={"width": 1300, "height": 900})
        self.problems: list[str] = []

        def offline(route) -> None:  # the test runs offline, as an air-gapped reader does
            self.problems.append(f"requested from a CDN: {route.request.url}")
            route.abort()

        self.page.route(CDN, offline)
        self.page.on(
            "console",
            lambda m: (
                self.problems.append(f"console {m.type}: {m.text} {m.location}")
                if m.type == "error"
                else None
            ),
        )
        self.page.on("pageerror", lambda e: self.problems.append(f"uncaught: {e}"))
        self.page.on("requestfailed", lambda r: self.problems.append(f"failed: {r.url}"))
        self.page.on(
            "response",
            lambda r: (
                self.problems.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None
            ),
        )
        self.page.goto(url, wait_until="networkidle")

    def broken_images(self) -> list[str]:
        # Make lazy images load, then wait for every image to settle.
        self.page.evaluate(
            "() => document.querySelectorAll('img').forEach(i => i.loading = 'eager')"
        )
        self.page.wait_for_function(
            "() => Array.from(document.images).every(i => i.complete)", timeout=15000
        )
        return self.page.evaluate(
            "() => Array.from(document.images)"
            ".filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.src)"
        )

    def close(self):
        self.page.close()


@pytest.mark.parametrize("page", toc_files())
def test_page_loads_cleanly_in_chromium(site, browser, page):
    visit = Visit(browser, f"{site}/{page}.html")
    try:
        assert visit.page.title(), f"{page}: no title"
        assert not visit.problems, f"{page}:\n" + "\n".join(visit.problems)
        assert not visit.broken_images(), f"{page}: images that did not load"
        # Every image in the page's cell outputs and numbered figures is in the DOM and drawn.
        expected = _Images()
        expected.feed((HTML / f"{page}.html").read_text(encoding="utf-8"))
        drawn = visit.page.evaluate(
            "() => Array.from(document.querySelectorAll('.cell_output img, figure img'))"
            ".filter(i => i.complete && i.naturalWidth > 0).length"
        )
        assert drawn == len(expected.sources), f"{page}: {drawn} of {expected.sources} drawn"
        assert drawn >= FIGURES.get(page, 0), f"{page}: {drawn} figures"
        if is_executable(page):
            outputs = visit.page.locator("div.cell_output")
            assert outputs.count() >= 1, f"{page}: no cell outputs"
            visible = [outputs.nth(i).is_visible() for i in range(outputs.count())]
            assert sum(visible) >= 1, f"{page}: cell outputs are hidden"
            provenance = visit.page.get_by_text("Provenance.", exact=False).first
            assert provenance.is_visible(), f"{page}: provenance note not visible"
    finally:
        visit.close()


READER_JS = r"""() => {
  const col = document.querySelector('main article') || document.querySelector('main');
  const width = col.clientWidth;
  const outputs = Array.from(col.querySelectorAll('div.cell_output')).map(o => o.innerText);
  const unscrolled = [];
  for (const el of col.querySelectorAll('table, pre, .cell_output .output, img')) {
    if (el.getBoundingClientRect().width === 0 || el.scrollWidth <= width + 2) continue;
    let box = el, scrolls = null;
    while (box && box !== col) {
      const s = getComputedStyle(box);
      if (['auto', 'scroll'].includes(s.overflowX) && box.clientWidth <= width + 2) {
        scrolls = box; break;
      }
      box = box.parentElement;
    }
    const cue = scrolls && getComputedStyle(scrolls).backgroundImage.includes('gradient');
    if (!scrolls || (el.tagName === 'TABLE' && !cue)) {
      unscrolled.push(`${el.tagName}.${el.className} ${el.scrollWidth}px > ${width}px` +
                      (scrolls ? ' (scrolls without a cue)' : ''));
    }
  }
  const unfigured = Array.from(col.querySelectorAll('img'))
    .filter(i => !i.src.includes('logo_binder'))
    .filter(i => { const f = i.closest('figure');
                   return !(f && f.querySelector('figcaption .caption-number')); })
    .map(i => i.src.split('/').pop());
  const boldGlue = Array.from(col.querySelectorAll('span.pasted-text'))
    .filter(s => !s.closest('strong, b, h1, h2, h3, h4, th') &&
                 parseInt(getComputedStyle(s).fontWeight, 10) >= 600)
    .map(s => s.innerText.slice(0, 60));
  const tickedGlue = Array.from(col.querySelectorAll('span.pasted-text'))
    .filter(s => s.innerText.includes('`'))
    .map(s => s.innerText.slice(0, 60));
  const splitCells = Array.from(col.querySelectorAll('.cell_output td'))
    .filter(td => { const s = getComputedStyle(td);
                    return s.overflowWrap === 'anywhere' || s.wordBreak === 'break-all'; })
    .map(td => td.innerText.slice(0, 40));
  return {outputs, unscrolled, unfigured, boldGlue, tickedGlue, splitCells,
          text: col.innerText};
}"""
"""What a reader sees of a page: its cell outputs' text, the elements wider
than the content column that do not scroll inside it (or, for a table, scroll
with no shadow to say so), the images outside a numbered, captioned figure,
and the article's visible text."""

OUTPUT_NOISE = {
    "a log line": r"(?m)^\s*(\[?[WEIF]\d{4} \d\d:\d\d|(DEBUG|INFO|WARNING|ERROR)[:\s])",
    "a warning": r"\b\w*Warning: ",
    "a traceback": r"Traceback \(most recent call last\)",
    "NaN": r"\bNaN\b",
}
"""What no output block may hold (issue 44), besides a path in the home folder."""


@pytest.mark.parametrize("page", toc_files())
def test_page_reads_like_a_guide(site, browser, page):
    """A reader's view of every page: no raw TeX, no visible ``glue(...)`` call,
    no log line, warning, traceback, home path or NaN in an output, nothing
    wider than the column unless it scrolls inside it (a table with a shadow
    at the edge), every image in a numbered figure with a caption, glued
    text in the weight of the sentence around it and without Markdown's
    backticks, and table cells that wrap at spaces, never inside a command or
    a name (issue 56)."""
    import re

    visit = Visit(browser, f"{site}/{page}.html")
    try:
        seen = visit.page.evaluate(READER_JS)
        problems = []
        if page not in MATH_PAGES:  # the math pages are test_math_renders'
            problems += [f"raw TeX {d!r}" for d in ("\\(", "\\[", "$$") if d in seen["text"]]
        if "glue(" in seen["text"]:
            problems.append("a glue(...) call is visible")
        home = str(Path.home()) + "/"
        for i, text in enumerate(seen["outputs"]):
            for what, pattern in OUTPUT_NOISE.items():
                if found := re.search(pattern, text):
                    problems.append(f"output {i + 1} holds {what}: {found.group(0)!r}")
            if home in text:
                problems.append(f"output {i + 1} holds a path in {home}")
        problems += [f"wider than the column: {w}" for w in seen["unscrolled"]]
        problems += [f"not a numbered figure: {img}" for img in seen["unfigured"]]
        problems += [f"glued text set in bold: {t!r}" for t in seen["boldGlue"]]
        problems += [f"Markdown backticks in glued text: {t!r}" for t in seen["tickedGlue"]]
        problems += [f"a table cell breaks inside words: {t!r}" for t in seen["splitCells"][:3]]
        assert not problems, f"{page}:\n" + "\n".join(problems)
    finally:
        visit.close()


@pytest.mark.parametrize("page", MATH_PAGES)
def test_math_renders(site, browser, page):
    """Every math element of the page is typeset by MathJax, and no raw TeX
    delimiter is left in the text a reader sees."""
    visit = Visit(browser, f"{site}/{page}.html")
    try:
        visit.page.wait_for_function(
            "() => window.MathJax && MathJax.startup && MathJax.startup.promise", timeout=20000
        )
        visit.page.evaluate("() => MathJax.startup.promise")
        counts = visit.page.evaluate(
            "() => [document.querySelectorAll('.math').length,"
            " document.querySelectorAll('.math mjx-container').length]"
        )
        assert counts[0] > 0 and counts[1] == counts[0], f"{page}: math, typeset: {counts}"
        text = visit.page.evaluate("() => document.querySelector('main').innerText")
        raw = [d for d in ("\\(", "\\[", "$$") if d in text]
        assert not raw, f"{page}: raw TeX delimiters {raw} in the visible text"
        assert not visit.problems, f"{page}:\n" + "\n".join(visit.problems)
    finally:
        visit.close()


def test_figures_are_drawn(site, browser):
    """A figure page's plots are real bitmaps with a size, not broken placeholders."""
    visit = Visit(browser, f"{site}/{CASE_STUDY}.html")
    try:
        sizes = visit.page.evaluate(
            "() => Array.from(document.querySelectorAll('figure img'))"
            ".map(i => [i.naturalWidth, i.naturalHeight])"
        )
        assert len(sizes) >= 3 and all(w > 200 and h > 100 for w, h in sizes), sizes
    finally:
        visit.close()


def test_search_finds_a_term(site, browser):
    visit = Visit(browser, f"{site}/search.html?q=Inception")
    try:
        results = visit.page.locator("#search-results ul.search li")
        results.first.wait_for(timeout=20000)
        links = [
            results.nth(i).locator("a").first.get_attribute("href") for i in range(results.count())
        ]
        assert any("training/inception" in (href or "") for href in links), links
        assert not visit.problems, "\n".join(visit.problems)
    finally:
        visit.close()


def test_home_page_provenance_table(site, browser):
    visit = Visit(browser, f"{site}/index.html")
    try:
        table = visit.page.locator("table.guide-provenance")
        assert table.count() == 1
        rows = table.locator("tbody tr")
        executable = [p for p in toc_files() if is_executable(p)]
        assert rows.count() == len(executable)
        first = rows.first.locator("td")
        # text_content: the table sits in a closed dropdown, where innerText is empty
        assert first.nth(1).text_content().strip() in ("smoke", "gpu", "full")
    finally:
        visit.close()


def longest_pages(n: int = 3) -> list[str]:
    """The ``n`` pages with the most text in their source: the ones a reviewer
    should see whole (issue 44 keeps their screenshots as artefacts)."""
    return sorted(toc_files(), key=lambda p: -(ROOT / f"{p}.md").stat().st_size)[:n]


SCREENSHOT_PAGES = [("home", "index"), ("case-study", CASE_STUDY)] + [
    (p.rsplit("/", 1)[-1], p) for p in longest_pages() if p != CASE_STUDY
]


@pytest.mark.parametrize("name,page", SCREENSHOT_PAGES)
def test_screenshot(site, browser, name, page):
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    visit = Visit(browser, f"{site}/{page}.html")
    try:
        path = SCREENSHOTS / f"{name}.png"
        visit.page.screenshot(path=str(path), full_page=True)
        assert path.stat().st_size > 20_000
        assert Path(path).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    finally:
        visit.close()


def test_numbered_figures_and_tables_render(site, browser):
    """Named figures and tables carry a number, and {numref} links to them by it."""
    visit = Visit(browser, f"{site}/book/training/index.html")
    try:
        numbers = visit.page.evaluate(
            "() => Array.from(document.querySelectorAll('span.caption-number'))"
            ".map(s => s.textContent.trim())"
        )
        assert "Table 1" in numbers and "Table 2" in numbers, numbers
        refs = visit.page.evaluate(
            "() => Array.from(document.querySelectorAll('a.reference span.std-numref'))"
            ".map(s => s.textContent.trim())"
        )
        assert "Table 2" in refs, refs
    finally:
        visit.close()
    visit = Visit(browser, f"{site}/book/training/inception-tiny-imagenet.html")
    try:
        caption = visit.page.locator("figcaption span.caption-number").first
        assert caption.text_content().strip().startswith("Fig."), caption.text_content()
        img = visit.page.evaluate(
            "() => { const i = document.querySelector('figure img'); "
            "return i ? [i.naturalWidth, i.naturalHeight] : null; }"
        )
        assert img and img[0] > 200, img
    finally:
        visit.close()
