"""Sourced ROCm compatibility data, and plain-language verdicts built on it.

The data lives in ``rocm_dl_guide/data/compatibility.json``. Every release,
GPU and driver entry there names the source it was transcribed from (AMD's
compatibility matrix, system requirements and AMD GPU Driver documentation);
a field a source does not give is simply absent. Nothing here guesses: a
combination the data does not cover gives the verdict ``"unknown"``.

Every release carries a ``stream``: ``legacy`` (the classic ``rocm-N.N.N``
line, installed under ``/opt/rocm``) or ``core-sdk`` (the ROCm Core SDK built
with TheRock, from 7.14.0 on: ``amdrocm-*`` packages under ``/opt/rocm/core``
or ``/opt/rocm/core-N.N``, and pip wheels). :func:`consistency_problems` says
what in the data does not hold together.

Matching rules (the same everywhere in this module):

* Versions are first cleaned with :func:`normalize_version`: the first run of
  up to three dot-separated numbers is kept, so ``"2.6.0+rocm6.4"`` becomes
  ``"2.6.0"`` and ``"6.4.1-120"`` becomes ``"6.4.1"``.
* A ROCm version is looked up with :func:`find_release`: an exact match on the
  release string, else the release with the same major.minor.patch, where
  missing parts count as 0 (``"6.4"`` means ``6.4.0``).
* Where AMD publishes a whole release line rather than its patch releases,
  the data has a line entry named ``N.N.x`` (``"5.7.x"``). The verdicts look a
  version up with :func:`resolve`: the release itself, else its line entry,
  else, for a release the data does not list, what every listed release of
  its line agrees on. The message then says the answer comes from the line.
  A version in no line of the data stays ``"unknown"``.
* PyTorch is compared on major.minor (``2.6.0+rocm6.4`` matches ``2.6``).
  TensorFlow, ONNX Runtime and MIGraphX are compared on as many parts as the
  source gives for the listed version, at most major.minor.patch (the
  matrix lists TensorFlow as ``2.19.1``, so ``2.19.0`` does not match it).
* The driver check reads the driver version as an AMD GPU Driver (amdgpu)
  release number (``30.30.3``; ``6.4.x`` for the drivers that shipped with ROCm
  6.4 and earlier) and uses its major.minor against the source's table.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

FRAMEWORKS: dict[str, str] = {
    "pytorch": "PyTorch",
    "tensorflow": "TensorFlow",
    "onnxruntime": "ONNX Runtime",
    "migraphx": "MIGraphX",
}

_VERSION_RE = re.compile(r"\d+(?:\.\d+){0,2}")
_LINE_RE = re.compile(r"\d+\.\d+\.x")
LINE_KEY = 10**6
"""The patch number a line entry (``5.7.x``) sorts as: above every patch release of its line."""
_GFX_RE = re.compile(r"gfx[0-9a-f]+")


@dataclass(frozen=True)
class Verdict:
    """The answer to one compatibility question."""

    status: str  # "supported" | "unsupported" | "unknown"
    message: str  # one plain-language sentence a reader understands
    sources: tuple[str, ...] = ()  # source ids backing the verdict


# --------------------------------------------------------------------------- data


@lru_cache(maxsize=1)
def _load() -> dict:
    text = (
        resources.files("rocm_dl_guide")
        .joinpath("data/compatibility.json")
        .read_text(encoding="utf-8")
    )
    return json.loads(text)


def data() -> dict:
    """The parsed data file (a copy: changing it does not change the cached data)."""
    return copy.deepcopy(_load())


def sources() -> dict[str, dict]:
    """Source id -> source record (title, url, publisher, version)."""
    return copy.deepcopy(_load().get("sources", {}))


def _releases() -> list[dict]:
    return _load().get("releases", [])


def rocm_releases() -> list[str]:
    """The ROCm releases and release lines (``5.7.x``) the data covers, newest
    first; a line comes before the patch releases of it that the data lists."""
    names = [r["rocm"] for r in _releases()]
    return sorted(names, key=release_key, reverse=True)


def is_line(name) -> bool:
    """Whether ``name`` names a whole release line (``"5.7.x"``), not one release."""
    return isinstance(name, str) and _LINE_RE.fullmatch(name.strip()) is not None


def line_entries(rocm_version) -> list[dict]:
    """The entries of ``rocm_version``'s release line, newest first: the line's own
    (``5.4.x``) and the patch releases of it that the data lists; empty when the
    version is in no line the data covers."""
    line = major_minor(normalize_version(rocm_version or ""))
    if line is None:
        return []
    return [r for r in _releases() if major_minor(r["rocm"].replace(".x", ".0")) == line]


def release_key(name) -> tuple[int, ...]:
    """Sort key of a release or line name: ``(5, 7, 1)``; ``(5, 7, LINE_KEY)`` for
    ``5.7.x``; ``(0, 0, 0)`` when unreadable."""
    if is_line(name):
        return _parts(name)[:2] + (LINE_KEY,)
    return _key(name) if isinstance(name, str) and _key(name) else (0, 0, 0)


def streams() -> dict[str, dict]:
    """Release stream id (``legacy``, ``core-sdk``) -> what the sources say about it."""
    return copy.deepcopy(_load().get("streams", {}))


def field_source(rel: dict, key: str) -> str:
    """The source id for one field of a release entry: its ``field_sources``
    entry if it has one, else the release's own ``source``."""
    return (rel.get("field_sources") or {}).get(key, rel.get("source", ""))


