"""One-line messages: how errors are shown to the reader (pages and the command line)."""

from __future__ import annotations

import logging


def one_line(exc: BaseException | str) -> str:
    """``exc``'s message on one line (whitespace runs collapsed); its type name if empty."""
    text = str(exc).strip() or type(exc).__name__
    return " ".join(text.split())


class _Drop(logging.Filter):
    def __init__(self, fragment: str) -> None:
        super().__init__()
        self.fragment = fragment

    def filter(self, record: logging.LogRecord) -> bool:
        return self.fragment not in record.getMessage()


def quiet_log_notice(logger: str, fragment: str) -> None:
    """Drop the records of ``logger`` whose message contains ``fragment``: for
    notices a library logs about another's internals (torchao's Enum classes in
    PyTorch's pytree, for example) that the reader can do nothing about. A
    second call for the same notice adds nothing."""
    target = logging.getLogger(logger)
    if not any(isinstance(f, _Drop) and f.fragment == fragment for f in target.filters):
        target.addFilter(_Drop(fragment))


TORCHAO_NOTICES = (
    ("torch.utils._pytree", "is an Enum subclass and is now natively supported"),
    ("torch.utils.flop_counter", "triton not found"),
)
"""What importing torchao 0.18 makes PyTorch 2.14 log about its own internals:
the Enum classes torchao registers with pytree (deprecated, reported twice per
process) and flop counting without triton (in an environment that lacks it)."""


def quiet_torchao_notices() -> None:
    """Drop :data:`TORCHAO_NOTICES`: nothing the reader can act on. Called where
    torchao gets imported (the language-model package, through ``transformers``,
    and PyTorch's own int8)."""
    for logger, fragment in TORCHAO_NOTICES:
        quiet_log_notice(logger, fragment)


def count(n: int, word: str, plural: str | None = None, zero: bool = False) -> str:
    """``n`` and ``word`` in the right number: ``1 epoch``, ``3 epochs``,
    ``2 replicas``; ``plural`` where adding "s" is wrong; with ``zero``, none is
    ``no GPU``."""
    if zero and n == 0:
        return f"no {word}"
    return f"{n:,} {word if n == 1 else (plural or word + 's')}"
