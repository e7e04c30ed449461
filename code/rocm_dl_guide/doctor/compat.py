"""Plain-language compatibility verdicts and the book's tables, built on the sourced data.

The data and its lookups (:func:`~.compat_data.find_release`,
:func:`~.compat_data.resolve`, :func:`~.compat_data.normalize_version` ...) are
:mod:`~rocm_dl_guide.doctor.compat_data`'s. This module answers the doctor's
questions with a :class:`Verdict` (:func:`check_framework`, :func:`check_gpu`,
:func:`check_kernel_driver`) and renders the data as the tables of the setup
chapter (:func:`framework_table`, :func:`gpu_table`, ...). Nothing here
guesses: a combination the data does not cover gives the verdict
``"unknown"``, and an answer taken from a release line (``5.7.x``) says so.

Comparison rules:

* PyTorch is compared on major.minor (``2.6.0+rocm6.4`` matches ``2.6``).
  TensorFlow, ONNX Runtime and MIGraphX are compared on as many parts as the
  source gives for the listed version, at most major.minor.patch (the
  matrix lists TensorFlow as ``2.19.1``, so ``2.19.0`` does not match it).
* The driver check reads the driver version as an AMD GPU Driver (amdgpu)
  release number (``30.30.3``; ``6.4.x`` for the drivers that shipped with ROCm
  6.4 and earlier) and uses its major.minor against the source's table.
"""

from __future__ import annotations

from dataclasses import dataclass

from . import compat_data


@dataclass(frozen=True)
class Verdict:
    """The answer to one compatibility question."""

    status: str  # "supported" | "unsupported" | "unknown"
    message: str  # one plain-language sentence a reader understands
    sources: tuple[str, ...] = ()  # source ids backing the verdict


def _fmt(v) -> str:
    return str(v).strip() if v not in (None, "") else "(none given)"


def _no_release(rocm_version) -> Verdict:
    norm = compat_data.normalize_version(rocm_version)
    if not norm:
        return Verdict(
            "unknown",
            f"Could not read a ROCm version from {_fmt(rocm_version)!r}, "
            "so nothing could be checked.",
        )
    names = compat_data.rocm_releases()
    return Verdict(
        "unknown",
        f"The guide has no sourced compatibility data for ROCm {norm} or its release line "
        f"(it covers {len(names)} releases and release lines, {names[-1]} to {names[0]}).",
    )


# ---------------------------------------------------------------------- frameworks


def _matches(framework: str, installed: str, listed: str) -> bool:
    have = compat_data.version_parts(installed)
    want = compat_data.version_parts(listed)
    if not have or not want:
        return False
    n = 2 if framework == "pytorch" else min(len(want), 3)
    pad = (0, 0, 0)
    return (have + pad)[:n] == (want + pad)[:n]


def check_framework(framework: str, framework_version: str, rocm_version: str) -> Verdict:
    """Is ``framework`` at ``framework_version`` listed for ``rocm_version``?

    ``framework`` is one of ``pytorch``, ``tensorflow``, ``onnxruntime``,
    ``migraphx`` (case-insensitive; ``torch``, ``tf`` and ``ort`` are accepted);
    anything else raises :class:`ValueError`. See the module docstring for how
    versions are compared. Everything else that cannot be answered from the
    data gives ``"unknown"``.
    """
    key = compat_data.framework_key(framework)
    res = compat_data.resolve(rocm_version, key)
    if res is None:
        return _no_release(rocm_version)
    if res.unknown:
        return Verdict("unknown", res.note, res.sources)
    return _from_line(res, _framework_verdict(key, framework_version, res))


def _from_line(res: compat_data.Resolved, verdict: Verdict) -> Verdict:
    """``verdict`` with the sentence saying it was answered from a release line."""
    if not res.note:
        return verdict
    return Verdict(verdict.status, res.note + verdict.message, verdict.sources)


