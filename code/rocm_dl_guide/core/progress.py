"""When to draw progress bars.

Bars are for people watching a terminal. In a notebook executed by the book
build (or any run whose stderr is not a terminal) each bar update would become
one more block of output, so there the loops print one line per epoch instead.
``ROCM_DL_GUIDE_PROGRESS=1`` forces bars (e.g. in an interactive notebook),
``=0`` turns them off.
"""

from __future__ import annotations

import os
import sys

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
