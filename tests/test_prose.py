"""Readable sentences (issue 44): the prose a reader must follow averages about
20 words a sentence, and no sentence runs past 40 words.

Counted on the page sources: paragraphs and list items, without code, math,
tables, directives' options, headings or the bibliography. Inline code counts
as one word, a role (``{cite:p}`...```) as its text, a link as its text."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import ROOT

BOOK = ROOT / "book"
LONGEST = 40
"""Words in the longest sentence a page may have."""
AVERAGE = 22.0
"""The most words a sentence may average over a chapter (the issue's "about 20")."""
PROSE_DIRECTIVES = ("note", "tip", "warning", "important", "dropdown", "admonition",
                    "caution", "seealso", "attention", "hint")  # fmt: skip
"""Directives whose body is prose a reader follows (their options are not)."""
ABBREVIATIONS = re.compile(r"\b(e\.g|i\.e|etc|vs|Fig|Eq|No|cf|approx|Inc|Ltd|et al)\.")


def paragraphs(text: str) -> list[str]:
    """The page's prose: one string per paragraph or list item."""
    text = re.sub(r"\A---\n.*?\n---\n", "", text, flags=re.S)  # front matter
    found: list[str] = []
    current: list[str] = []
    fence = None

    def end() -> None:
        if current:
            found.append(" ".join(current))
            current.clear()

    for line in text.splitlines():
        s = line.strip()
        if fence:
            if re.fullmatch(re.escape(fence[0]) + f"{{{len(fence)},}}", s):
                fence = None
            continue
        m = re.match(r"(`{3,}|:{3,})(\{([\w:-]+)\})?", s)
        if m:
            end()
            if m.group(3) in PROSE_DIRECTIVES or s.rstrip("`:") == "":
                continue  # a prose directive opens (or one closes): read on
            fence = m.group(1)
            continue
        if not s or s.startswith(("|", "#", ":", "<", "$$", "[^", "+++", "%")):
            end()
            continue
        if re.match(r"([-*+]|\d+\.)\s", s):  # a list item starts a new unit
            end()
            s = re.sub(r"^([-*+]|\d+\.)\s+", "", s)
        current.append(s)
    end()
    return found


def sentences(text: str) -> list[tuple[int, str]]:
    """(words, sentence) for every sentence of the page's prose."""
    out = []
    for para in paragraphs(text):
        p = re.sub(r"\{[\w:-]+\}`([^`]*)`", r"\1", para)  # roles: their text
        p = re.sub(r"`[^`]*`", "CODE", p)
        p = re.sub(r"\$[^$]+\$", "MATH", p)
        p = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", p)
        p = ABBREVIATIONS.sub(lambda m: m.group(1).replace(".", ""), p)
        for s in re.split(r"(?<=[.!?:;])\s+(?=[A-Z0-9(\"'*_])|(?<=[.!?])\s+", p):
            words = len(re.findall(r"[\w][\w'%.,/+-]*", s))
            if words:
                out.append((words, s.strip()))
    return out


def pages() -> list[Path]:
    return sorted(p for p in BOOK.rglob("*.md") if p.name != "references.md")


@pytest.mark.parametrize("page", pages(), ids=lambda p: p.relative_to(ROOT).as_posix())
def test_no_sentence_runs_past_the_limit(page):
    counted = sentences(page.read_text(encoding="utf-8"))
    long = [f"{w} words: {s}" for w, s in counted if w > LONGEST]
    assert not long, "\n".join(long)


@pytest.mark.parametrize("chapter", sorted({p.parent for p in pages()}), ids=lambda p: p.name)
def test_sentences_average_about_twenty_words(chapter):
    words = [w for p in pages() if p.parent == chapter for w, _ in sentences(p.read_text())]
    average = sum(words) / len(words)
    assert average <= AVERAGE, f"{chapter.name}: {average:.1f} words a sentence"


def test_the_counter_sees_sentences_list_items_and_no_code():
    page = (
        "# Title\n\nOne two three. Four five six seven, e.g. eight.\n\n"
        "- an item of five words\n- another item here\n\n"
        "```{code-cell} ipython3\nx = 'not. prose. at all'\n```\n\n"
        ":::{note}\nA note is prose too.\n:::\n\n"
        "A role {cite:p}`key` and `code` count as one word each.\n"
    )
    counted = sentences(page)
    assert [w for w, _ in counted] == [3, 6, 5, 3, 5, 10]