def _framework_verdict(key: str, framework_version, res: compat_data.Resolved) -> Verdict:
    name = compat_data.FRAMEWORKS[key]
    rel, rocm, src = res.rel, res.rocm, res.sources
    listed = compat_data.listed_values(rel, key)
    if not listed:
        return Verdict(
            "unknown",
            f"This guide's source for ROCm {rocm} does not list {name} versions, "
            f"so {name} support cannot be confirmed.",
            src,
        )
    norm = compat_data.normalize_version(framework_version)
    if not norm:
        return Verdict(
            "unknown",
            f"Could not read a {name} version from {_fmt(framework_version)!r}; "
            f"ROCm {rocm} lists {name} {', '.join(listed)}.",
            src,
        )
    hits = [v for v in listed if _matches(key, norm, v)]
    if hits:
        how = " (compared on major.minor)" if key == "pytorch" else ""
        return Verdict(
            "supported",
            f"{name} {norm} is listed for ROCm {rocm} (as {hits[0]}){how}.",
            src,
        )
    alt = next(
        (a for a in compat_data.alternatives(rel, key) if _matches(key, norm, a["value"])), None
    )
    if alt is not None:
        return Verdict(
            "supported",
            f"{name} {norm} is listed for ROCm {rocm} by {alt['source']}; AMD's "
            f"compatibility matrix lists {', '.join(listed)} instead.",
            src + (alt["source"],),
        )
    return Verdict(
        "unsupported",
        f"{name} {norm} is not among the versions AMD lists for ROCm {rocm} ({', '.join(listed)}).",
        src,
    )


# ---------------------------------------------------------------------------- GPUs


def check_gpu(gfx: str, rocm_version: str) -> Verdict:
    """Is the GPU architecture ``gfx`` (e.g. ``gfx942``, or a rocminfo name such as
    ``gfx90a:sramecc+:xnack-``) listed for ``rocm_version`` on Linux?"""
    res = compat_data.resolve(rocm_version, "gfx")
    if res is None:
        return _no_release(rocm_version)
    if res.unknown:
        return Verdict("unknown", res.note, res.sources)
    return _from_line(res, _gpu_verdict(compat_data.normalize_gfx(gfx), gfx, res))


def _gpu_verdict(target: str, gfx, res: compat_data.Resolved) -> Verdict:
    rel, rocm, src = res.rel, res.rocm, list(res.sources)
    if not target:
        return Verdict(
            "unknown",
            f"Could not read a GPU architecture (gfx target) from {_fmt(gfx)!r}.",
            tuple(src),
        )
    listed = rel.get("gfx") or []
    added = rel.get("gfx_added") or []
    if not listed and target not in added:
        what = "only the GPU architectures it adds" if added else "no GPU architectures"
        return Verdict(
            "unknown",
            f"This guide's source for ROCm {rocm} lists {what}, so {target} cannot be confirmed.",
            tuple(src),
        )
    entry = compat_data.gpu_entry(target)
    names = ""
    if entry:
        names = f" ({', '.join(entry['names'])})"
        if entry.get("source") and entry["source"] not in src:
            src.append(entry["source"])
    if target in listed or target in added:
        return Verdict(
            "supported",
            f"{target}{names} is a supported GPU architecture for ROCm {rocm} on Linux.",
            tuple(src),
        )
    return Verdict(
        "unsupported",
        f"{target}{names} is not among the GPU architectures AMD lists for ROCm {rocm} "
        f"({', '.join(listed)}); it may still run, but without official support.",
        tuple(src),
    )


# --------------------------------------------------------------------- kernel driver


