"""Builds ``data/pci-chips.json`` from the upstream files stored in ``data/upstream/chips/``.

The parsers read the stored files (``SOURCES.json`` there gives each one's
repository, commit, path, URL and line range):

- libdrm ``data/amdgpu.ids``: device ID, revision -> marketing name
- ``pci.ids``, the vendor 1002 block: device ID -> name with the chip codename
- Mesa ``src/amd/common/amd_family.h`` (``enum radeon_family``) and
  ``amd_family.c`` (``ac_get_llvm_processor_name()``): chip -> gfx target
- rocminfo's ``rocm_agent_enumerator`` (``ISA_TO_ID``) and libhsakmt's
  ``topology.c`` (``gfxip_lookup_table``), ROCm/rocm-systems: device ID -> gfx
- ROCm ``docs/reference/gpu-arch-specs.rst``: model -> LLVM target

:func:`build` gives each ID the gfx of the first route that yields exactly one
(``rocm-table``, ``codename``, ``product``, ``shared-name``; see
:mod:`~rocm_dl_guide.doctor.chips`) and records how, which routes agree and
where they disagree. :mod:`~rocm_dl_guide.doctor.chips` reads the result.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

UPSTREAM = Path(__file__).resolve().parent.parent / "data" / "upstream" / "chips"
"""The stored upstream files (a source checkout; an installed wheel has only the JSON)."""

FILES = {
    "amdgpu.ids": "amdgpu.ids",
    "pci.ids": "pci.ids.vendor-1002.txt",
    "mesa-amd_family.h": "mesa-amd_family.h",
    "mesa-amd_family.c": "mesa-amd_family.c",
    "rocm_agent_enumerator": "rocm_agent_enumerator.ISA_TO_ID.py.txt",
    "libhsakmt-topology": "libhsakmt-topology.gfxip_lookup_table.c.txt",
    "gpu-arch-specs": "gpu-arch-specs.rst",
}

# Mesa's enum joins two codenames into one chip name.
MESA_JOINED = {"RAPHAEL_MENDOCINO": ("Raphael", "Mendocino")}

ROUTES = ("rocm-table", "codename", "product", "shared-name")
NOT_GPU = re.compile(
    r"\b(?:Audio|USB|Port|Switch|Bridge|SATA|IDE|SMBus|LPC|Serial|Modem|AC'?97|IOMMU"
    r"|Dummy Function)\b|HDMI Controller",
    re.I,
)
"""pci.ids names of AMD functions that are not a GPU (HDMI audio, USB, PCIe switch ports)."""
_GFX_RE = re.compile(r"gfx[0-9a-f]{3,4}")


# --------------------------------------------------------------------------- parsers


def parse_amdgpu_ids(text: str) -> dict[int, list[tuple[int, str]]]:
    """amdgpu.ids -> {device ID: [(revision, name), ...]} in file order."""
    out: dict[int, list[tuple[int, str]]] = defaultdict(list)
    for line in text.splitlines():
        m = re.match(r"([0-9A-Fa-f]{4}),\s*([0-9A-Fa-f]{2}),\s*(.+?)\s*$", line)
        if m:
            out[int(m[1], 16)].append((int(m[2], 16), m[3]))
    return dict(out)


def parse_pci_ids(text: str) -> dict[int, str]:
    """The vendor 1002 block of pci.ids -> {device ID: device line text}."""
    out = {}
    for line in text.splitlines():
        m = re.match(r"\t([0-9a-f]{4})  (.+?)\s*$", line)
        if m:
            out[int(m[1], 16)] = m[2]
    return out


def codename_of(pci_name: str | None) -> str | None:
    """The codename part of a pci.ids device name: ``Navi 33 [Radeon ...]`` -> ``Navi 33``."""
    if not pci_name:
        return None
    return pci_name.split(" [", 1)[0].strip() or None


def parse_mesa_family(header: str) -> list[tuple[str, str]]:
    """amd_family.h -> [(chip, comment), ...] for ``enum radeon_family``, in order."""
    body = header.split("enum radeon_family", 1)[1].split("};", 1)[0]
    out = []
    for line in body.splitlines():
        m = re.match(r"\s*CHIP_(\w+)\s*(?:=\s*\w+)?,\s*(?:/\*\s*(.*?)\s*\*/)?", line)
        if m and m[1] not in ("UNKNOWN", "LAST"):
            out.append((m[1], m[2] or ""))
    return out


def parse_mesa_processors(source: str) -> dict[str, str]:
    """amd_family.c -> {chip: LLVM processor} from ``ac_get_llvm_processor_name()``."""
    body = source.split("ac_get_llvm_processor_name", 1)[1].split("\n}\n", 1)[0]
    out: dict[str, str] = {}
    pending: list[str] = []
    for line in body.splitlines():
        if m := re.match(r"\s*case CHIP_(\w+):", line):
            pending.append(m[1])
        elif m := re.match(r'\s*return "(\w*)";', line):
            for chip in pending:
                if m[1]:
                    out[chip] = m[1]
            pending = []
    return out


def parse_enumerator(text: str) -> dict[int, tuple[str, str]]:
    """rocm_agent_enumerator's ISA_TO_ID -> {device ID: (gfx, the comment above it)}."""
    out: dict[int, tuple[str, str]] = {}
    gfx = label = ""
    for line in text.splitlines():
        code, _, comment = line.partition("#")
        if comment.strip():
            label = comment.strip()
        if m := re.search(r'"(gfx[0-9a-f]+)"\s*:', code):
            gfx = m[1]
        for hexid in re.findall(r"0x([0-9a-fA-F]{4})", code):
            out.setdefault(int(hexid, 16), (gfx, label))
    return out


