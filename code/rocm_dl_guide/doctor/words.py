"""Counts in words for the doctor's sentences: ``1 GPU``, ``2 GPUs``, never ``GPU(s)``."""

from __future__ import annotations


def counted(n: int, noun: str, plural: str | None = None, zero: bool = False) -> str:
    """``n`` and ``noun``, the noun in the plural unless ``n`` is one:
    ``counted(1, "GPU")`` is ``1 GPU``, ``counted(3, "GPU")`` is ``3 GPUs``;
    with ``zero``, none is ``no GPU``."""
    if zero and n == 0:
        return f"no {noun}"
    return f"{n} {noun if n == 1 else (plural or noun + 's')}"


def listing(items: list, noun: str, plural: str | None = None) -> str:
    """``noun`` in the singular or plural for a list of ``items``, no count:
    ``listing([1], "agent")`` is ``agent``, ``listing([1, 2], "agent")`` is ``agents``."""
    return noun if len(items) == 1 else (plural or noun + "s")
