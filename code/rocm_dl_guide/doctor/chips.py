"""The real chip behind an AMD PCI device ID: its marketing names, codename and gfx target.

``rocminfo`` prints the gfx target that ``HSA_OVERRIDE_GFX_VERSION`` asks for,
not the chip's own (an RX 7600 XT, PCI device ``0x7480``, shows ``gfx1100``
under ``HSA_OVERRIDE_GFX_VERSION=11.0.0``, yet its Navi 33 is ``gfx1102``).
The PCI device ID does not change, so this module maps it back to the chip.

The table is ``data/pci-chips.json``, generated from upstream files stored
under ``data/upstream/chips/`` (``SOURCES.json`` there gives each one's
repository, commit, path, URL and line range):

- libdrm ``data/amdgpu.ids`` (mesa/drm): marketing names per device ID and revision
- ``pci.ids`` (pciutils/pciids), the vendor 1002 block: chip codenames
- Mesa ``src/amd/common/amd_family.h`` and ``amd_family.c``: the ``CHIP_*``
  names and ``ac_get_llvm_processor_name()``, chip -> gfx target
- rocminfo's ``rocm_agent_enumerator`` (``ISA_TO_ID``) and libhsakmt's
  ``topology.c`` (``gfxip_lookup_table``) in ROCm/rocm-systems: ROCm's own
  device ID -> gfx tables
- ROCm ``docs/reference/gpu-arch-specs.rst``: model name -> LLVM target

A gfx target comes from the first of these routes that gives exactly one:

1. ``rocm-table``: ROCm's tables list the device ID.
2. ``codename``: the pci.ids codename names a Mesa chip ("Navi 33" ->
   ``CHIP_NAVI33``), and Mesa's processor name for it is a gfx target.
3. ``product``: an amdgpu.ids name of the ID is a model in gpu-arch-specs, or
   its "RX NNNN" number is one a Mesa ``CHIP_*`` comment names.
4. ``shared-name``: every amdgpu.ids name with a model number that the ID
   carries is carried only by IDs of one gfx target (Hawk Point's 780M).

Otherwise ``gfx`` is null. Each entry says how its gfx was found, which other
routes agree, and where they disagree.

``python -m rocm_dl_guide.doctor.chips --write`` regenerates the JSON;
``--check`` exits 1 and names the differences when it is stale.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import defaultdict
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

UPSTREAM = Path(__file__).resolve().parent.parent / "data" / "upstream" / "chips"
"""The stored upstream files (a source checkout; an installed wheel has only the JSON)."""
JSON_PATH = Path(__file__).resolve().parent.parent / "data" / "pci-chips.json"

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


def build(texts: dict[str, str], sources: list[dict]) -> dict:
    """The table, from the upstream files' text (deterministic)."""
    names = parse_amdgpu_ids(texts["amdgpu.ids"])
    pci = parse_pci_ids(texts["pci.ids"])
    family = parse_mesa_family(texts["mesa-amd_family.h"])
    processors = parse_mesa_processors(texts["mesa-amd_family.c"])
    enum = parse_enumerator(texts["rocm_agent_enumerator"])
    topo = parse_topology(texts["libhsakmt-topology"])
    specs = parse_arch_specs(texts["gpu-arch-specs"])
    keys = mesa_keys(family)
    spec_keys = {k: (model, gfx) for model, gfx in specs.items() for k in _model_key(model)}
    comment_models: dict[str, list[str]] = defaultdict(list)
    for chip, comment in family:
        if chip in processors and _GFX_RE.fullmatch(processors[chip]):
            for model in _comment_models(comment):
                comment_models[model].append(chip)

    entries = {}
    for dev in sorted(set(names) | set(pci) | set(enum) | set(topo)):
        found: dict[str, list[tuple[str, str, list[str]]]] = {r: [] for r in ROUTES}
        notes: list[str] = []
        chip = alias = None

        # 1. ROCm's own tables
        if dev in enum:
            gfx, label = enum[dev]
            found["rocm-table"].append(
                (
                    gfx,
                    f"rocm_agent_enumerator lists {_hex(dev)} under {gfx} ('{label}')",
                    ["rocm_agent_enumerator"],
                )
            )
        if dev in topo:
            gfx, label = topo[dev]
            found["rocm-table"].append(
                (
                    gfx,
                    f"libhsakmt gfxip_lookup_table gives {_hex(dev)} {gfx} ('{label}')",
                    ["libhsakmt-topology"],
                )
            )

        # 2. pci.ids codename -> Mesa chip -> Mesa's LLVM processor (GPUs only)
        gpu = dev in names or dev in enum or dev in topo or not NOT_GPU.search(pci.get(dev, ""))
        matches = match_chip(pci.get(dev), keys) if gpu else []
        if len(matches) == 1:
            chip, why = matches[0]
            proc = processors.get(chip, "")
            if _GFX_RE.fullmatch(proc):
                found["codename"].append(
                    (
                        proc,
                        f"pci.ids codename '{codename_of(pci[dev])}' -> {why} -> "
                        f"ac_get_llvm_processor_name() '{proc}'",
                        ["pci.ids", "mesa-amd_family.h", "mesa-amd_family.c"],
                    )
                )
            elif proc:
                alias = (
                    f"Mesa's LLVM processor for CHIP_{chip} is '{proc}', a name the "
                    "stored sources do not map to a gfx target"
                )
        elif len(matches) > 1:
            notes.append(
                "pci.ids codename names several Mesa chips: "
                + ", ".join(f"CHIP_{c}" for c, _ in matches)
            )
        if chip is None:  # the chip ROCm's table names, where pci.ids' codename names none
            label = topo.get(dev, ("", ""))[1] or enum.get(dev, ("", ""))[1]
            hits = match_chip(label, keys)
            if len(hits) == 1:
                chip = hits[0][0]

        # 3. product names: gpu-arch-specs models, Mesa CHIP_* comments
        for _, name in names.get(dev, []):
            for k in _model_key(name):
                if k in spec_keys:
                    model, gfx = spec_keys[k]
                    found["product"].append(
                        (
                            gfx,
                            f"amdgpu.ids name '{name}' is gpu-arch-specs model '{model}' "
                            f"(LLVM target {gfx})",
                            ["amdgpu.ids", "gpu-arch-specs"],
                        )
                    )
            model = name_model(name)
            for mchip in comment_models.get(model or "", []):
                gfx = processors[mchip]
                found["product"].append(
                    (
                        gfx,
                        f"amdgpu.ids name '{name}' (model {model}) is named in Mesa's comment "
                        f"on CHIP_{mchip} -> '{gfx}'",
                        ["amdgpu.ids", "mesa-amd_family.h", "mesa-amd_family.c"],
                    )
                )
        entries[dev] = {"found": found, "notes": notes, "chip": chip, "alias": alias, "gpu": gpu}

    # pick a gfx per ID from routes 1-3
    for e in entries.values():
        e["gfx"] = e["route"] = None
        for route in ROUTES[:3]:
            gfxs = sorted({g for g, _, _ in e["found"][route]})
            if len(gfxs) == 1 and e["gfx"] is None:
                e["gfx"], e["route"] = gfxs[0], route
            elif len(gfxs) > 1:
                e["notes"].append(f"the {route} route disagrees with itself: {', '.join(gfxs)}")

    # 4. shared names
    by_name: dict[str, set[int]] = defaultdict(set)
    for dev, pairs in names.items():
        for _, name in pairs:
            by_name[name].add(dev)
    direct = {dev: (e["gfx"], e["route"]) for dev, e in entries.items()}  # routes 1-3 only
    for dev, e in entries.items():
        if e["gfx"] or not names.get(dev):
            continue
        modelled = sorted({n for _, n in names[dev] if re.search(r"\d{3}", n)})
        others = sorted({o for n in modelled for o in by_name[n] if o != dev})
        if not modelled or not all(by_name[n] - {dev} for n in modelled):
            continue
        gfxs = {direct[o][0] for o in others}
        if len(gfxs) == 1 and None not in gfxs:
            gfx = gfxs.pop()
            whose = ", ".join(f"{_hex(o)} ({direct[o][1]})" for o in others)
            e["found"]["shared-name"].append(
                (
                    gfx,
                    f"amdgpu.ids names {modelled} are also those of {whose}, all {gfx}",
                    ["amdgpu.ids"],
                )
            )
            e["gfx"], e["route"] = gfx, "shared-name"

    chips = []
    for dev, e in entries.items():
        found, gfx = e["found"], e["gfx"]
        derivation = "; ".join(why for g, why, _ in found[e["route"]] if g == gfx) if gfx else ""
        used = {s for g, _, srcs in found[e["route"]] if g == gfx for s in srcs} if gfx else set()
        confirmed, notes = [], list(e["notes"])
        if e["alias"] and not gfx:
            notes.append(e["alias"])
        for route in ROUTES:
            if route == e["route"] or not found[route]:
                continue
            gfxs = sorted({g for g, _, _ in found[route]})
            if gfx and gfxs == [gfx]:
                confirmed.append(route)
            else:
                notes.append(f"{route} route: " + "; ".join(why for _, why, _ in found[route]))
        pci_name = pci.get(dev)
        used |= {"pci.ids"} if pci_name else set()
        used |= {"amdgpu.ids"} if dev in names else set()
        chips.append(
            {
                "device_id": _hex(dev),
                "pci_name": pci_name,
                "codename": codename_of(pci_name),
                "names": [[_hex(r, 2), n] for r, n in names.get(dev, [])],
                "chip": e["chip"],
                "gfx": gfx,
                "gpu": e["gpu"],
                "route": e["route"],
                "derivation": derivation or "no route gives a single gfx target",
                "confirmed_by": confirmed,
                "notes": notes,
                "sources": sorted(used),
            }
        )

    with_gfx = [c for c in chips if c["gfx"]]
    in_amdgpu = [c for c in chips if c["names"]]
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
            "ids": len(chips),
            "with_gfx": len(with_gfx),
            "amdgpu_ids": len(in_amdgpu),
            "amdgpu_ids_with_gfx": sum(1 for c in in_amdgpu if c["gfx"]),
            "by_route": {r: sum(1 for c in chips if c["route"] == r) for r in ROUTES},
        },
        "sources": {s["key"]: {k: v for k, v in s.items() if k != "key"} for s in sources},
        "chips": chips,
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


