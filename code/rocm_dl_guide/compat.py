"""Sourced ROCm compatibility data, and plain-language verdicts built on it.

The data lives in ``rocm_dl_guide/data/compatibility.json``. Every release,
GPU and driver entry there names the source it was transcribed from (AMD's
compatibility matrix, system requirements and AMD GPU Driver documentation);
a field a source does not give is simply absent. Nothing here guesses: a
combination the data does not cover gives the verdict ``"unknown"``.

Matching rules (the same everywhere in this module):

* Versions are first cleaned with :func:`normalize_version`: the first run of
  up to three dot-separated numbers is kept, so ``"2.6.0+rocm6.4"`` becomes
  ``"2.6.0"`` and ``"6.4.1-120"`` becomes ``"6.4.1"``.
* A ROCm version is looked up with :func:`find_release`: an exact match on the
  release string, else the release with the same major.minor.patch, where
  missing parts count as 0 (``"6.4"`` means ``6.4.0``).
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
    """The ROCm releases the data covers, newest first."""
    names = [r["rocm"] for r in _releases()]
    return sorted(names, key=lambda v: _key(v) or (0, 0, 0), reverse=True)


# ----------------------------------------------------------------------- versions


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
    """
    norm = normalize_version(rocm_version)
    if not norm:
        return None
    for rel in _releases():
        if rel.get("rocm") == norm:
            return copy.deepcopy(rel)
    want = _key(norm)
    for rel in _releases():
        if _key(rel.get("rocm", "")) == want:
            return copy.deepcopy(rel)
    return None


def _no_release(rocm_version) -> Verdict:
    norm = normalize_version(rocm_version)
    if not norm:
        return Verdict(
            "unknown",
            f"Could not read a ROCm version from {_fmt(rocm_version)!r}, "
            "so nothing could be checked.",
        )
    return Verdict(
        "unknown",
        f"The guide has no sourced compatibility data for ROCm {norm} "
        f"(it covers {', '.join(rocm_releases())}).",
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
    name = FRAMEWORKS[key]
    rel = find_release(rocm_version)
    if rel is None:
        return _no_release(rocm_version)
    rocm = rel["rocm"]
    src = (rel["source"],)
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
    target = _norm_gfx(gfx)
    rel = find_release(rocm_version)
    if rel is None:
        return _no_release(rocm_version)
    rocm = rel["rocm"]
    src = [rel["source"]]
    if not target:
        return Verdict(
            "unknown",
            f"Could not read a GPU architecture (gfx target) from {_fmt(gfx)!r}.",
            tuple(src),
        )
    listed = rel.get("gfx") or []
    if not listed:
        return Verdict(
            "unknown",
            f"The guide's source for ROCm {rocm} does not list GPU architectures.",
            tuple(src),
        )
    entry = _gpu_entry(target)
    names = ""
    if entry:
        names = f" ({', '.join(entry['names'])})"
        if entry.get("source") and entry["source"] not in src:
            src.append(entry["source"])
    if target in listed:
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


def framework_table(framework: str):
    """One row per ROCm release (newest first): ROCm, the framework's listed
    versions joined by ', ', and the source id. For rendering on a book page."""
    import pandas as pd

    key = _framework_key(framework)
    name = FRAMEWORKS[key]
    rows = []
    for rocm in rocm_releases():
        rel = find_release(rocm)
        listed = _listed(rel, key)
        rows.append(
            {
                "ROCm": rocm,
                name: ", ".join(listed) if listed else "not listed",
                "Source": rel["source"],
            }
        )
    return pd.DataFrame(rows, columns=["ROCm", name, "Source"])


def _release_span(supported: list[str], order: list[str]) -> str:
    """Compact text for a set of releases: a contiguous run of the data's
    releases (newest first in ``order``) becomes "oldest to newest"."""
    if not supported:
        return "none in this data"
    idx = [order.index(r) for r in supported]
    if len(supported) > 2 and max(idx) - min(idx) + 1 == len(idx):
        return f"{supported[-1]} to {supported[0]} ({len(supported)} releases)"
    return ", ".join(supported)


def gpu_table():
    """One row per gfx target: its architecture, product names, the ROCm releases
    in the data that list it, and the source of the names."""
    import pandas as pd

    order = rocm_releases()
    rows = []
    for e in _load().get("gpus", []):
        supported = [r for r in order if e["gfx"] in ((find_release(r) or {}).get("gfx") or [])]
        rows.append(
            {
                "gfx target": e["gfx"],
                "Architecture": e.get("architecture", ""),
                "Names": ", ".join(e.get("names", [])),
                "ROCm releases": _release_span(supported, order),
                "Source": e["source"],
            }
        )
    return pd.DataFrame(
        rows, columns=["gfx target", "Architecture", "Names", "ROCm releases", "Source"]
    )


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


def source_links() -> dict[str, dict[str, str]]:
    """``{"Source": {source id: url}}``, for :func:`rocm_dl_guide.tables.show`."""
    return {"Source": {key: src.get("url", "") for key, src in sources().items()}}
