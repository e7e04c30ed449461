"""Reading the stored upstream excerpts behind the error catalog.

An excerpt (``data/upstream/<source>/*.excerpt``) holds upstream lines unchanged,
one a line, each after its upstream line number and a tab (``-`` where the
number is not known). The functions here read the C and C++ in them: an enum
with its doc comments (:func:`enum_members`), a ``switch`` that returns a
string for each case (:func:`switch_strings`), and the print statements of a
file (:func:`print_statements`), whose format strings :func:`format_regex`
turns into regular expressions that find the printed line in a log.

:mod:`~rocm_dl_guide.doctor.catalogs` builds the catalog from what these return.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

Row = tuple[int | None, str]
"""One excerpt line: its upstream line number (None when unknown) and its text."""

_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"')
_ESCAPES = {"n": "\n", "t": "\t", '"': '"', "\\": "\\", "'": "'", "r": "\r", "0": "\0"}
_SPEC = re.compile(r"%(?:%|[-+ #0]*\d*(?:\.\d+)?(?:hh|h|ll|l|z|j|t|L)?[diouxXcsp])")
_PRINTERS = (
    "dev_err",
    "dev_err_once",
    "dev_warn",
    "dev_info",
    "dev_dbg",
    "DRM_ERROR",
    "DRM_WARN",
    "DRM_INFO",
    "pr_err",
    "pr_warn",
    "pr_info",
    "printk",
    "fprintf",
    "ClPrint",
)
_CALL = re.compile(r"\b(" + "|".join(_PRINTERS) + r")\s*\(")


def read_excerpt(path: Path) -> list[Row]:
    """The lines of an excerpt file, each with its upstream line number."""
    rows: list[Row] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        number, _, text = line.partition("\t")
        rows.append((None if number == "-" else int(number), text))
    return rows


def unescape(literal: str) -> str:
    """The text a C string literal's body stands for (``\\n`` -> newline)."""
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(1)), literal)


def string_literals(code: str) -> list[str]:
    """Every string literal in a piece of C, unescaped, in order."""
    return [unescape(m.group(1)) for m in _STRING.finditer(code)]


def first_string(code: str) -> tuple[str, str] | None:
    """The first run of adjacent string literals in ``code`` (joined, as C joins
    them), and the code after it; None when there is no literal."""
    match = _STRING.search(code)
    if not match:
        return None
    parts = [match.group(1)]
    rest = code[match.end() :]
    while True:
        nxt = re.match(r'\s*"((?:[^"\\]|\\.)*)"', rest)
        if not nxt:
            break
        parts.append(nxt.group(1))
        rest = rest[nxt.end() :]
    return unescape("".join(parts)), rest


@dataclass(frozen=True)
class Member:
    """One enum member: its name, value, doc text and first line."""

    name: str
    value: int | None
    doc: str
    line: int | None
    deprecated: bool = False


def enum_members(rows: list[Row]) -> list[Member]:
    """The members of the enum in ``rows``, with the text of the ``///<`` comment
    after each or the ``/** ... */`` block before it (``// Deprecated`` on the
    line before a member marks it deprecated)."""
    members: list[Member] = []
    pending: list[str] = []  # a /** */ block's text, waiting for its member
    in_block = deprecated = False
    for number, text in rows:
        stripped = text.strip()
        if in_block:
            in_block = not stripped.endswith("*/")
            body = stripped.removesuffix("*/").lstrip("*").strip()
            pending += [body] if body else []
            continue
        if stripped.startswith("/**"):
            in_block = not stripped.endswith("*/")
            body = stripped.removeprefix("/**").removesuffix("*/").strip()
            pending = [body] if body else []
            continue
        if stripped.startswith("///<") and members:
            last = members[-1]
            more = stripped.removeprefix("///<").strip()
            members[-1] = Member(
                last.name, last.value, _join(last.doc, more), last.line, last.deprecated
            )
            continue
        if stripped == "// Deprecated":
            deprecated = True
            continue
        match = re.match(
            r"(\w+)\s*(?:=\s*(0x[0-9A-Fa-f]+|\d+))?\s*,?\s*(?:///<\s*(.*))?$", stripped
        )
        if not match or stripped.startswith(("typedef", "enum", "}", "//")):
            continue
        doc = match.group(3) or " ".join(pending)
        value = int(match.group(2), 0) if match.group(2) else None
        members.append(Member(match.group(1), value, doc.strip(), number, deprecated))
        pending, deprecated = [], False
    return members