def gfx_from_version(major: int, minor: int, stepping: int) -> str:
    """(10, 3, 0) -> ``gfx1030``; (9, 0, 10) -> ``gfx90a``."""
    return f"gfx{major}{minor:x}{stepping:x}"


def parse_topology(text: str) -> dict[int, tuple[str, str]]:
    """libhsakmt's gfxip_lookup_table -> {device ID: (gfx, chip name)}."""
    out = {}
    pattern = r'\{\s*0x([0-9a-fA-F]+),\s*(\d+),\s*(\d+),\s*(\d+),\s*"([^"]*)"\s*\}'
    for m in re.finditer(pattern, text):
        out[int(m[1], 16)] = (gfx_from_version(int(m[2]), int(m[3]), int(m[4])), m[5])
    return out


def parse_arch_specs(text: str) -> dict[str, str]:
    """gpu-arch-specs.rst -> {model: LLVM target} from its list-tables."""
    rows: list[list[str]] = []
    current: list[str] | None = None
    for line in text.splitlines():
        item = line.strip()
        if item == "*":
            current = []
            rows.append(current)
        elif current is not None and (item == "-" or item.startswith("- ")):
            current.append(item[1:].strip())
        elif item:
            current = None
    out = {}
    column = None
    for row in rows:
        if "LLVM target name" in row:
            column = row.index("LLVM target name")
        elif column is not None and len(row) > column and _GFX_RE.fullmatch(row[column]):
            out[row[0]] = row[column]
    return out


# --------------------------------------------------------------------------- matching


def _key(text: str) -> str:
    """Upper-case letters and digits only; a trailing ``1`` after a letter dropped
    (pci.ids ``Phoenix1`` and Mesa ``STRIX1`` name the first die of a codename)."""
    key = re.sub(r"[^A-Z0-9]", "", text.upper())
    return key[:-1] if re.search(r"[A-Z]1$", key) else key


def mesa_keys(family: list[tuple[str, str]]) -> dict[str, tuple[str, str]]:
    """{name key: (chip, why)}: a chip's own name, its "formerly" names, MESA_JOINED."""
    keys: dict[str, tuple[str, str]] = {}
    for chip, comment in family:
        keys.setdefault(_key(chip), (chip, f"Mesa CHIP_{chip}"))
        for former in re.findall(r'formerly "([^"]+)"', comment):
            keys.setdefault(_key(former), (chip, f'Mesa CHIP_{chip} (formerly "{former}")'))
        for part in MESA_JOINED.get(chip, ()):
            keys.setdefault(
                _key(part),
                (chip, f"Mesa CHIP_{chip} (the enum joins {' and '.join(MESA_JOINED[chip])})"),
            )
    return keys


def match_chip(name: str | None, keys: dict[str, tuple[str, str]]) -> list[tuple[str, str]]:
    """The Mesa chips a codename names: for each ``/`` alternative, the longest
    run of words (leftmost first) whose key is a chip; Instinct ``MI100`` in brackets too."""
    if not name:
        return []
    code, _, bracket = name.partition(" [")
    found: dict[str, str] = {}
    for alt in code.split("/"):
        words = alt.split()
        done = False
        for size in range(len(words), 0, -1):
            for start in range(len(words) - size + 1):
                hit = keys.get(_key(" ".join(words[start : start + size])))
                if hit:
                    found.setdefault(hit[0], hit[1])
                    done = True
                    break
            if done:
                break
    for token in re.findall(r"\bMI\d+\b", bracket):
        if hit := keys.get(_key(token)):
            found.setdefault(hit[0], hit[1])
    return sorted(found.items())