# --------------------------------------------------------------------------- lookups


@dataclass(frozen=True)
class Chip:
    """One PCI device ID (and revision, when known) and what the table says of it."""

    device_id: int
    revision: int | None
    names: tuple[str, ...]
    """amdgpu.ids names: the revision's, or every name of the ID when the revision is
    unknown or unlisted."""
    codename: str | None
    chip: str | None
    gfx: str | None
    route: str | None
    derivation: str
    sources: tuple[str, ...]
    pci_name: str | None = None
    confirmed_by: tuple[str, ...] = ()
    """The other routes that give the same gfx target."""
    notes: tuple[str, ...] = ()
    """Where routes disagree, and what a route found that gave no gfx target."""

    @property
    def name(self) -> str | None:
        """The first marketing name, else the pci.ids name."""
        return self.names[0] if self.names else self.pci_name


@lru_cache(maxsize=1)
def table() -> dict:
    """data/pci-chips.json, read once."""
    ref = resources.files("rocm_dl_guide") / "data" / "pci-chips.json"
    return json.loads(ref.read_text(encoding="utf-8"))


@lru_cache(maxsize=1)
def _index() -> dict[int, dict]:
    return {int(c["device_id"], 16): c for c in table()["chips"]}


def _int(value: int | str | None) -> int | None:
    """An int, or a hex string (``"0x7480"``, ``"7480"``, ``"1002:7480"``)."""
    if value is None or isinstance(value, int):
        return value
    text = str(value).strip().lower().rsplit(":", 1)[-1]
    return int(text, 16)


