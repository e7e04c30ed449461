"""doctor reads error text however it was copied (:mod:`rocm_dl_guide.doctor.paste`).

Readers paste from a terminal (colour codes, Windows line ends), from a GitHub issue
or a forum (``> `` quotes, inline code, a list item's indentation), from a web page
(HTML entities) or from a log tool that prefixes every line (docker compose, a
timestamp). Each way of copying is applied to real outputs of the corpora, and
the report must meet the same expected findings as on the text as printed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from rocm_dl_guide.doctor import paste
from test_doctor_corpus import _said, load_cases, report_for

DATA = Path(__file__).parent / "data" / "doctor"
SAMPLE = [
    case
    for name in ("corpus", "blind2", "blind5", "blind9")
    for case in load_cases(DATA / name)[::4]
]
"""Every fourth case of four corpora: tool outputs (rocminfo, amd-smi, rocm-smi)
and error texts of every class."""

COPIES = {
    "a terminal's colours": lambda t: "\n".join(f"\x1b[1;31m{ln}\x1b[0m" for ln in t.split("\n")),
    "Windows line ends": lambda t: t.replace("\n", "\r\n"),
    "a GitHub quote": lambda t: "\n".join(f"> {ln}" for ln in t.split("\n")),
    "a list item's indentation": lambda t: "\n".join(f"    {ln}" for ln in t.split("\n")),
    "inline code per line": lambda t: "\n".join(
        f"`{ln}`" if ln.strip() and "`" not in ln else ln for ln in t.split("\n")
    ),
    "docker compose logs": lambda t: "\n".join(f"comfyui-1  | {ln}" for ln in t.split("\n")),
    "a timestamp per line": lambda t: "\n".join(
        f"2024-05-02T12:17:01.881Z {ln}" for ln in t.split("\n")
    ),
    "typographic quotes and spaces": lambda t: (
        t.replace("'", "\u2019").replace('"', "\u201d").replace("  ", "\u00a0\u00a0")
    ),
    "a web page's entities": lambda t: (
        t.replace("'", "&#39;").replace('"', "&quot;").replace(">", "&gt;")
    ),
}


def _met(case: dict, text: str) -> list[str]:
    rep, out = report_for(case, text)
    return [item for item in case["expected"] if _said(item, rep, out)]


@pytest.mark.parametrize("copy", COPIES)
def test_every_way_of_copying_meets_what_the_printed_text_meets(copy):
    changed = {}
    for case in SAMPLE:
        text = (Path(case["folder"]) / case["file"]).read_text(encoding="utf-8")
        plain, copied = _met(case, text), _met(case, COPIES[copy](text))
        if plain != copied:
            changed[case["file"]] = sorted(set(plain) - set(copied))
    assert not changed, changed


def test_clean_keeps_a_prompt_and_a_line_that_is_code_inside():
    text = "> groups\nuser adm render\n$ rocminfo | grep gfx\n  Name: gfx1100"
    assert paste.clean(text) == text  # one prompt among four lines is not a quote
    assert paste.clean("`a` and `b`") == "`a` and `b`"  # inline code inside a line stays
    assert paste.clean("> a\n> b\n>\n> c") == "a\nb\n\nc"
    assert paste.clean("\x1b[31mHIP error\x1b[0m\r\n") == "HIP error\n"
    assert paste.clean("```\nerror: &#39;x&#39;\n```") == "error: 'x'"