def stream_of(rocm_version) -> str | None:
    """The release stream of a ROCm version: the release's ``stream`` when the
    data has the release; else ``core-sdk`` from the Core SDK's first release
    on, ``legacy`` up to the newest legacy release in the data; else None
    (for example the 7.9 to 7.13 technology previews)."""
    rel = find_release(rocm_version)
    if rel is not None:
        return rel.get("stream")
    key = _key(normalize_version(rocm_version))
    if key is None:
        return None
    first = _key(_load().get("streams", {}).get("core-sdk", {}).get("first_release", ""))
    if first is not None and key >= first:
        return "core-sdk"
    legacy = [_key(r["rocm"]) for r in _releases() if r.get("stream") == "legacy"]
    if legacy and key <= max(legacy):
        return "legacy"
    return None


# ----------------------------------------------------------------------- versions


def major_minor(version: str | None) -> str | None:
    """``"major.minor"`` of a version string (``"6.4"`` from ``"6.4.1-120"``), or
    ``None`` when it has no two leading numbers.

    >>> major_minor("2.6.0+rocm6.4"), major_minor("7"), major_minor(None)
    ('2.6', None, None)
    """
    parts = normalize_version(version or "").split(".")
    return ".".join(parts[:2]) if len(parts) >= 2 and all(p.isdigit() for p in parts[:2]) else None


def normalize_version(v: str) -> str:
    """The first run of up to three dot-separated numbers in ``v``, or ``""``.

    >>> normalize_version("2.6.0+rocm6.4")
    '2.6.0'
    >>> normalize_version("6.4.1-120")
    '6.4.1'
    >>> normalize_version("not a version")
    ''
    """
    if isinstance(v, bool) or v is None:
        return ""
    if isinstance(v, (int, float)):
        v = str(v)
    if not isinstance(v, str):
        return ""
    m = _VERSION_RE.search(v)
    return m.group(0) if m else ""


def _parts(v: str) -> tuple[int, ...]:
    norm = normalize_version(v)
    return tuple(int(p) for p in norm.split(".")) if norm else ()


def _key(v: str, n: int = 3) -> tuple[int, ...] | None:
    """The first ``n`` numeric parts of ``v``, padded with zeros; None if unparseable."""
    parts = _parts(v)
    if not parts:
        return None
    return (parts + (0,) * n)[:n]


def _fmt(v) -> str:
    return str(v).strip() if v not in (None, "") else "(none given)"