def _join(first: str, more: str) -> str:
    return f"{first} {more}".strip() if more else first


def switch_strings(rows: list[Row]) -> dict[str, tuple[str, int | None]]:
    """For a ``switch`` whose cases each set or return a string: each case's
    string and the line it starts on (cases that fall through share one)."""
    found: dict[str, tuple[str, int | None]] = {}
    cases: list[str] = []
    code, start = "", None
    for number, text in rows:
        stripped = text.strip()
        case = re.match(r"case (\w+):$", stripped)
        if case or stripped == "default:":
            cases += [case.group(1)] if case else []
            continue
        if cases and ('"' in stripped or code):
            code, start = code + stripped, start or number
            if code.endswith(";"):
                joined = first_string(code)
                for name in cases:
                    found[name] = (joined[0] if joined else "", start)
                cases, code, start = [], "", None
    return found


@dataclass(frozen=True)
class Statement:
    """A print statement: the call, its format string, any other string
    literals among its arguments, and its first line."""

    call: str
    format: str
    literals: tuple[str, ...]
    line: int | None
    code: str


def print_statements(rows: list[Row]) -> list[Statement]:
    """Every print call in ``rows`` (``dev_err``, ``DRM_ERROR``, ``fprintf``,
    ``ClPrint`` ...), read to its closing parenthesis."""
    found: list[Statement] = []
    code, start, call = "", None, ""
    for number, text in rows:
        if not code:
            match = _CALL.search(text)
            if not match:
                continue
            call, start, code = match.group(1), number, text[match.start() :]
        else:
            code += "\n" + text
        if _balanced(code):
            joined = first_string(code)
            if joined:
                fmt, rest = joined
                found.append(Statement(call, fmt, tuple(string_literals(rest)), start, code))
            code = ""
    return found


def _balanced(code: str) -> bool:
    """Whether the parentheses outside string literals are all closed."""
    bare = _STRING.sub('""', code)
    return bare.count("(") <= bare.count(")")


def format_regex(fmt: str) -> str:
    """A regular expression that finds, anywhere in a log line, what ``printf``
    prints for ``fmt``: ``%s`` is any text, ``%d``/``%u`` a number, ``%x``/``%llx``
    hexadecimal digits, ``%p`` a pointer; runs of white space match any."""
    fmt = fmt.strip()
    parts: list[str] = []
    position = 0
    for match in _SPEC.finditer(fmt):
        parts.append(_literal(fmt[position : match.start()]))
        parts.append(_conversion(match.group(0)))
        position = match.end()
    parts.append(_literal(fmt[position:]))
    regex = "".join(parts)
    return r"(?<!\w)" + regex if fmt[:1].isalnum() else regex


def _literal(text: str) -> str:
    words = re.split(r"\s+", text)
    return r"\s+".join(re.escape(word) for word in words)


def _conversion(spec: str) -> str:
    kind = spec[-1]
    if spec == "%%":
        return "%"
    if kind in "diu":
        return r"-?\d+"
    if kind in "xX":
        return r"[0-9A-Fa-f]+"
    if kind == "o":
        return r"[0-7]+"
    if kind == "p":
        return r"(?:0x[0-9A-Fa-f]+|\(nil\))"
    if kind == "c":
        return "."
    return ".*?"


def literal_length(fmt: str) -> int:
    """How many characters of ``fmt`` are fixed text: how specific its regex is."""
    return len(re.sub(r"\s+", " ", _SPEC.sub("", fmt)).strip())
