"""Provenance table: where every executed page's outputs came from.

The ``{guide-provenance}`` directive (on the home page) becomes a table of
every executed page with the profile and device its outputs came from, when it
was executed, how long that took and whether this build ran it or took it from
the cache; the build also writes the rows to ``_static/provenance.json``. The
table is built from data, not from the note's prose: each page's provenance
cell (``rocm_dl_guide.core.provenance.note``) glues a JSON record (MIME type
``application/vnd.rocm-dl-guide.provenance+json``) under the key
``guide-provenance``; MyST-NB writes a page's glued values to
``<jupyter_execute>/<docname>.glue.json`` when it reads the executed (or
cached) notebook, and this module reads the record from there. Runtime and
cache status come from MyST-NB's execution data. Whenever a build reads any
page, it reads the home page again too: its table changes.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

from . import envdata, page_times, parallel

PROVENANCE_KEY = "guide-provenance"
"""The glue key of a page's provenance record (``rocm_dl_guide.core.provenance.GLUE_KEY``)."""
PROVENANCE_KIND = "rocm_dl_guide.core.provenance"
PROVENANCE_MIME = "application/vnd.rocm-dl-guide.provenance+json"
"""Its MIME type (``rocm_dl_guide.core.provenance.RECORD_MIME``)."""
ATTR = "guide_provenance"
"""``env.guide_provenance``: docname -> :func:`provenance_from_record`'s fields."""

logger = logging.getLogger(__name__)


class ProvenanceError(ValueError):
    """A page's glued provenance record is not what the table needs."""


def provenance_from_record(record: Any) -> dict[str, Any]:
    """The table's fields (profile, device, when) from a page's provenance record.

    ``record`` is the JSON object that ``rocm_dl_guide.core.provenance.note`` glues
    (``Provenance.record()``). Raises :class:`ProvenanceError` if it is not one.
    """
    if not isinstance(record, dict) or record.get("kind") != PROVENANCE_KIND:
        raise ProvenanceError(f"not a {PROVENANCE_KIND} record: {record!r:.200}")
    missing = [k for k in ("profile", "device", "executed_at") if not record.get(k)]
    if missing:
        raise ProvenanceError(f"provenance record without {', '.join(missing)}")
    device = " ".join(str(record["device"]).split())
    mine, _, total = str(record.get("build_threads") or "").partition("/")
    if mine and total:
        device += f" ({mine} of {total} threads, beside another page)"
    return {
        "profile": str(record["profile"]),
        "data_source": str(record.get("data_source") or ""),
        "base_device": " ".join(str(record["device"]).split()),
        "device": device,
        "when": str(record["executed_at"]).strip(),
        "versions": dict(record.get("versions") or {}),
    }


def provenance_from_glue(glue_data: dict[str, Any]) -> dict[str, Any] | None:
    """The provenance fields from a page's glue data (MyST-NB's ``.glue.json``:
    key -> display output), or ``None`` when the page glued no provenance."""
    output = glue_data.get(PROVENANCE_KEY)
    if output is None:
        return None
    data = output.get("data", {}) if isinstance(output, dict) else {}
    if PROVENANCE_MIME not in data:
        raise ProvenanceError(
            f"glued {PROVENANCE_KEY!r} has no {PROVENANCE_MIME} output (has {sorted(data)})"
        )
    record = data[PROVENANCE_MIME]
    if isinstance(record, str):  # some writers keep JSON outputs as text
        record = json.loads(record)
    return provenance_from_record(record)


def _glue_keys(env, docname: str) -> list[str]:
    try:
        from myst_nb.sphinx_ import NbMetadataCollector

        return list(NbMetadataCollector.get_doc_data(env).get(docname, {}).get("glue", []))
    except Exception:  # no MyST-NB data for this page
        return []


def read_glue(output_folder: str | Path, docname: str) -> dict[str, Any]:
    """The glue data MyST-NB wrote for ``docname`` in ``output_folder`` (``{}`` if none)."""
    path = Path(output_folder).joinpath(*docname.split("/"))
    path = path.with_name(path.name + ".glue.json")
    if not path.is_file():
        return {}
    return json.loads(path.read_text(encoding="utf-8"))


