"""The reader's pasted text as doctor's rules read it.

Error text reaches doctor the way readers copy it:

- from a terminal, with its colour codes and Windows line ends;
- from a GitHub issue or a forum: quoted (``> ``), wrapped in inline code, or
  indented under a list item;
- from a web page or a chat: HTML entities (``&#39;``), typographic quotes,
  non-breaking spaces;
- through a log tool that puts its prefix before every line (``docker compose
  logs``, a timestamp).

:func:`clean` gives the text the way the program printed it, so that one rule reads
every copy. It changes nothing else: a line keeps its words, and a shell prompt
(``> groups``) stays where few lines are quoted. :func:`load` reads the text from a
file or standard input.
"""

from __future__ import annotations

import html
import re
import sys
import textwrap
from functools import lru_cache
from pathlib import Path

MAX_BYTES = 4 * 2**20
"""The most of a log that is read (its last part where it is longer)."""

_ANSI = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI: colours such as "\x1b[31m" ... "\x1b[0m"
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC ... BEL / ST
    r"|\x1b[@-Z\\-_]?"  # a lone ESC or a two-byte escape
)
"""Terminal colour and cursor codes, title sequences and other escapes."""
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
"""C0 control characters other than tab and newline (carriage returns go first)."""
_TYPOGRAPHY = str.maketrans(
    {"\u2018": "'", "\u2019": "'", "\u201a": "'", "\u201b": "'", "\u2032": "'",
     "\u201c": '"', "\u201d": '"', "\u201e": '"', "\u00a0": " ", "\u202f": " ",
     "\u2007": " ", "\u200b": "", "\u200c": "", "\u200d": "", "\ufeff": ""}
)  # fmt: skip
"""What a word processor, a chat or a web page puts for quotes and spaces: typographic
quotes, non-breaking and zero-width spaces, a byte-order mark."""
_ENTITY = re.compile(r"&(?:#\d{2,5}|#x[0-9a-fA-F]{2,4}|quot|amp|lt|gt|apos|nbsp);")
_QUOTE = re.compile(r"^[ \t]*(?:>[ \t]?)+")
_FENCE = re.compile(r"^\s*(?:```|~~~)\S*\s*$")
_PREFIXES = (
    re.compile(r"^[\w.-]+\s+\|\s?"),  # docker compose logs: "comfyui-1  | "
    re.compile(  # a timestamp of its own (kubectl logs --timestamps, CI runners, loggers)
        r"^\[?\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?\]?[ \t]"
    ),
)
"""Prefixes a log tool puts before every line it prints (not syslog's, whose "kernel:"
says where a line comes from)."""


@lru_cache(maxsize=8)
def clean(text: str) -> str:
    """``text`` without colour codes, carriage returns and other control characters,
    typographic quotes and spaces (as ASCII ones),
    markdown quote markers and a log tool's prefixes (where
    most lines carry one), code fences, inline code around a whole line, HTML entities
    (where the text has them) and the indentation every line shares."""
    text = _ANSI.sub("", text).replace("\r\n", "\n").replace("\r", "\n")
    text = _CONTROL.sub("", text).translate(_TYPOGRAPHY)
    if _ENTITY.search(text):
        text = html.unescape(text)
    lines = [line for line in text.split("\n") if not _FENCE.match(line)]
    filled = [line for line in lines if line.strip()]
    quoted = sum(1 for line in filled if _QUOTE.match(line))
    if filled and quoted * 2 > len(filled):  # a quoted block, not a prompt or two
        lines = [_QUOTE.sub("", line) for line in lines]
    for prefix in _PREFIXES:  # where most lines carry it: a log block
        if filled and sum(1 for line in lines if prefix.match(line)) * 2 > len(filled):
            lines = [prefix.sub("", line) for line in lines]
    lines = [_unticked(line) for line in lines]
    return textwrap.dedent("\n".join(lines))


def _unticked(line: str) -> str:
    """A whole line in inline code (`` `text` ``) without its backticks."""
    body = line.strip()
    if len(body) > 2 and body[0] == body[-1] == "`" and "`" not in body[1:-1]:
        return line[: len(line) - len(line.lstrip())] + body[1:-1]
    return line


def load(path: str) -> tuple[str, str]:
    """The log at ``path`` (``-``: standard input) as text, and where it came from;
    only its last :data:`MAX_BYTES` where it is longer. ``OSError`` for a file that
    cannot be read."""
    if path == "-":
        data = sys.stdin.buffer.read()
        source = "standard input"
    else:
        data = Path(path).read_bytes()
        source = Path(path).name
    if len(data) > MAX_BYTES:
        data = data[-MAX_BYTES:]
        source += f" (its last {MAX_BYTES // 2**20} MiB)"
    return data.decode("utf-8", errors="replace"), source
