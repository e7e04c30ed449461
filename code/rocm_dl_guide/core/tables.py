"""One way to show a table on a page: no index column, empty cells for missing
values, figures formatted for reading, and source ids rendered as links to the
documents they name."""

from __future__ import annotations

from html import escape

LONG_CELL = 80
"""A cell longer than this (characters) is prose: its table wraps instead of scrolling."""
DIGITS = 4
"""Significant digits of a figure in a column without a format of its own."""


def readable(value: float, integral: bool = False) -> str:
    """A figure as a reader reads it: a whole number (``integral``, or from 1,000
    up) with thousands separators, else :data:`DIGITS` significant digits, never
    the six decimals pandas prints by default ("18.000000")."""
    import math

    if not math.isfinite(value):
        raise ValueError(f"{value} in a table: a variant that did not run is a row saying why")
    if integral or abs(value) >= 10 ** (DIGITS - 1):
        return f"{value:,.0f}"
    if value == 0:
        return "0"
    decimals = DIGITS - 1 - math.floor(math.log10(abs(value)))
    return f"{value:.{decimals}f}"


def show(
    data,
    caption: str | None = None,
    links: dict[str, dict[str, str]] | None = None,
    formats: dict[str, str] | None = None,
):
    """Return a pandas Styler for ``data`` (a DataFrame or an iterable of dicts).

    Missing values render as empty cells rather than ``NaN``/``None``, and the
    positional index, which means nothing to a reader, is hidden. ``links``
    maps a column name to ``{cell value: url}``; those cells become links.
    ``formats`` maps a column name to a format string (``"{:.2f}"``) for its figures;
    other columns of floats print :func:`readable`: as whole numbers where every
    figure in the column is one (a count), else with :data:`DIGITS` significant
    digits. An infinite figure is an error, never a cell.
    """
    import pandas as pd

    frame = data if isinstance(data, pd.DataFrame) else pd.DataFrame(list(data))
    floats = {
        column: all(float(v).is_integer() for v in frame[column].dropna())
        for column in frame.columns
        if column not in (formats or {})
        and frame[column].dropna().map(lambda v: isinstance(v, float)).all()
        and frame[column].notna().any()
    }
    frame = frame.astype(object).where(frame.notna(), "")
    # Text is text: "<" in a cell ("< 0.01%", "<br />") shows as written.
    styler = frame.style.format(escape="html").hide(axis="index")
    for column, urls in (links or {}).items():
        if column in frame.columns:

            def link(value, urls=urls):
                url = urls.get(value)
                text = escape(str(value))
                return f'<a href="{escape(url, quote=True)}">{text}</a>' if url else text

            styler = styler.format(link, subset=[column])
    for column, integral in floats.items():
        styler = styler.format(
            lambda v, integral=integral: readable(v, integral) if isinstance(v, float) else v,
            subset=[column],
        )
    for column, fmt in (formats or {}).items():
        if column in frame.columns:
            styler = styler.format(
                lambda v, fmt=fmt: fmt.format(v) if isinstance(v, (int, float)) else v,
                subset=[column],
            )
    if caption:
        styler = styler.set_caption(caption)
    if any(len(str(v)) > LONG_CELL for v in frame.to_numpy().ravel()):
        # Prose in cells (findings, fixes, lists of names): the table wraps to the
        # column, breaking long tokens (commands, URLs) where it must, instead of
        # scrolling sideways (_static/guide.css).
        styler = styler.set_table_attributes('class="guide-prose-table"')
    return styler


def rounded(value, digits: int = 4):
    """``value`` with every float in it (in dicts and lists too) rounded to
    ``digits`` significant digits, for printing a record: ``205.92814799965709``
    becomes ``205.9``, ``5.278789679102376e-07`` becomes ``5.279e-07``. The file
    a record is written to keeps every digit; this is for reading."""
    if isinstance(value, bool) or not isinstance(value, float):
        if isinstance(value, dict):
            return {k: rounded(v, digits) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [rounded(v, digits) for v in value]
        return value
    return float(f"{value:.{digits}g}")