def check_kernel_driver(rocm_version: str, driver_version: str) -> Verdict:
    """Is the AMD GPU Driver (amdgpu) release ``driver_version`` supported with the ROCm
    user space ``rocm_version``?

    The driver version is read as an AMD GPU Driver release number (``30.30.3``,
    or ``6.4.x`` for drivers that shipped with ROCm 6.4 and earlier). It is
    matched on major.minor against the source's driver table, and against the
    driver list the compatibility matrix gives for the ROCm release. A version
    the table does not know (for example the version of the Linux kernel's own
    amdgpu module) gives ``"unknown"``.
    """
    rocm_norm = compat_data.normalize_version(rocm_version)
    drv_norm = compat_data.normalize_version(driver_version)
    if not rocm_norm:
        return Verdict(
            "unknown",
            f"Could not read a ROCm version from {_fmt(rocm_version)!r}, so the driver "
            "could not be checked.",
        )
    if not drv_norm:
        return Verdict(
            "unknown",
            f"Could not read an AMD GPU driver version from {_fmt(driver_version)!r}, "
            "so the driver could not be checked.",
        )
    rocm_v = compat_data.version_key(rocm_norm)
    drv_v = compat_data.version_key(drv_norm)
    rows = compat_data.kernel_driver_rows()
    row = next((r for r in rows if compat_data.series_match(r["amdgpu"], drv_v)), None)
    rel = compat_data.find_release(rocm_norm)
    rel_listed = rel.get("amdgpu", []) if rel else []
    rocm_known = rel is not None or any(
        compat_data.series_match(p, rocm_v) for r in rows for p in r["rocm"]
    )
    if not rocm_known:
        return _no_release(rocm_norm)

    backing: list[str] = []
    if row and any(compat_data.series_match(p, rocm_v) for p in row["rocm"]):
        backing.append(row["source"])
    if rel and any(compat_data.series_match(p, drv_v) for p in rel_listed):
        backing.append(rel["source"])
    if backing:
        return Verdict(
            "supported",
            f"AMD GPU Driver (amdgpu) {drv_norm} is supported with ROCm {rocm_norm}.",
            tuple(dict.fromkeys(backing)),
        )
    if row:
        srcs = [row["source"]] + ([rel["source"]] if rel and rel_listed else [])
        return Verdict(
            "unsupported",
            f"AMD GPU Driver (amdgpu) {drv_norm} ({row['amdgpu']}) is supported with ROCm "
            f"{', '.join(row['rocm'])}, not with ROCm {rocm_norm}.",
            tuple(dict.fromkeys(srcs)),
        )
    known = ", ".join(r["amdgpu"] for r in rows)
    srcs = tuple(dict.fromkeys(r["source"] for r in rows))
    return Verdict(
        "unknown",
        f"Driver version {drv_norm} is not an AMD GPU Driver release this guide's sources "
        f"list ({known}); a distribution's built-in amdgpu module or a DKMS module version "
        "cannot be matched, so support with ROCm "
        f"{rocm_norm} is unknown.",
        srcs,
    )


# -------------------------------------------------------------------------- tables


def _framework_cell(rel: dict, key: str) -> str:
    listed = compat_data.listed_values(rel, key)
    text = ", ".join(listed) if listed else "not listed"
    alts = compat_data.alternatives(rel, key)
    if not alts:
        return text
    own = f"{text} ({compat_data.field_source(rel, key)})"
    return "; ".join([own] + [f"{a['value']} ({a['source']})" for a in alts])


def framework_table(framework: str):
    """One row per ROCm release (newest first): ROCm, its release stream, the
    framework's listed versions joined by ', ', and the source id. Where sources
    disagree on a release's versions, the cell gives each value with the id of
    the source that states it. For rendering on a book page."""
    import pandas as pd

    key = compat_data.framework_key(framework)
    name = compat_data.FRAMEWORKS[key]
    rows = []
    for rocm in compat_data.rocm_releases():
        rel = compat_data.find_release(rocm)
        given = compat_data.listed_values(rel, key)
        rows.append(
            {
                "ROCm": rocm,
                "Stream": rel.get("stream", ""),
                name: _framework_cell(rel, key),
                "Source": compat_data.field_source(rel, key) if given else rel["source"],
            }
        )
    return pd.DataFrame(rows, columns=["ROCm", "Stream", name, "Source"])