def _comment_models(comment: str) -> list[str]:
    """``Radeon 6800, 6900 (formerly ...)`` -> ``["6800", "6900"]``; ``Radeon Pro 5600M``
    -> ``["PRO 5600M"]``. Items that do not follow a ``Radeon`` are skipped."""
    out = []
    radeon = False
    for item in re.sub(r"\([^)]*\)", "", comment).split(","):
        item = item.strip()
        if m := re.fullmatch(r"Radeon (Pro )?(\d{3,4}[A-Z]?)", item, re.I):
            radeon = True
            out.append(("PRO " if m[1] else "") + m[2].upper())
        elif radeon and re.fullmatch(r"\d{3,4}[A-Z]?", item):
            out.append(item.upper())
        else:
            radeon = False
    return out


def name_model(name: str) -> str | None:
    """The model number of a Radeon name: ``AMD Radeon RX 7600 XT`` -> ``7600``,
    ``AMD Radeon Pro 5600M`` -> ``PRO 5600M``; None without one."""
    m = re.search(r"\bRadeon (?:(Pro|PRO) )?(?:RX |R9 |R7 )?(\d{3,4}[A-Z]?)\b", name)
    if not m:
        return None
    return ("PRO " if m[1] else "") + m[2].upper()


def _model_key(name: str) -> list[str]:
    """Names compared with gpu-arch-specs models: lower case, no ``AMD``, no
    ``Instinct`` (nor ``Radeon`` before it), no parentheses, ``A / B`` split."""
    out = []
    for part in re.split(r"\s+/\s+", name):
        words = re.sub(r"\([^)]*\)", " ", part).lower().split()
        if "instinct" in words:
            words = [w for w in words if w not in ("radeon", "instinct")]
        words = [w for w in words if w != "amd"]
        if words:
            out.append(" ".join(words))
    return out


# --------------------------------------------------------------------------- build


def _hex(n: int, width: int = 4) -> str:
    return f"0x{n:0{width}x}"


def read_upstream(folder: Path = UPSTREAM) -> dict[str, str]:
    """The stored upstream files' text, by source key."""
    return {key: (folder / name).read_text(encoding="utf-8") for key, name in FILES.items()}


def read_sources(folder: Path = UPSTREAM) -> list[dict]:
    return json.loads((folder / "SOURCES.json").read_text(encoding="utf-8"))["sources"]


@dataclass
class _Inputs:
    """The parsed upstream files, and the lookups the routes share."""

    names: dict[int, list[tuple[int, str]]]
    pci: dict[int, str]
    processors: dict[str, str]
    enum: dict[int, tuple[str, str]]
    topo: dict[int, tuple[str, str]]
    keys: dict[str, tuple[str, str]]
    spec_keys: dict[str, tuple[str, str]]
    comment_models: dict[str, list[str]]


def _inputs(texts: dict[str, str]) -> _Inputs:
    family = parse_mesa_family(texts["mesa-amd_family.h"])
    processors = parse_mesa_processors(texts["mesa-amd_family.c"])
    specs = parse_arch_specs(texts["gpu-arch-specs"])
    comment_models: dict[str, list[str]] = defaultdict(list)
    for chip, comment in family:
        if _GFX_RE.fullmatch(processors.get(chip, "")):
            for model in _comment_models(comment):
                comment_models[model].append(chip)
    return _Inputs(
        names=parse_amdgpu_ids(texts["amdgpu.ids"]),
        pci=parse_pci_ids(texts["pci.ids"]),
        processors=processors,
        enum=parse_enumerator(texts["rocm_agent_enumerator"]),
        topo=parse_topology(texts["libhsakmt-topology"]),
        keys=mesa_keys(family),
        spec_keys={k: (model, gfx) for model, gfx in specs.items() for k in _model_key(model)},
        comment_models=dict(comment_models),
    )


def _rocm_route(dev: int, src: _Inputs, e: dict) -> None:
    """1. ROCm's own tables."""
    if dev in src.enum:
        gfx, label = src.enum[dev]
        why = f"rocm_agent_enumerator lists {_hex(dev)} under {gfx} ('{label}')"
        e["found"]["rocm-table"].append((gfx, why, ["rocm_agent_enumerator"]))
    if dev in src.topo:
        gfx, label = src.topo[dev]
        why = f"libhsakmt gfxip_lookup_table gives {_hex(dev)} {gfx} ('{label}')"
        e["found"]["rocm-table"].append((gfx, why, ["libhsakmt-topology"]))


