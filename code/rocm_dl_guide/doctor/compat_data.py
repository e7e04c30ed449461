"""The sourced ROCm compatibility data, and the queries and version rules that read it.

The data lives in ``rocm_dl_guide/data/compatibility.json`` (read with
:func:`importlib.resources.files`, so it works from an installed package).
Every release, GPU and driver entry there names the source it was transcribed
from (AMD's compatibility matrix, system requirements and AMD GPU Driver
documentation); a field a source does not give is simply absent. This module
only reads and looks things up; :mod:`~rocm_dl_guide.doctor.compat` builds the
plain-language verdicts and the book's tables on it.

Every release carries a ``stream``: ``legacy`` (the classic ``rocm-N.N.N``
line, installed under ``/opt/rocm``) or ``core-sdk`` (the ROCm Core SDK built
with TheRock, from 7.14.0 on: ``amdrocm-*`` packages under ``/opt/rocm/core``
or ``/opt/rocm/core-N.N``, and pip wheels). :func:`consistency_problems` says
what in the data does not hold together.

Lookup rules (the same everywhere in the doctor):

* Versions are first cleaned with :func:`normalize_version`: the first run of
  up to three dot-separated numbers is kept, so ``"2.6.0+rocm6.4"`` becomes
  ``"2.6.0"`` and ``"6.4.1-120"`` becomes ``"6.4.1"``.
* A ROCm version is looked up with :func:`find_release`: an exact match on the
  release string, else the release with the same major.minor.patch, where
  missing parts count as 0 (``"6.4"`` means ``6.4.0``).
* Where AMD publishes a whole release line rather than its patch releases,
  the data has a line entry named ``N.N.x`` (``"5.7.x"``). A version's field is
  looked up with :func:`resolve`: the release itself, else its line entry,
  else, for a release the data does not list, what every listed release of
  its line agrees on (:class:`Resolved` carries the sentence that says so). A
  version in no line of the data resolves to nothing.
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


def releases() -> list[dict]:
    """The data's release and release-line entries (a copy), newest first."""
    return copy.deepcopy(_releases())


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
        return version_parts(name)[:2] + (LINE_KEY,)
    return version_key(name) if isinstance(name, str) and version_key(name) else (0, 0, 0)


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
    key = version_key(normalize_version(rocm_version))
    if key is None:
        return None
    first = version_key(_load().get("streams", {}).get("core-sdk", {}).get("first_release", ""))
    if first is not None and key >= first:
        return "core-sdk"
    legacy = [version_key(r["rocm"]) for r in _releases() if r.get("stream") == "legacy"]
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


def version_parts(v: str) -> tuple[int, ...]:
    """The numbers of ``v``'s :func:`normalize_version` (``(6, 4, 1)``); ``()`` if none."""
    norm = normalize_version(v)
    return tuple(int(p) for p in norm.split(".")) if norm else ()


def version_key(v: str, n: int = 3) -> tuple[int, ...] | None:
    """The first ``n`` numeric parts of ``v``, padded with zeros; None if unparseable."""
    parts = version_parts(v)
    if not parts:
        return None
    return (parts + (0,) * n)[:n]


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
    want = version_key(norm)
    for rel in _releases():
        if not is_line(rel.get("rocm")) and version_key(rel.get("rocm", "")) == want:
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
    values = {json.dumps(sorted(listed_values(r, field))) for r in givers}
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


# --------------------------------------------------------------- frameworks


def framework_key(framework) -> str:
    """The data's key for a framework name (``"PyTorch"``, ``"torch"`` -> ``"pytorch"``);
    :class:`ValueError` for a framework the data does not cover."""
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


def listed_values(rel: dict, key: str) -> list[str]:
    """The values a release entry lists for ``key``, as a list (``[]`` when absent)."""
    value = rel.get(key)
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


def alternatives(rel: dict, key: str) -> list[dict]:
    """Values another source gives for a release's field where the sources
    disagree: ``[{"value": ..., "source": ...}]`` (``[]`` when they agree)."""
    return list(rel.get(f"{key}_alternatives") or [])


# ---------------------------------------------------------------------------- GPUs


def normalize_gfx(gfx) -> str:
    """The gfx target in ``gfx`` (``"gfx90a"`` from ``"gfx90a:sramecc+:xnack-"``), or ``""``."""
    if not isinstance(gfx, str):
        return ""
    m = _GFX_RE.search(gfx.strip().lower())
    return m.group(0) if m else ""


def gpu_entry(gfx: str) -> dict | None:
    """The data's ``gpus`` entry for a normalised gfx target, or None."""
    for e in _load().get("gpus", []):
        if e.get("gfx") == gfx:
            return e
    return None


def marketing_names(gfx: str) -> list[str]:
    """Product names the sources give for a gfx target (``[]`` if none)."""
    e = gpu_entry(normalize_gfx(gfx))
    return list(e.get("names", [])) if e else []


def gpus() -> list[dict]:
    """The data's ``gpus`` entries (a copy), one per gfx target."""
    return copy.deepcopy(_load().get("gpus", []))


def apus(stream: str | None = None) -> list[dict]:
    """The integrated GPUs (APUs) in the data, optionally only those of one
    release stream: ``[{"gfx", "names", "added_in", "source"}]``."""
    out = []
    for e in _load().get("gpus", []):
        if e.get("integrated") and (stream is None or e.get("stream") == stream):
            out.append({k: copy.deepcopy(e.get(k)) for k in ("gfx", "names", "added_in", "source")})
    return out


# ------------------------------------------------------------------- kernel driver


def series_match(pattern: str, version: tuple[int, ...]) -> bool:
    """Does ``version`` (3 parts) match a source entry like ``7.2.x``, ``30.10`` or ``10.0.0``?"""
    pattern = pattern.strip().lower()
    if pattern.endswith(".x"):
        head = version_parts(pattern[:-2])
        return bool(head) and version[: len(head)] == head
    want = version_key(pattern)
    return want is not None and want == version


def kernel_driver_rows() -> list[dict]:
    """The AMD GPU Driver table (a copy): ``[{"amdgpu": "30.10", "rocm": [...], "source"}]``."""
    return copy.deepcopy(_load().get("kernel_driver", []))


def kernel_driver_policy() -> dict[str, str]:
    """AMD's stated window between the kernel driver and the ROCm user space:
    ``{"text": ..., "source": source id}`` from the data."""
    return dict(_load().get("kernel_driver_policy") or {})


# --------------------------------------------------------------------- consistency

MAX_CHECKS = 5
MAX_CHECK_CHARS = 60


def source_refs(doc: dict):
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
        f"{where}: unknown source {sid!r}" for where, sid in source_refs(doc) if sid not in srcs
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
            v = version_key(drv.replace(".x", ""))
            if v is None or not any(series_match(d, v) for d in drivers):
                problems.append(f"release {rocm}: driver {drv} is not in the driver table")
    return problems


def _cross_problems(doc: dict) -> list[str]:
    problems = []
    rels = doc.get("releases", [])
    rel_keys = [version_key(r.get("rocm", "")) for r in rels]
    oldest = min((k for k in rel_keys if k), default=None)
    for row in doc.get("kernel_driver", []):
        for pattern in row.get("rocm", []):
            head = version_key(pattern.replace(".x", ""))
            if head is None:
                problems.append(f"driver {row.get('amdgpu')}: unreadable ROCm {pattern!r}")
            elif oldest is not None and head >= oldest[:2] + (0,):
                if not any(k and series_match(pattern, k) for k in rel_keys):
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