def _release_span(supported: list[str], order: list[str]) -> str:
    """Compact text for a set of releases: a contiguous run of the data's
    releases (newest first in ``order``) becomes "oldest to newest"."""
    if not supported:
        return "none in this data"
    idx = [order.index(r) for r in supported]
    if len(supported) > 2 and max(idx) - min(idx) + 1 == len(idx):
        return f"{supported[-1]} to {supported[0]} ({len(supported)} releases)"
    return ", ".join(supported)


def _gpu_releases(gfx: str, order: list[str]) -> list[str]:
    out = []
    for r in order:
        rel = compat_data.find_release(r) or {}
        if gfx in (rel.get("gfx") or []) or gfx in (rel.get("gfx_added") or []):
            out.append(r)
    return out


def gpu_table():
    """One row per gfx target: its architecture, product names, whether it is an
    integrated GPU (an APU), the ROCm releases in the data that list it among
    their GPUs (a run of consecutive releases among those whose sources give a
    GPU list is given as "oldest to newest"; a release that only names the GPUs
    it adds shows as "added in"), and the source of the names."""
    import pandas as pd

    with_gpus = {r["rocm"] for r in compat_data.releases() if r.get("gfx")}
    order = [r for r in compat_data.rocm_releases() if r in with_gpus]
    rows = []
    for e in compat_data.gpus():
        span = _release_span(_gpu_releases(e["gfx"], order), order)
        if e.get("added_in"):
            span = f"added in {e['added_in']} ({e.get('stream', '')}); " + span
        rows.append(
            {
                "gfx target": e["gfx"],
                "Arch.": e.get("architecture", ""),
                "Names": ", ".join(e.get("names", [])),
                "APU": "yes" if e.get("integrated") else "",
                "ROCm releases": span,
                "Source": e["source"],
            }
        )
    columns = ["gfx target", "Arch.", "Names", "APU", "ROCm releases"]
    return pd.DataFrame(rows, columns=columns + ["Source"])


def gpu_quick_table():
    """The table a reader needs first: one row per gfx target with its product
    names, the newest ROCm release in the data that lists it, that release's
    stream, and the PyTorch and TensorFlow versions it lists ("not listed" where
    its source lists none)."""
    import pandas as pd

    order = compat_data.rocm_releases()
    rows = []
    for e in compat_data.gpus():
        supported = _gpu_releases(e["gfx"], order)
        rel = compat_data.find_release(supported[0]) if supported else None
        rows.append(
            {
                "gfx target": e["gfx"],
                "Names": ", ".join(e.get("names", [])),
                "Newest ROCm": supported[0] if supported else "none in this data",
                "Stream": (rel or {}).get("stream", ""),
                "PyTorch": _framework_cell(rel, "pytorch") if rel else "",
                "TensorFlow": _framework_cell(rel, "tensorflow") if rel else "",
            }
        )
    return pd.DataFrame(rows)


def apu_table():
    """One row per integrated GPU (APU) target in the data: its product names,
    release stream, the release that added it (where a source says) and the
    source of the names."""
    import pandas as pd

    rows = [
        {
            "gfx target": e["gfx"],
            "Names": ", ".join(e.get("names") or []),
            "Stream": e.get("stream") or "",
            "Added in": e.get("added_in") or "",
            "Source": e["source"],
        }
        for e in compat_data.gpus()
        if e.get("integrated")
    ]
    return pd.DataFrame(rows, columns=["gfx target", "Names", "Stream", "Added in", "Source"])


def kernel_driver_table():
    """One row per AMD GPU Driver (amdgpu) release series: the ROCm user space
    releases it supports, as the source states them."""
    import pandas as pd

    rows = [
        {
            "AMD GPU Driver (amdgpu)": r["amdgpu"],
            "Supported ROCm releases": ", ".join(r["rocm"]),
            "Source": r["source"],
        }
        for r in compat_data.kernel_driver_rows()
    ]
    columns = ["AMD GPU Driver (amdgpu)", "Supported ROCm releases", "Source"]
    return pd.DataFrame(rows, columns=columns)


