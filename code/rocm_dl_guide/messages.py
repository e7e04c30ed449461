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
    PyTorch's pytree, for example) that the reader can do nothing about. Each
    call adds one filter; call it once per notice, at import time."""
    logging.getLogger(logger).addFilter(_Drop(fragment))
