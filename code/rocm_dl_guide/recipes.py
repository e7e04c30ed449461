"""The ``full`` profile's hyperparameters of every case study, in one table.

Each case study keeps its own settings as constants and a ``RECIPE`` dict built
from them (the very constants its training function uses); :func:`table`
lists them side by side for the training chapter's overview page, so the table
cannot drift from the code. ``tests/test_recipes.py`` compares every value with
the guide's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rocm_dl_guide import cifar10, fashion_mnist, imdb, inception, mnist

if TYPE_CHECKING:  # pragma: no cover
    import pandas

CASE_STUDIES = {
    "mnist-pytorch": mnist,
    "inception-v3": inception,
    "cifar10": cifar10,
    "fashion-mnist": fashion_mnist,
    "imdb": imdb,
}
"""Command-line name -> module; each module has a ``RECIPE`` dict."""

COLUMNS = (
    "case study",
    "optimizer",
    "batch size",
    "learning rate",
    "momentum",
    "weight decay",
    "schedule",
    "epochs",
    "input",
)


def recipe(name: str) -> dict:
    """The ``full`` profile's settings of case study ``name`` (a command-line name)."""
    if name not in CASE_STUDIES:
        raise ValueError(f"unknown case study {name!r}: choose one of {', '.join(CASE_STUDIES)}")
    return dict(CASE_STUDIES[name].RECIPE)


def table() -> pandas.DataFrame:
    """One row per case study, :data:`COLUMNS` in order; ``-`` where a setting does not apply."""
    import pandas as pd

    rows = []
    for name in CASE_STUDIES:
        r = recipe(name)
        rows.append({c: "-" if r.get(c) is None else r[c] for c in COLUMNS} | {"command": name})
    return pd.DataFrame(rows, columns=["command", *COLUMNS])