GUIDE_FRAMEWORK_RULE = (
    "Generally, ROCm release supports the most recent and two prior releases of PyTorch "
    "and Tensorflow."
)
"""The guide's rule for which framework releases a ROCm release supports, verbatim."""


def _minor_run(versions: list[str]) -> int:
    """How many of ``versions`` (newest first) are consecutive minor releases of
    one major, counting from the newest: 3 for 2.13, 2.12, 2.11."""
    keys = [compat_data.version_key(compat_data.normalize_version(v), 2) for v in versions]
    run = 1 if keys and keys[0] else 0
    for newer, older in zip(keys, keys[1:], strict=False):
        if not newer or not older or older[0] != newer[0] or older[1] != newer[1] - 1:
            break
        run += 1
    return run


def framework_window_table(framework: str):
    """Per ROCm release, the framework releases the data lists and whether they are
    "the most recent and two prior" releases, AMD's guide's rule
    (:data:`GUIDE_FRAMEWORK_RULE`)."""
    import pandas as pd

    key = compat_data.framework_key(framework)
    rows = []
    for rel in compat_data.releases():
        listed = compat_data.listed_values(rel, key)
        if not listed:
            continue
        ordered = sorted(
            listed,
            key=lambda v: compat_data.version_key(compat_data.normalize_version(v), 3) or (),
            reverse=True,
        )
        run = _minor_run(ordered)
        rows.append(
            {
                "ROCm": rel["rocm"],
                f"{framework} releases listed": ", ".join(ordered),
                "newest and consecutive prior": run,
                "AMD's rule (newest + two prior)": "yes" if run >= 3 else "no",
                "Source": compat_data.field_source(rel, key),
            }
        )
    return pd.DataFrame(rows)


def source_links() -> dict[str, dict[str, str]]:
    """``{"Source": {source id: url}}``, for :func:`rocm_dl_guide.core.tables.show`."""
    return {"Source": {key: src.get("url", "") for key, src in compat_data.sources().items()}}


_LABELS = (
    ("rocm-compat-matrix-historical-", "past matrix "),
    ("rocm-compat-matrix-", "matrix "),
    ("amdgpu-driver-compat-matrix", "amdgpu matrix"),
    ("rocm-linux-system-requirements-", "requirements "),
    ("rocm-release-notes-", "notes "),
    ("rocm-transition-guide-", "transition "),
    ("rocm-ai-ecosystem-migraphx-install", "MIGraphX install"),
    ("therock-python-packaging", "TheRock pip"),
    ("ai-ecosystem-pytorch-pip-", "PyTorch pip "),
    ("ai-ecosystem-pytorch-docker-", "PyTorch image "),
    ("ai-ecosystem-tensorflow-pip-", "TF pip "),
    ("ai-ecosystem-migraphx-pip-", "MIGraphX pip "),
    ("ai-ecosystem-onnxruntime-pip-", "ORT pip "),
    ("rocm-docs-gpus-data", "gpus.yaml"),
    ("rocm-third-party-support-matrix-", "3rd-party "),
    ("rocm-gpu-os-support-", "GPU/OS "),
)


def source_label(key: str) -> str:
    """A short name for the source ``key``, fit for a table cell:
    ``rocm-linux-system-requirements-7-0-0`` is ``requirements 7.0.0``. A key
    without a short name is kept whole."""
    for prefix, label in _LABELS:
        if key.startswith(prefix):
            release = key[len(prefix) :].replace("-", ".")
            return (label + release).strip()
    return key


def show(table, caption: str | None = None):
    """``table`` as :func:`rocm_dl_guide.core.tables.show` renders it, its Source
    column in short names (:func:`source_label`), each a link to its document."""
    from rocm_dl_guide.core import tables

    frame = table.copy()
    if "Source" in frame.columns:
        frame["Source"] = frame["Source"].map(source_label)
    urls = {source_label(k): s.get("url", "") for k, s in compat_data.sources().items()}
    return tables.show(frame, caption=caption, links={"Source": urls})