def find_release(rocm_version: str) -> dict | None:
    """The release entry for ``rocm_version``, or None.

    Rule: an exact match on the release string (after :func:`normalize_version`),
    else the release with the same major.minor.patch, missing parts counting as
    0 (so ``"6.4.1-120"`` finds 6.4.1 and ``"6.4"`` finds 6.4.0). A release
    that only shares major.minor is *not* a match: patch releases can differ.
    A line entry is found only by its own name (``"5.7.x"``); :func:`resolve`
    answers a patch release from its line.
    """
    if is_line(rocm_version):
        name = rocm_version.strip()
        return next((copy.deepcopy(r) for r in _releases() if r.get("rocm") == name), None)
    norm = normalize_version(rocm_version)
    if not norm:
        return None
    for rel in _releases():
        if rel.get("rocm") == norm:
            return copy.deepcopy(rel)
    want = _key(norm)
    for rel in _releases():
        if not is_line(rel.get("rocm")) and _key(rel.get("rocm", "")) == want:
            return copy.deepcopy(rel)
    return None


@dataclass(frozen=True)
class Resolved:
    """The entry that answers one field for one ROCm version (see :func:`resolve`)."""

    rel: dict  # a release entry, a line entry, or the values a line's releases agree on
    rocm: str  # what the answer is given for: "6.2.4", "5.7.x" or "6.1.x"
    sources: tuple[str, ...]  # source ids backing the field
    note: str = ""  # "" when the release answers for itself; else the sentence that says how
    unknown: bool = False  # the line's releases disagree: ``note`` is the whole answer


def _field_name(field: str) -> str:
    return FRAMEWORKS.get(field, "GPU architectures" if field == "gfx" else field)


def _agreed(members: list[dict], field: str, version: str, line: str) -> Resolved:
    """What every listed release of a line gives for ``field``, when they agree."""
    names = ", ".join(r["rocm"] for r in members)
    givers = [r for r in members if r.get(field)]
    srcs = tuple(dict.fromkeys(field_source(r, field) for r in givers or members))
    values = {json.dumps(sorted(_listed(r, field))) for r in givers}
    name = _field_name(field)
    if len(values) != 1 or len(givers) != len(members):
        return Resolved(
            {"rocm": f"{line}.x"},
            f"{line}.x",
            srcs,
            f"ROCm {version} is not listed by itself, and the releases of the {line} line that "
            f"AMD lists ({names}) do not all give the same {name}, so it cannot be answered.",
            unknown=True,
        )
    rel = {"rocm": f"{line}.x", field: copy.deepcopy(givers[0][field])}
    note = f"ROCm {version} is not listed by itself; AMD's data for the {line} line ({names})"
    note += " says: "
    return Resolved(rel, f"{line}.x", srcs, note)


def resolve(rocm_version, field: str) -> Resolved | None:
    """Which entry answers ``field`` (``pytorch``, ``gfx`` ...) for ``rocm_version``.

    In order: the release itself (:func:`find_release`) when it gives the
    field; else its line entry (``5.7.x``, which AMD publishes for every patch
    release of the line) when that gives the field; else the release itself
    (the field is then not given); else, for a release the data does not list,
    what every listed release of its line gives, if they all give the same
    (``unknown`` set when they do not); else the line entry, which then does
    not give the field. None when the version is in no line of the data.
    """
    rel = find_release(rocm_version)
    if rel is not None and (rel.get(field) or is_line(rel["rocm"])):
        return Resolved(rel, rel["rocm"], (field_source(rel, field),))
    version = normalize_version(rocm_version)
    line = major_minor(version)
    entry = find_release(f"{line}.x") if line else None
    members = [r for r in _releases() if not is_line(r["rocm"]) and major_minor(r["rocm"]) == line]
    if entry is not None and (entry.get(field) or (rel is None and not members)):
        what = f" for {_field_name(field)}" if rel is not None else ""
        note = f"ROCm {version} is not listed by itself{what}; "
        note += f"AMD's data for the {line} line says: "
        return Resolved(entry, entry["rocm"], (field_source(entry, field),), note)
    if rel is not None:
        return Resolved(rel, rel["rocm"], (field_source(rel, field),))
    return _agreed(members, field, version, line) if line and members else None


