"""Per-page data that the features keep in the Sphinx environment.

Each feature keeps a dict ``docname -> value`` as an attribute of the
environment (pickled with it between builds). Pages are read in worker
processes in a parallel build, so what a worker recorded is merged back into
the main process's environment, and a page that is read again forgets what
was recorded for it before.
"""

from __future__ import annotations

from typing import Any


def pages(env, attr: str) -> dict[str, Any]:
    """The environment's dict ``attr`` (created empty the first time)."""
    data = getattr(env, attr, None)
    if data is None:
        data = {}
        setattr(env, attr, data)
    return data


def merge(env, other, docnames, attr: str) -> None:
    """Bring what a worker (``other``) recorded in ``attr`` for ``docnames`` into ``env``."""
    theirs = getattr(other, attr, {})
    pages(env, attr).update({d: theirs[d] for d in docnames if d in theirs})


def purge(env, docname: str, attr: str) -> None:
    getattr(env, attr, {}).pop(docname, None)


def keep_per_page(app, attr: str) -> None:
    """Connect the events that keep ``env.<attr>`` per page, across workers and builds."""
    app.connect("env-before-read-docs", lambda app, env, docnames: pages(env, attr))
    app.connect("env-purge-doc", lambda app, env, docname: purge(env, docname, attr))
    app.connect(
        "env-merge-info", lambda app, env, docnames, other: merge(env, other, docnames, attr)
    )
