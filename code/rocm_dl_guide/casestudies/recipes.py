"""The ``full`` profile's hyperparameters of every case study, in one table.

Each case study keeps its own settings as constants and a ``RECIPE`` dict built
from them (the very constants its training function uses), which its registry
entry names (:attr:`rocm_dl_guide.core.casestudies.CaseStudy.recipe_attr`);
:func:`table` lists them side by side for the training chapter's overview page,
so the table cannot drift from the code. ``tests/test_recipes.py`` compares
every value with the guide's.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rocm_dl_guide.core import casestudies

if TYPE_CHECKING:  # pragma: no cover
    import pandas


def names() -> tuple[str, ...]:
    """The case studies that have a recipe, in the registry's order."""
    return tuple(cs.name for cs in casestudies.REGISTRY.values() if cs.recipe_attr)


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
    """The ``full`` profile's settings of case study ``name`` (a registry name)."""
    found = casestudies.get(name).recipe()
    if found is None:
        raise ValueError(f"{name} has no recipe of its own: one of {', '.join(names())}")
    return found


def _shown(value):
    """A setting as the table shows it: ``-`` where it does not apply, and a rate as
    written in a recipe (``0.001``, ``1``), not with a float's six decimals."""
    if value is None:
        return "-"
    return f"{value:g}" if isinstance(value, float) else value


def table() -> pandas.DataFrame:
    """One row per case study, :data:`COLUMNS` in order; ``-`` where a setting does not apply."""
    import pandas as pd

    rows = []
    for name in names():
        r = recipe(name)
        rows.append({c: _shown(r.get(c)) for c in COLUMNS} | {"command": name})
    return pd.DataFrame(rows, columns=["command", *COLUMNS])