def _no_release(rocm_version) -> Verdict:
    norm = normalize_version(rocm_version)
    if not norm:
        return Verdict(
            "unknown",
            f"Could not read a ROCm version from {_fmt(rocm_version)!r}, "
            "so nothing could be checked.",
        )
    names = rocm_releases()
    return Verdict(
        "unknown",
        f"The guide has no sourced compatibility data for ROCm {norm} or its release line "
        f"(it covers {len(names)} releases and release lines, {names[-1]} to {names[0]}).",
    )


# ---------------------------------------------------------------------- frameworks


def _framework_key(framework) -> str:
    key = ""
    if isinstance(framework, str):
        key = re.sub(r"[\s_-]+", "", framework.strip().lower())
    aliases = {"torch": "pytorch", "tf": "tensorflow", "ort": "onnxruntime"}
    key = aliases.get(key, key)
    if key not in FRAMEWORKS:
        raise ValueError(
            f"unknown framework {framework!r}: expected one of {', '.join(FRAMEWORKS)}"
        )
    return key


def _listed(rel: dict, key: str) -> list[str]:
    value = rel.get(key)
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


def alternatives(rel: dict, key: str) -> list[dict]:
    """Values another source gives for a release's field where the sources
    disagree: ``[{"value": ..., "source": ...}]`` (``[]`` when they agree)."""
    return list(rel.get(f"{key}_alternatives") or [])


def _matches(framework: str, installed: str, listed: str) -> bool:
    have = _parts(installed)
    want = _parts(listed)
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
    key = _framework_key(framework)
    res = resolve(rocm_version, key)
    if res is None:
        return _no_release(rocm_version)
    if res.unknown:
        return Verdict("unknown", res.note, res.sources)
    return _from_line(res, _framework_verdict(key, framework_version, res))


def _from_line(res: Resolved, verdict: Verdict) -> Verdict:
    """``verdict`` with the sentence saying it was answered from a release line."""
    if not res.note:
        return verdict
    return Verdict(verdict.status, res.note + verdict.message, verdict.sources)


def _framework_verdict(key: str, framework_version, res: Resolved) -> Verdict:
    name = FRAMEWORKS[key]
    rel, rocm, src = res.rel, res.rocm, res.sources
    listed = _listed(rel, key)
    if not listed:
        return Verdict(
            "unknown",
            f"The guide's source for ROCm {rocm} does not list {name} versions, "
            f"so {name} support cannot be confirmed.",
            src,
        )
    norm = normalize_version(framework_version)
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
    alt = next((a for a in alternatives(rel, key) if _matches(key, norm, a["value"])), None)
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


def _norm_gfx(gfx) -> str:
    if not isinstance(gfx, str):
        return ""
    m = _GFX_RE.search(gfx.strip().lower())
    return m.group(0) if m else ""


def _gpu_entry(gfx: str) -> dict | None:
    for e in _load().get("gpus", []):
        if e.get("gfx") == gfx:
            return e
    return None


def marketing_names(gfx: str) -> list[str]:
    """Product names the sources give for a gfx target (``[]`` if none)."""
    e = _gpu_entry(_norm_gfx(gfx))
    return list(e.get("names", [])) if e else []


def check_gpu(gfx: str, rocm_version: str) -> Verdict:
    """Is the GPU architecture ``gfx`` (e.g. ``gfx942``, or a rocminfo name such as
    ``gfx90a:sramecc+:xnack-``) listed for ``rocm_version`` on Linux?"""
    res = resolve(rocm_version, "gfx")
    if res is None:
        return _no_release(rocm_version)
    if res.unknown:
        return Verdict("unknown", res.note, res.sources)
    return _from_line(res, _gpu_verdict(_norm_gfx(gfx), gfx, res))


