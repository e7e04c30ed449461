"""tables.show: the one way a page shows a table, its figures formatted for reading."""

import math

import pandas as pd
import pytest

from rocm_dl_guide.core import tables


def cells(styler) -> list[str]:
    import re

    return re.findall(r"<td[^>]*>([^<]*)</td>", styler.to_html())


def test_whole_number_columns_print_as_integers_and_others_with_four_digits():
    frame = pd.DataFrame(
        {
            "operator": ["aten::mm", "aten::add_"],
            "calls": [18.0, 2.0],  # per step: floats that are whole numbers
            "self ms": [111.19, 0.538],
            "count": [3, 4],
            "tiny": [None, 0.000123],
            "big": [12345.6, 2.5],
        }
    )
    assert cells(tables.show(frame)) == [
        "aten::mm", "18", "111.2", "3", "", "12,346",
        "aten::add_", "2", "0.5380", "4", "0.0001230", "2.500",
    ]  # fmt: skip


def test_a_columns_own_format_wins_and_an_infinite_figure_is_an_error():
    frame = pd.DataFrame({"ratio": [1.0, 2.0], "ms": [1.0, math.inf]})
    styler = tables.show(frame[["ratio"]], formats={"ratio": "{:.2f}x"})
    assert cells(styler) == ["1.00x", "2.00x"]
    with pytest.raises(ValueError, match="a variant that did not run is a row saying why"):
        cells(tables.show(frame))


@pytest.mark.parametrize(
    ("value", "shown"),
    [(0.0, "0"), (1.0, "1.000"), (-0.25, "-0.2500"), (999.94, "999.9"), (1234.5, "1,234")],
)
def test_readable(value, shown):
    assert tables.readable(value) == shown


def test_text_cells_show_as_written_never_as_markup():
    frame = pd.DataFrame({"change": ["< 0.01%", "<br /> kept"], "n": [1, 2]})
    html = tables.show(frame).to_html()
    assert "&lt; 0.01%" in html and "&lt;br /&gt; kept" in html and "<br />" not in html
