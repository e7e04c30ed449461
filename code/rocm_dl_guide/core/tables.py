"""One way to show a table on a page: no index column, empty cells for missing
values, and source ids rendered as links to the documents they name."""

from __future__ import annotations

from html import escape

LONG_CELL = 80
"""A cell longer than this (characters) is prose: its table wraps instead of scrolling."""


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
    ``formats`` maps a column name to a format string (``"{:.2f}"``) for its figures.
    """
    import pandas as pd

    frame = data if isinstance(data, pd.DataFrame) else pd.DataFrame(list(data))
    frame = frame.astype(object).where(frame.notna(), "")
    styler = frame.style.hide(axis="index")
    for column, urls in (links or {}).items():
        if column in frame.columns:

            def link(value, urls=urls):
                url = urls.get(value)
                text = escape(str(value))
                return f'<a href="{escape(url, quote=True)}">{text}</a>' if url else text

            styler = styler.format(link, subset=[column])
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
