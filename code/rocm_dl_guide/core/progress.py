"""When to draw progress bars.

Bars are for people watching a terminal. In a notebook executed by the book
build (or any run whose stderr is not a terminal) each bar update would become
one more block of output, so there the loops print one line per epoch instead.
``ROCM_DL_GUIDE_PROGRESS=1`` forces bars (e.g. in an interactive notebook),
``=0`` turns them off.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator

ENV_VAR = "ROCM_DL_GUIDE_PROGRESS"


def enabled(requested: bool = True) -> bool:
    """Whether to draw bars, given the caller's ``progress`` argument."""
    if not requested:
        return False
    forced = os.environ.get(ENV_VAR, "").strip().lower()
    if forced in ("1", "on", "yes", "true"):
        return True
    if forced in ("0", "off", "no", "false"):
        return False
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


@contextlib.contextmanager
def no_library_bars() -> Iterator[None]:
    """Turn off ``transformers``' own bars ("Loading weights", "Writing model
    shards") for the duration, then restore what was set before.

    They report a model of a few MiB loading in milliseconds, which is no news on
    a terminal; in a notebook ``tqdm.auto`` draws them as widgets, which a page
    cannot render without fetching JavaScript from a CDN."""
    from transformers.utils import logging as hf_logging

    was_on = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_on:
            hf_logging.enable_progress_bar()
