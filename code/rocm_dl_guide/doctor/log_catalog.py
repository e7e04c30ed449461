"""The error reader's answer where its own rules know no message: ROCm's catalogs.

:func:`catalog_findings` names the lines that ROCm's own catalogs know (HIP
errors, HSA statuses, the runtime's fault lines, amdgpu's kernel messages;
:mod:`~rocm_dl_guide.doctor.catalogs`, generated from upstream's files), and
:func:`unknown_text` says, for a text with no known message at all, which layers
its lines come from and what to collect for each: "no message the doctor knows"
never stands alone.
"""

from __future__ import annotations

import re

from . import catalogs
from .log_details import Finding, Rule

MAX_CATALOG = 4
"""The most catalog findings one text gets (the first distinct entries)."""


def catalog_findings(lines: list[str], taken: set[int]) -> list[Finding]:
    """The lines no rule of :data:`RULES` explained that ROCm's own catalogs name
    (:func:`catalogs.lookup`: HIP errors, HSA statuses, the runtime's fault lines,
    amdgpu's kernel messages), each with upstream's words, what its family means
    and what to collect next; the first :data:`MAX_CATALOG` distinct entries."""
    out: list[Finding] = []
    names: set[str] = set()
    for n, raw in enumerate(lines, 1):
        if n in taken or len(out) >= MAX_CATALOG:
            continue
        hit = catalogs.lookup(raw.strip())
        if hit is None or hit.name in names:
            continue
        names.add(hit.name)
        number = f" ({hit.number})" if hit.number is not None else ""
        if hit.kind in ("hip", "hsa"):
            title = f"{hit.name}{number}: {hit.description}".rstrip(". ")
        else:  # a kernel or runtime message: its family, and upstream's format string
            where = "the amdgpu kernel driver" if hit.kind == "kernel" else "the ROCm runtime"
            title = f'{hit.family.replace("-", " ")} ({where}: "{hit.description.strip()}")'
        rule = Rule(
            f"catalog:{hit.family}",
            "",
            title,
            hit.meaning,
            "collect: " + "; ".join(hit.collect),
            (catalogs.source_url(hit.source),),
        )
        found = Finding(rule, raw.strip()[:300], n)
        reason = hit.fields.get("reason") if hit.fields else None
        file = re.search(r"\b[\w/.-]+\.bin\b", raw)  # a firmware file the line names
        found.details = (
            f"reason: {reason}" if reason else f"the file: {file.group(0)}" if file else ""
        )
        out.append(found)
    return out


def unknown_text(text: str) -> str:
    """What an unrecognised text is, by the layers its lines come from
    (:func:`catalogs.classify_source`), and what to collect for each."""
    layers: dict[str, int] = {}
    for line in text.splitlines():
        layer = catalogs.classify_source(line.strip())
        if layer:
            layers[layer] = layers.get(layer, 0) + 1
    if not layers:
        return (
            "no message the doctor knows, and no line says which layer it comes from: run "
            "doctor on the machine itself, and add the first error line and the command that "
            "printed it"
        )
    out = ["no message the doctor knows; its lines come from:"]
    dkms = re.search(r"(?<!no-)dkms", text, re.IGNORECASE)  # a DKMS build shown
    for layer, count in sorted(layers.items(), key=lambda kv: -kv[1]):
        items = [c for c in catalogs.what_to_collect(layer) if dkms or "dkms" not in c.lower()]
        collect = "; ".join(items) or "the whole output"
        out.append(f"  {layer} ({count} line{'s' if count > 1 else ''}): collect {collect}")
    missing = sorted(set(re.findall(r"Unable to locate package (\S+)", text)))
    if missing:
        out.append(
            f"  apt found no package {', '.join(missing)} in the repositories configured: the "
            "release those repositories are for (repo.radeon.com/.../VERSION in the lines above) "
            "does not ship it; check which release provides it before changing anything else"
        )
    return "\n  ".join(out)
