"""Counts in words for the doctor's sentences (``1 GPU``, ``2 GPUs``, never ``GPU(s)``),
and a long line cut to what matters."""

from __future__ import annotations

import re

from rocm_dl_guide.core.messages import count as counted

__all__ = ["around", "counted", "listing"]
"""``counted`` is the package's one counter (:func:`rocm_dl_guide.core.messages.count`):
``counted(1, "GPU")`` is ``1 GPU``, ``counted(3, "GPU")`` is ``3 GPUs``, and with
``zero=True`` none is ``no GPU``."""


def listing(items: list, noun: str, plural: str | None = None) -> str:
    """``noun`` in the singular or plural for a list of ``items``, no count:
    ``listing([1], "agent")`` is ``agent``, ``listing([1, 2], "agent")`` is ``agents``."""
    return noun if len(items) == 1 else (plural or noun + "s")


def around(line: str, match: re.Match, width: int = 300) -> str:
    """``line``, or the ``width`` characters of it around ``match`` (a long log line
    whose message comes late), marked with an ellipsis where cut at the start."""
    start = max(0, min(match.start() - 60, len(line) - width))
    return ("…" if start else "") + line[start : start + width]
