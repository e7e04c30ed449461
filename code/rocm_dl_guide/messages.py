"""One-line messages: how errors are shown to the reader (pages and the command line)."""

from __future__ import annotations


def one_line(exc: BaseException | str) -> str:
    """``exc``'s message on one line (whitespace runs collapsed); its type name if empty."""
    text = str(exc).strip() or type(exc).__name__
    return " ".join(text.split())
