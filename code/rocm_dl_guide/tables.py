"""One way to show a table on a page: no index column, empty cells for missing values."""

from __future__ import annotations


def show(data, caption: str | None = None):
    """Return a pandas Styler for ``data`` (a DataFrame or a list of dicts).

    Missing values render as empty cells rather than ``NaN``/``None``, and the
    positional index, which means nothing to a reader, is hidden.
    """
    import pandas as pd

    frame = data if isinstance(data, pd.DataFrame) else pd.DataFrame(list(data))
    frame = frame.astype(object).where(frame.notna(), "")
    styler = frame.style.hide(axis="index")
    if caption:
        styler = styler.set_caption(caption)
    return styler