def _chip(entry: dict, revision: int | None, names: list[str] | None = None) -> Chip:
    pairs = [(int(r, 16), n) for r, n in entry["names"]]
    if names is None:
        names = [n for r, n in pairs if r == revision] or [n for _, n in pairs]
    return Chip(
        device_id=int(entry["device_id"], 16),
        revision=revision,
        names=tuple(dict.fromkeys(names)),
        codename=entry["codename"],
        chip=entry["chip"],
        gfx=entry["gfx"],
        route=entry["route"],
        derivation=entry["derivation"],
        sources=tuple(entry["sources"]),
        pci_name=entry["pci_name"],
        confirmed_by=tuple(entry["confirmed_by"]),
        notes=tuple(entry["notes"]),
    )


def by_pci_id(device_id: int | str, revision: int | str | None = None) -> Chip | None:
    """The chip behind an AMD PCI device ID (strings are hex), or None if no source lists it."""
    entry = _index().get(_int(device_id))
    return None if entry is None else _chip(entry, _int(revision))


def _words(name: str) -> list[str]:
    text = re.sub(r"\(tm\)|\(r\)|®|™", " ", name.lower())
    words = re.findall(r"[a-z0-9]+", text)
    return [w for w in words if w not in ("amd", "ati", "graphics")]


def _contains(words: list[str], query: list[str]) -> bool:
    n = len(query)
    return any(words[i : i + n] == query for i in range(len(words) - n + 1))