def _gpu_verdict(target: str, gfx, res: Resolved) -> Verdict:
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
            f"The guide's source for ROCm {rocm} lists {what}, so {target} cannot be confirmed.",
            tuple(src),
        )
    entry = _gpu_entry(target)
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


def _series_match(pattern: str, version: tuple[int, ...]) -> bool:
    """Does ``version`` (3 parts) match a source entry like ``7.2.x``, ``30.10`` or ``10.0.0``?"""
    pattern = pattern.strip().lower()
    if pattern.endswith(".x"):
        head = _parts(pattern[:-2])
        return bool(head) and version[: len(head)] == head
    want = _key(pattern)
    return want is not None and want == version


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
    rocm_norm = normalize_version(rocm_version)
    drv_norm = normalize_version(driver_version)
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
    rocm_v = _key(rocm_norm)
    drv_v = _key(drv_norm)
    rows = _load().get("kernel_driver", [])
    row = next((r for r in rows if _series_match(r["amdgpu"], drv_v)), None)
    rel = find_release(rocm_norm)
    rel_listed = rel.get("amdgpu", []) if rel else []
    rocm_known = rel is not None or any(_series_match(p, rocm_v) for r in rows for p in r["rocm"])
    if not rocm_known:
        return _no_release(rocm_norm)

    backing: list[str] = []
    if row and any(_series_match(p, rocm_v) for p in row["rocm"]):
        backing.append(row["source"])
    if rel and any(_series_match(p, drv_v) for p in rel_listed):
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
        f"Driver version {drv_norm} is not an AMD GPU Driver release the guide's sources "
        f"list ({known}); a distribution's built-in amdgpu module or a DKMS module version "
        "cannot be matched, so support with ROCm "
        f"{rocm_norm} is unknown.",
        srcs,
    )


# -------------------------------------------------------------------------- tables


def _framework_cell(rel: dict, key: str) -> str:
    listed = _listed(rel, key)
    text = ", ".join(listed) if listed else "not listed"
    alts = alternatives(rel, key)
    if not alts:
        return text
    own = f"{text} ({field_source(rel, key)})"
    return "; ".join([own] + [f"{a['value']} ({a['source']})" for a in alts])