def _codename_route(dev: int, src: _Inputs, e: dict) -> None:
    """2. pci.ids codename -> Mesa chip -> Mesa's LLVM processor (GPUs only)."""
    pci_name = src.pci.get(dev)
    matches = match_chip(pci_name, src.keys) if e["gpu"] else []
    if len(matches) > 1:
        e["notes"].append(
            "pci.ids codename names several Mesa chips: "
            + ", ".join(f"CHIP_{c}" for c, _ in matches)
        )
    if len(matches) == 1:
        e["chip"], why = matches[0]
        proc = src.processors.get(e["chip"], "")
        if _GFX_RE.fullmatch(proc):
            chain = (
                f"pci.ids codename '{codename_of(pci_name)}' -> {why} -> "
                f"ac_get_llvm_processor_name() '{proc}'"
            )
            srcs = ["pci.ids", "mesa-amd_family.h", "mesa-amd_family.c"]
            e["found"]["codename"].append((proc, chain, srcs))
        elif proc:
            e["alias"] = (
                f"Mesa's LLVM processor for CHIP_{e['chip']} is '{proc}', a name the "
                "stored sources do not map to a gfx target"
            )
    else:  # the chip ROCm's table names, where pci.ids' codename names none
        label = src.topo.get(dev, ("", ""))[1] or src.enum.get(dev, ("", ""))[1]
        hits = match_chip(label, src.keys)
        e["chip"] = hits[0][0] if len(hits) == 1 else None


def _product_route(dev: int, src: _Inputs, e: dict) -> None:
    """3. amdgpu.ids names: gpu-arch-specs models, models in Mesa CHIP_* comments."""
    for _, name in src.names.get(dev, []):
        for k in _model_key(name):
            if k in src.spec_keys:
                model, gfx = src.spec_keys[k]
                why = f"amdgpu.ids name '{name}' is gpu-arch-specs model '{model}' ({gfx})"
                e["found"]["product"].append((gfx, why, ["amdgpu.ids", "gpu-arch-specs"]))
        model = name_model(name)
        for chip in src.comment_models.get(model or "", []):
            gfx = src.processors[chip]
            why = (
                f"amdgpu.ids name '{name}' (model {model}) is named in Mesa's comment "
                f"on CHIP_{chip} -> '{gfx}'"
            )
            srcs = ["amdgpu.ids", "mesa-amd_family.h", "mesa-amd_family.c"]
            e["found"]["product"].append((gfx, why, srcs))


def _pick(e: dict) -> None:
    """The gfx of the first of routes 1-3 that gives exactly one."""
    e["gfx"] = e["route"] = None
    for route in ROUTES[:3]:
        gfxs = sorted({g for g, _, _ in e["found"][route]})
        if len(gfxs) == 1 and e["gfx"] is None:
            e["gfx"], e["route"] = gfxs[0], route
        elif len(gfxs) > 1:
            e["notes"].append(f"the {route} route disagrees with itself: {', '.join(gfxs)}")


def _shared_names(entries: dict[int, dict], names: dict[int, list[tuple[int, str]]]) -> None:
    """4. An ID whose numbered names all belong to IDs of one gfx (from routes 1-3)."""
    by_name: dict[str, set[int]] = defaultdict(set)
    for dev, pairs in names.items():
        for _, name in pairs:
            by_name[name].add(dev)
    direct = {dev: (e["gfx"], e["route"]) for dev, e in entries.items()}
    for dev, e in entries.items():
        modelled = sorted({n for _, n in names.get(dev, []) if re.search(r"\d{3}", n)})
        if e["gfx"] or not modelled or not all(by_name[n] - {dev} for n in modelled):
            continue
        others = sorted({o for n in modelled for o in by_name[n] if o != dev})
        gfxs = {direct[o][0] for o in others}
        if len(gfxs) == 1 and None not in gfxs:
            gfx = gfxs.pop()
            whose = ", ".join(f"{_hex(o)} ({direct[o][1]})" for o in others)
            why = f"amdgpu.ids names {modelled} are also those of {whose}, all {gfx}"
            e["found"]["shared-name"].append((gfx, why, ["amdgpu.ids"]))
            e["gfx"], e["route"] = gfx, "shared-name"