def _pci_names(pci_name: str | None) -> list[str]:
    """The product names in a pci.ids bracket: ``[Radeon RX 7600/7600 XT]`` ->
    ``Radeon RX 7600``, ``Radeon RX 7600 XT``."""
    bracket = re.search(r"\[(.*)\]", pci_name or "")
    if not bracket:
        return []
    out, prefix = [], ""
    for item in (i.strip() for i in bracket[1].split("/")):
        if not item:
            continue
        if item[0].isdigit() and prefix:
            item = f"{prefix} {item}"
        else:
            prefix = " ".join(w for w in item.split() if not any(ch.isdigit() for ch in w))
        out.append(item)
    return out


def by_name(marketing_name: str) -> list[Chip]:
    """The chips a marketing name (``AMD Radeon RX 7600 XT``, ``Radeon 780M``,
    ``MI300X``) or a codename (``Navi 33``) names: exact matches if any, else every
    name that contains the query's words in order; amdgpu.ids before pci.ids."""
    query = _words(marketing_name)
    if not query:
        return []
    for exact in (True, False):
        hits: dict[int, tuple[dict, list[tuple[int, str]]]] = {}
        for source in ("amdgpu.ids", "pci.ids", "codename"):
            for dev, entry in _index().items():
                if dev in hits:
                    continue
                if source == "amdgpu.ids":
                    cands = [(int(r, 16), n) for r, n in entry["names"]]
                elif source == "pci.ids":
                    cands = [(-1, n) for n in _pci_names(entry["pci_name"])]
                else:
                    cands = [(-1, entry["codename"])] if entry["codename"] else []
                good = [
                    (r, n)
                    for r, n in cands
                    if (_words(n) == query if exact else _contains(_words(n), query))
                ]
                if good:
                    hits[dev] = (entry, good)
            if hits and exact:
                break
        if hits:
            out = []
            for dev in sorted(hits):
                entry, good = hits[dev]
                revs = sorted({r for r, _ in good if r >= 0})
                names = [n for r, n in good if r >= 0]
                out.append(_chip(entry, revs[0] if len(revs) == 1 else None, names or None))
            return out
    return []


# --------------------------------------------------------------------------- finding IDs in text

_PAIR = re.compile(
    r"(?<![0-9A-Fa-f])(?:0x)?1002:(?:0x)?([0-9A-Fa-f]{4})(?![0-9A-Fa-f])"  # lspci, uevent, dmesg
    r"|\[0x([0-9A-Fa-f]{4}):0x1002\]"  # KFD topology in dmesg: [0x164e:0x1002]
    r"|v00001002d0000([0-9A-Fa-f]{4})"  # modalias
    # Windows hardware IDs: PCI\VEN_1002&DEV_73BF&SUBSYS_0E3A1002&REV_C1
    r"|VEN_1002&DEV_([0-9A-Fa-f]{4})(?:&SUBSYS_[0-9A-Fa-f]{8})?(?:&REV_([0-9A-Fa-f]{2}))?",
    re.I,
)
_LSPCI_REV = re.compile(r"\(rev ([0-9a-f]{2})\)", re.I)
_CHIP_ID = re.compile(r"Chip ID:\s*\d+\(0x([0-9a-fA-F]+)\)")
_SMI_ID = re.compile(
    r"GPU\[(\d+)\]\s*:\s*(?:Card Model|Card model|Device ID)\s*:\s*0x([0-9a-fA-F]{4})\b"
)
_SMI_REV = re.compile(r"GPU\[(\d+)\]\s*:\s*Device Rev\s*:\s*0x([0-9a-fA-F]{1,2})\b")
_AMDSMI_ID = re.compile(r"\bdevice_id\"?\s*[:=]\s*\"?0x([0-9a-fA-F]{4})\b", re.I)
_AMDSMI_REV = re.compile(r"\brev_id\"?\s*[:=]\s*\"?0x([0-9a-fA-F]{1,2})\b", re.I)
_SYSFS_ID = re.compile(r"/device/device[:\s]+0x([0-9a-fA-F]{4})\b")
_SYSFS_REV = re.compile(r"/device/revision[:\s]+0x([0-9a-fA-F]{1,2})\b")
_DID_TOKEN = re.compile(r"(?<!\S)0x([0-9a-fA-F]{4}),?(?!\S)")