def framework_table(framework: str):
    """One row per ROCm release (newest first): ROCm, its release stream, the
    framework's listed versions joined by ', ', and the source id. Where sources
    disagree on a release's versions, the cell gives each value with the id of
    the source that states it. For rendering on a book page."""
    import pandas as pd

    key = _framework_key(framework)
    name = FRAMEWORKS[key]
    rows = []
    for rocm in rocm_releases():
        rel = find_release(rocm)
        rows.append(
            {
                "ROCm": rocm,
                "Stream": rel.get("stream", ""),
                name: _framework_cell(rel, key),
                "Source": field_source(rel, key) if _listed(rel, key) else rel["source"],
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
        rel = find_release(r) or {}
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

    with_gpus = {r["rocm"] for r in _releases() if r.get("gfx")}
    order = [r for r in rocm_releases() if r in with_gpus]
    rows = []
    for e in _load().get("gpus", []):
        span = _release_span(_gpu_releases(e["gfx"], order), order)
        if e.get("added_in"):
            span = f"added in {e['added_in']} ({e.get('stream', '')}); " + span
        rows.append(
            {
                "gfx target": e["gfx"],
                "Architecture": e.get("architecture", ""),
                "Names": ", ".join(e.get("names", [])),
                "Integrated (APU)": "yes" if e.get("integrated") else "",
                "ROCm releases": span,
                "Source": e["source"],
            }
        )
    columns = ["gfx target", "Architecture", "Names", "Integrated (APU)", "ROCm releases"]
    return pd.DataFrame(rows, columns=columns + ["Source"])


def apus(stream: str | None = None) -> list[dict]:
    """The integrated GPUs (APUs) in the data, optionally only those of one
    release stream: ``[{"gfx", "names", "added_in", "source"}]``."""
    out = []
    for e in _load().get("gpus", []):
        if e.get("integrated") and (stream is None or e.get("stream") == stream):
            out.append({k: copy.deepcopy(e.get(k)) for k in ("gfx", "names", "added_in", "source")})
    return out


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
        for e in _load().get("gpus", [])
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
        for r in _load().get("kernel_driver", [])
    ]
    columns = ["AMD GPU Driver (amdgpu)", "Supported ROCm releases", "Source"]
    return pd.DataFrame(rows, columns=columns)


GUIDE_FRAMEWORK_RULE = (
    "Generally, ROCm release supports the most recent and two prior releases of PyTorch "
    "and Tensorflow."
)
"""The guide's rule for which framework releases a ROCm release supports, verbatim."""


def kernel_driver_policy() -> dict[str, str]:
    """AMD's stated window between the kernel driver and the ROCm user space:
    ``{"text": ..., "source": source id}`` from the data."""
    return dict(_load().get("kernel_driver_policy") or {})


def _minor_run(versions: list[str]) -> int:
    """How many of ``versions`` (newest first) are consecutive minor releases of
    one major, counting from the newest: 3 for 2.13, 2.12, 2.11."""
    keys = [_key(normalize_version(v), 2) for v in versions]
    run = 1 if keys and keys[0] else 0
    for newer, older in zip(keys, keys[1:], strict=False):
        if not newer or not older or older[0] != newer[0] or older[1] != newer[1] - 1:
            break
        run += 1
    return run


def framework_window_table(framework: str):
    """Per ROCm release, the framework releases the data lists and whether they are
    "the most recent and two prior" releases, the guide's rule
    (:data:`GUIDE_FRAMEWORK_RULE`)."""
    import pandas as pd

    key = _framework_key(framework)
    rows = []
    for rel in _releases():
        listed = _listed(rel, key)
        if not listed:
            continue
        ordered = sorted(listed, key=lambda v: _key(normalize_version(v), 3) or (), reverse=True)
        run = _minor_run(ordered)
        rows.append(
            {
                "ROCm": rel["rocm"],
                f"{framework} releases listed": ", ".join(ordered),
                "newest and consecutive prior": run,
                "the guide's rule (newest + two prior)": "yes" if run >= 3 else "no",
                "Source": field_source(rel, key),
            }
        )
    return pd.DataFrame(rows)


def source_links() -> dict[str, dict[str, str]]:
    """``{"Source": {source id: url}}``, for :func:`rocm_dl_guide.core.tables.show`."""
    return {"Source": {key: src.get("url", "") for key, src in sources().items()}}


# --------------------------------------------------------------------- consistency

MAX_CHECKS = 5
MAX_CHECK_CHARS = 60


def _source_refs(doc: dict):
    """Every (where, source id) pair the data cites."""
    for rel in doc.get("releases", []):
        yield f"release {rel.get('rocm')}", rel.get("source")
        for field, sid in (rel.get("field_sources") or {}).items():
            yield f"release {rel.get('rocm')} field {field}", sid
        for key in FRAMEWORKS:
            for alt in rel.get(f"{key}_alternatives") or []:
                yield f"release {rel.get('rocm')} {key} alternative", alt.get("source")
    for what in ("kernel_driver", "gpus"):
        for entry in doc.get(what, []):
            yield f"{what} {entry.get('amdgpu') or entry.get('gfx')}", entry.get("source")
    for name, stream in (doc.get("streams") or {}).items():
        for field, sid in stream.items():
            if field == "source" or field.endswith("_source"):
                yield f"stream {name} {field}", sid
    for what in ("kernel_driver_policy", "known_latest"):
        if what in doc:
            yield what, doc[what].get("source")
            for field, sid in doc[what].items():
                if field.endswith("_source"):
                    yield f"{what} {field}", sid


def _source_problems(doc: dict) -> list[str]:
    srcs = doc.get("sources", {})
    problems = [
        f"{where}: unknown source {sid!r}" for where, sid in _source_refs(doc) if sid not in srcs
    ]
    for sid, rec in srcs.items():
        checks = rec.get("checks")
        if not isinstance(checks, list) or len(checks) > MAX_CHECKS:
            problems.append(f"source {sid}: 'checks' must be a list of at most {MAX_CHECKS}")
            continue
        for c in checks:
            if not isinstance(c, str) or not c.strip() or len(c) > MAX_CHECK_CHARS:
                problems.append(f"source {sid}: check {c!r} is not a short string")
    return problems


def _release_problems(doc: dict) -> list[str]:
    problems = []
    rels = doc.get("releases", [])
    valid = set(doc.get("streams") or {})
    keys = [release_key(r.get("rocm")) for r in rels]
    if keys != sorted(keys, reverse=True):
        problems.append("releases are not sorted newest first")
    if len(set(keys)) != len(keys):
        problems.append("a ROCm release is listed twice")
    for rel in rels:
        name = rel.get("rocm")
        if not is_line(name) and not re.fullmatch(r"\d+\.\d+\.\d+", str(name)):
            problems.append(f"release {name!r}: not a release (N.N.N) or a release line (N.N.x)")
    gpu_gfx = {g.get("gfx") for g in doc.get("gpus", [])}
    drivers = [r["amdgpu"] for r in doc.get("kernel_driver", [])]
    for rel in rels:
        rocm = rel.get("rocm")
        if rel.get("stream") not in valid:
            problems.append(f"release {rocm}: stream {rel.get('stream')!r} not in {sorted(valid)}")
        for gfx in (rel.get("gfx") or []) + (rel.get("gfx_added") or []):
            if gfx not in gpu_gfx:
                problems.append(f"release {rocm}: {gfx} has no entry in 'gpus'")
        for drv in rel.get("amdgpu") or []:
            v = _key(drv.replace(".x", ""))
            if v is None or not any(_series_match(d, v) for d in drivers):
                problems.append(f"release {rocm}: driver {drv} is not in the driver table")
    return problems


def _cross_problems(doc: dict) -> list[str]:
    problems = []
    rels = doc.get("releases", [])
    rel_keys = [_key(r.get("rocm", "")) for r in rels]
    oldest = min((k for k in rel_keys if k), default=None)
    for row in doc.get("kernel_driver", []):
        for pattern in row.get("rocm", []):
            head = _key(pattern.replace(".x", ""))
            if head is None:
                problems.append(f"driver {row.get('amdgpu')}: unreadable ROCm {pattern!r}")
            elif oldest is not None and head >= oldest[:2] + (0,):
                if not any(k and _series_match(pattern, k) for k in rel_keys):
                    problems.append(f"driver {row.get('amdgpu')}: ROCm {pattern} is not a release")
    in_release = {g for r in rels for g in (r.get("gfx") or []) + (r.get("gfx_added") or [])}
    for gpu in doc.get("gpus", []):
        if gpu.get("gfx") not in in_release and not gpu.get("note"):
            problems.append(f"gpu {gpu.get('gfx')}: in no release and has no note saying why")
    latest = (doc.get("known_latest") or {}).get("rocm")
    if latest and rels and latest != rels[0].get("rocm"):
        problems.append(f"known_latest.rocm {latest} is not the newest release")
    return problems


def consistency_problems(doc: dict | None = None) -> list[str]:
    """Everything in the data file (or in ``doc``, a parsed copy of it) that
    does not hold together, one sentence each; ``[]`` when all is well.

    Checked: every cited source exists and every source's ``checks`` is a list
    of at most five short strings; releases are unique, sorted newest first
    (a line ``N.N.x`` above its patch releases), named ``N.N.N`` or ``N.N.x``
    and have a valid ``stream``; every gfx target a release names has a ``gpus``
    entry, and every ``gpus`` entry is in a release or says why not; every
    driver a release lists is in the driver table; every ROCm version the
    driver table names from the oldest release on is a release; and
    ``known_latest.rocm`` is the newest release.
    """
    doc = _load() if doc is None else doc
    return _source_problems(doc) + _release_problems(doc) + _cross_problems(doc)