def _on_doctree_read(app, doctree) -> None:
    """Record the page's provenance from the data its provenance cell glued.

    MyST-NB has just read the page (executing it or taking it from the cache)
    and written its glue data; a page that glued nothing this time keeps no
    entry (a stale ``.glue.json`` from an older build is not trusted).
    """
    env = app.env
    docname = env.docname
    recorded = envdata.pages(env, ATTR)
    recorded.pop(docname, None)
    if PROVENANCE_KEY not in _glue_keys(env, docname):
        return
    folder = getattr(getattr(env, "mystnb_config", None), "output_folder", None)
    if not folder:
        return
    try:
        info = provenance_from_glue(read_glue(folder, docname))
    except (ProvenanceError, ValueError) as exc:
        logger.warning(f"[guide] {docname}: unusable provenance record: {exc}", location=docname)
        return
    if info:
        recorded[docname] = info


def read_home_too(docnames: list[str], root_doc: str, found_docs) -> None:
    """Add the home page (``root_doc``, which has the table) to the pages a
    build reads, when it reads any page and the home page is one of the book's."""
    if docnames and root_doc not in docnames and root_doc in found_docs:
        docnames.append(root_doc)


def _on_env_before_read(app, env, docnames: list[str]) -> None:
    read_home_too(docnames, app.config.root_doc, env.found_docs)


class provenance_table(nodes.General, nodes.Element):
    """Placeholder, replaced by the table once every page has been read."""


class ProvenanceDirective(SphinxDirective):
    has_content = False

    def run(self):
        return [provenance_table()]


def _toc_order(env, root: str) -> list[str]:
    order: list[str] = []

    def walk(doc: str) -> None:
        if doc in order:
            return
        order.append(doc)
        for child in env.toctree_includes.get(doc, []):
            walk(child)

    walk(root)
    return order


def _exec_data(env, docname: str) -> dict[str, Any]:
    try:
        from myst_nb.sphinx_ import NbMetadataCollector

        return NbMetadataCollector.get_exec_data(env, docname) or {}
    except Exception:  # no MyST-NB data for this page
        return {}


def rows_from(
    order: list[str],
    provenance: dict[str, dict[str, Any]],
    exec_data: dict[str, dict[str, Any]],
    titles: dict[str, str],
    executed: set[str],
) -> list[dict[str, str]]:
    """The table's rows, in ``order``, for the pages with a provenance record.

    ``provenance``: docname -> :func:`provenance_from_record`'s fields;
    ``exec_data``: docname -> MyST-NB's execution data (``runtime``);
    ``executed``: the pages this build executed (the others came from the
    cache). MyST-NB's own ``method`` cannot tell: in cache mode it executes a
    page into the cache and reads it from there, so it says "cache" for all.
    """
    rows = []
    for docname in order:
        info = provenance.get(docname)
        if not info:
            continue
        data = exec_data.get(docname) or {}
        runtime = data.get("runtime")
        rows.append(
            {
                "docname": docname,
                "title": titles.get(docname, docname),
                "profile": info["profile"],
                "device": info["device"],
                "executed": info["when"],
                "seconds": f"{runtime:.1f}" if isinstance(runtime, (int, float)) else "",
                "this build": "executed" if docname in executed else "from cache",
            }
        )
    return rows


def provenance_rows(app) -> list[dict[str, str]]:
    env = app.env
    order = _toc_order(env, app.config.root_doc)
    provenance = getattr(env, ATTR, {})
    records = page_times.cache_records(parallel.cache_path(app))
    started = page_times.build_started()
    executed = {
        doc
        for doc in provenance
        if str(env.doc2path(doc)) in records and records[str(env.doc2path(doc))][0] >= started
    }
    return rows_from(
        order,
        provenance,
        {doc: _exec_data(env, doc) for doc in order if doc in provenance},
        {doc: env.titles[doc].astext() for doc in order if doc in env.titles},
        executed,
    )


def _table(app, fromdoc: str, rows: list[dict[str, str]]) -> nodes.Node:
    headers = ["Page", "Profile", "Device", "Executed", "Seconds", "This build"]
    keys = ["title", "profile", "device", "executed", "seconds", "this build"]
    table = nodes.table(classes=["guide-provenance"])
    group = nodes.tgroup(cols=len(headers))
    table += group
    for _ in headers:
        group += nodes.colspec(colwidth=1)
    head = nodes.thead()
    group += head
    row = nodes.row()
    for h in headers:
        row += nodes.entry("", nodes.paragraph(text=h))
    head += row
    body = nodes.tbody()
    group += body
    for data in rows:
        row = nodes.row()
        for key in keys:
            para = nodes.paragraph()
            if key == "title":
                ref = nodes.reference(
                    "", data["title"], refuri=app.builder.get_relative_uri(fromdoc, data["docname"])
                )
                para += ref
            else:
                para += nodes.Text(data[key])
            row += nodes.entry("", para)
        body += row
    return table