def pci_ids_in(text: str) -> list[tuple[int, int | None]]:
    """The AMD PCI device IDs in pasted text, with the PCI revision where the text shows
    it: ``lspci -n``/``-nn``, ``rocminfo`` (``Chip ID``), ``rocm-smi`` (``--showproductname``,
    ``--showid``, the ``DID`` column of ``--showhw`` and the concise table), ``amd-smi static``
    (text or JSON), ``dmesg``, uevent (``PCI_ID=``), modalias, sysfs and Windows hardware
    IDs. Subsystem IDs are skipped; every vendor-1002 function counts (HDMI audio too).

    One entry per (ID, revision), ordered by where the ID first appears; an ID is listed
    without a revision only when the text never shows one for it."""
    events: list[tuple[int, int | None]] = []
    smi_ids: dict[str, int] = {}
    smi_revs: dict[str, list[int]] = defaultdict(list)
    last_amdsmi = last_sysfs = None
    did_table = False
    for line in text.splitlines():
        for m in _PAIR.finditer(line):
            if re.search(r"subsys", line[: m.start()], re.I):  # a subsystem ID, not a device
                continue
            rev = m[5]
            if rev is None and m[1] and (r := _LSPCI_REV.search(line, m.end())):
                rev = r[1]
            events.append((int(m[1] or m[2] or m[3] or m[4], 16), _int(rev)))
        if m := _CHIP_ID.search(line):
            events.append((int(m[1], 16), None))
        if m := _SMI_ID.search(line):
            smi_ids.setdefault(m[1], int(m[2], 16))
            events.append((int(m[2], 16), None))
        if m := _SMI_REV.search(line):
            smi_revs[m[1]].append(int(m[2], 16))
        if m := _AMDSMI_ID.search(line):
            last_amdsmi = int(m[1], 16)
            events.append((last_amdsmi, None))
        if (m := _AMDSMI_REV.search(line)) and last_amdsmi is not None:
            events.append((last_amdsmi, int(m[1], 16)))
        if m := _SYSFS_ID.search(line):
            last_sysfs = int(m[1], 16)
            events.append((last_sysfs, None))
        if (m := _SYSFS_REV.search(line)) and last_sysfs is not None:
            events.append((last_sysfs, int(m[1], 16)))
        if re.search(r"\bDID\b", line):  # rocm-smi --showhw, the concise table
            did_table = True
        elif did_table:
            if not line.strip() or re.search(r"End of ROCm SMI Log|Management Interface", line):
                did_table = False
            elif re.match(r"\s*\d+\s", line) and (d := _DID_TOKEN.search(line)):
                events.append((int(d[1], 16), None))
    for gpu, dev in smi_ids.items():
        events.extend((dev, rev) for rev in smi_revs.get(gpu, []))

    revs: dict[int, list[int]] = defaultdict(list)
    order: list[int] = []
    for dev, rev in events:
        if not dev:
            continue
        if dev not in order:
            order.append(dev)
        if rev is not None and rev not in revs[dev]:
            revs[dev].append(rev)
    return [(dev, rev) for dev in order for rev in (revs[dev] or [None])]


# --------------------------------------------------------------------------- command line


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m rocm_dl_guide.doctor.chips",
        description="PCI device ID -> marketing names -> chip -> gfx target, from stored "
        "upstream files.",
    )
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--write", action="store_true", help="regenerate data/pci-chips.json")
    group.add_argument("--check", action="store_true", help="exit 1 if the JSON is stale")
    parser.add_argument("lookup", nargs="*", help="device IDs (hex) or names to look up")
    args = parser.parse_args(argv)
    if args.write or args.check:
        new = build(read_upstream(), read_sources())
        text = render(new)
        if args.write:
            JSON_PATH.write_text(text, encoding="utf-8")
            s = new["summary"]
            print(f"wrote {JSON_PATH}: {s['ids']} IDs, {s['with_gfx']} with a gfx target")
            return 0
        old_text = JSON_PATH.read_text(encoding="utf-8") if JSON_PATH.exists() else "{}"
        if old_text == text:
            print(f"{JSON_PATH.name} is current")
            return 0
        diff = differences(json.loads(old_text), new) or ["formatting differs"]
        print(f"{JSON_PATH.name} is stale; run python -m rocm_dl_guide.doctor.chips --write:")
        print("\n".join(f"  {d}" for d in diff))
        return 1
    for item in args.lookup:
        try:
            chips = [c] if (c := by_pci_id(item)) else []
        except ValueError:
            chips = []
        chips = chips or by_name(item)
        for c in chips or []:
            print(
                f"{c.device_id:#06x}  {c.gfx or '?':8} {c.codename or '':14} "
                f"{'; '.join(c.names) or c.pci_name or ''}"
            )
            print(f"        {c.derivation}")
        if not chips:
            print(f"{item}: not found")
    return 0


if __name__ == "__main__":
    sys.exit(main())