def _row(dev: int, e: dict, src: _Inputs) -> dict:
    """The JSON entry of one ID."""
    found, gfx, chosen = e["found"], e["gfx"], e["route"]
    picked = [(why, srcs) for g, why, srcs in found.get(chosen, []) if g == gfx]
    confirmed, notes = [], list(e["notes"])
    if e["alias"] and not gfx:
        notes.append(e["alias"])
    for route in ROUTES:
        if route == chosen or not found[route]:
            continue
        if gfx and {g for g, _, _ in found[route]} == {gfx}:
            confirmed.append(route)
        else:
            notes.append(f"{route} route: " + "; ".join(why for _, why, _ in found[route]))
    used = {s for _, srcs in picked for s in srcs}
    used |= {"pci.ids"} if dev in src.pci else set()
    used |= {"amdgpu.ids"} if dev in src.names else set()
    return {
        "device_id": _hex(dev),
        "pci_name": src.pci.get(dev),
        "codename": codename_of(src.pci.get(dev)),
        "names": [[_hex(r, 2), n] for r, n in src.names.get(dev, [])],
        "chip": e["chip"],
        "gfx": gfx,
        "gpu": e["gpu"],
        "route": chosen,
        "derivation": "; ".join(why for why, _ in picked) or "no route gives a single gfx target",
        "confirmed_by": confirmed,
        "notes": notes,
        "sources": sorted(used),
    }


def build(texts: dict[str, str], sources: list[dict]) -> dict:
    """The table, from the upstream files' text (deterministic)."""
    src = _inputs(texts)
    entries: dict[int, dict] = {}
    for dev in sorted(set(src.names) | set(src.pci) | set(src.enum) | set(src.topo)):
        listed = dev in src.names or dev in src.enum or dev in src.topo
        e = {
            "found": {r: [] for r in ROUTES},
            "notes": [],
            "chip": None,
            "alias": None,
            "gpu": listed or not NOT_GPU.search(src.pci.get(dev, "")),
        }
        _rocm_route(dev, src, e)
        _codename_route(dev, src, e)
        _product_route(dev, src, e)
        _pick(e)
        entries[dev] = e
    _shared_names(entries, src.names)
    rows = [_row(dev, e, src) for dev, e in entries.items()]
    in_amdgpu = [c for c in rows if c["names"]]
    return {
        "about": "Generated by python -m rocm_dl_guide.doctor.chips --write from the files "
        "under data/upstream/chips/ (see SOURCES.json there); do not edit by hand.",
        "routes": {
            "rocm-table": "ROCm's own device ID -> gfx tables (rocm_agent_enumerator, libhsakmt)",
            "codename": "pci.ids codename -> Mesa CHIP_* -> ac_get_llvm_processor_name()",
            "product": "amdgpu.ids name -> gpu-arch-specs model, or a Mesa CHIP_* comment's model",
            "shared-name": "the ID's numbered amdgpu.ids names belong only to IDs of one gfx",
        },
        "summary": {
            "ids": len(rows),
            "with_gfx": sum(1 for c in rows if c["gfx"]),
            "amdgpu_ids": len(in_amdgpu),
            "amdgpu_ids_with_gfx": sum(1 for c in in_amdgpu if c["gfx"]),
            "by_route": {r: sum(1 for c in rows if c["route"] == r) for r in ROUTES},
        },
        "sources": {s["key"]: {k: v for k, v in s.items() if k != "key"} for s in sources},
        "chips": rows,
    }


def render(table: dict) -> str:
    """The JSON text: sorted keys, one chip per line."""
    head = {k: v for k, v in table.items() if k != "chips"}
    lines = [json.dumps(c, sort_keys=True, ensure_ascii=False) for c in table["chips"]]
    text = json.dumps(head, indent=1, sort_keys=True, ensure_ascii=False)
    return text[:-2] + ',\n "chips": [\n  ' + ",\n  ".join(lines) + "\n ]\n}\n"


def differences(old: dict, new: dict, limit: int = 20) -> list[str]:
    """What differs between two tables, one line each (at most ``limit``)."""
    out = []
    for key in sorted(set(old) | set(new)):
        if key != "chips" and old.get(key) != new.get(key):
            out.append(f"{key}: differs")
    a = {c["device_id"]: c for c in old.get("chips", [])}
    b = {c["device_id"]: c for c in new.get("chips", [])}
    for dev in sorted(set(a) | set(b)):
        if dev not in b:
            out.append(f"{dev}: in the JSON, not in the sources")
        elif dev not in a:
            out.append(f"{dev}: in the sources, not in the JSON")
        elif a[dev] != b[dev]:
            fields = sorted(k for k in set(a[dev]) | set(b[dev]) if a[dev].get(k) != b[dev].get(k))
            for k in fields:
                out.append(f"{dev} {k}: JSON {a[dev].get(k)!r}, sources {b[dev].get(k)!r}")
    return out[:limit] + ([f"... and {len(out) - limit} more"] if len(out) > limit else [])