DATA_WORDS = {
    "real": "on real data (the data sets, pretrained weights and Hub models themselves)",
    "fixtures": "on generated fixtures (data in the real formats, random weights)",
}


NAMED = 3
"""A group of at most this many pages, beside a larger one, is named in
:func:`build_summary` (which page ran on real data, say)."""


def build_summary(
    provenance: dict[str, dict[str, Any]], titles: dict[str, str] | None = None
) -> str:
    """One sentence on what this build's executed pages ran with: profile, data
    source and device, from their provenance records (so the home page cannot
    say "real data" of a build on fixtures). A small group beside a larger one
    names its pages, by their ``titles`` (docname -> title) where given."""
    from collections import Counter, defaultdict

    if not provenance:
        return "This build executed no page."
    titles = titles or {}
    groups: dict[tuple[str, str], list[str]] = defaultdict(list)
    for docname, p in provenance.items():
        groups[(p["profile"], p.get("data_source", ""))].append(docname)
    kinds = Counter({key: len(docs) for key, docs in groups.items()})
    # One machine once: "CPU (X)" and "CPU (X, 2 cores)" are the same CPU.
    devices = sorted(
        {
            re.sub(r", \d+ cores?\)$", ")", p.get("base_device") or p["device"])
            for p in provenance.values()
        }
    )
    parts = []
    for (profile, source), n in sorted(kinds.items(), key=lambda kv: -kv[1]):
        words = DATA_WORDS.get(source, "(data source not recorded)")
        count = str(n)
        if len(kinds) > 1 and n <= NAMED and n < max(kinds.values()):
            count += ", " + ", ".join(titles.get(d, d) for d in sorted(groups[(profile, source)]))
            count += ","
        parts.append(f"{count} with the {profile} profile {words}")
    pages = len(provenance)
    if len(parts) == 1:
        every = "the one executed page" if pages == 1 else f"all {pages} executed pages"
        ran = f"{every} ran " + parts[0].split(" ", 1)[1]
    else:
        ran = f"of its {pages} executed pages, " + "; ".join(parts)
    return f"This build: {ran}, on {' and '.join(devices)}."


class build_summary_node(nodes.General, nodes.Element):
    pass


class BuildSummaryDirective(SphinxDirective):
    """``{guide-build-summary}``: :func:`build_summary` of this build, as a paragraph."""

    def run(self):
        return [build_summary_node()]


def _on_doctree_resolved(app, doctree, docname: str) -> None:
    for node in list(doctree.findall(build_summary_node)):
        titles = {d: t.astext() for d, t in app.env.titles.items()}
        summary = build_summary(getattr(app.env, ATTR, {}), titles)
        node.replace_self(nodes.paragraph(text=summary, classes=["guide-build-summary"]))
    for node in list(doctree.findall(provenance_table)):
        rows = provenance_rows(app)
        if not rows or not hasattr(app.builder, "get_relative_uri"):
            node.replace_self(nodes.paragraph(text="(No executed pages in this build.)"))
            continue
        node.replace_self(_table(app, docname, rows))


def _on_build_finished(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    rows = provenance_rows(app)
    (Path(app.outdir) / "_static" / "provenance.json").write_text(json.dumps(rows, indent=1))
    logger.info(f"[guide] provenance of {len(rows)} pages")


def setup(app) -> None:
    envdata.keep_per_page(app, ATTR)
    app.add_node(
        provenance_table,
        html=(lambda self, node: None, lambda self, node: None),
    )
    app.add_directive("guide-provenance", ProvenanceDirective)
    app.add_node(build_summary_node, html=(lambda self, node: None, lambda self, node: None))
    app.add_directive("guide-build-summary", BuildSummaryDirective)
    # Before the parallel feature orders the pages for its workers.
    app.connect("env-before-read-docs", _on_env_before_read, priority=400)
    app.connect("doctree-read", _on_doctree_read)
    app.connect("doctree-resolved", _on_doctree_resolved)
    app.connect("build-finished", _on_build_finished)
