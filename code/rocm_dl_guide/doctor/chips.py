"""The real chip behind an AMD PCI device ID: its marketing names, codename and gfx target.

``rocminfo`` prints the gfx target that ``HSA_OVERRIDE_GFX_VERSION`` asks for,
not the chip's own (an RX 7600 XT, PCI device ``0x7480``, shows ``gfx1100``
under ``HSA_OVERRIDE_GFX_VERSION=11.0.0``, yet its Navi 33 is ``gfx1102``).
The PCI device ID does not change, so this module maps it back to the chip.

The table is ``data/pci-chips.json``, which :mod:`~rocm_dl_guide.doctor.chips_build`
generates from upstream files stored under ``data/upstream/chips/``
(``SOURCES.json`` there gives each one's repository, commit, path, URL and
line range):

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
``--check`` exits 1 and names the differences when it is stale; other
arguments are looked up (``0x7480``, ``"Radeon 780M"``).
"""

from __future__ import annotations

import json
import re
import sys
from collections import defaultdict
from dataclasses import dataclass
from functools import cache, lru_cache
from importlib import resources
from pathlib import Path

from . import chips_build

JSON_PATH = Path(__file__).resolve().parent.parent / "data" / "pci-chips.json"

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
    gpu: bool = True
    """False for AMD functions that are not a GPU (HDMI audio, USB, PCIe switch ports)."""
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
        gpu=entry["gpu"],
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


def _contains(words: tuple[str, ...], query: tuple[str, ...]) -> bool:
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


@cache
def _name_words(name: str) -> tuple[str, ...]:
    return tuple(_words(name))


def by_name(marketing_name: str) -> list[Chip]:
    """The chips a marketing name (``AMD Radeon RX 7600 XT``, ``Radeon 780M``,
    ``MI300X``) or a codename (``Navi 33``) names: exact matches if any, else every
    name that contains the query's words in order; amdgpu.ids before pci.ids."""
    return list(_by_words(tuple(_words(marketing_name))))


@lru_cache(maxsize=1024)
def _by_words(query: tuple[str, ...]) -> tuple[Chip, ...]:
    """:func:`by_name` for the words of a name (each index name's words computed once)."""
    if not query:
        return ()
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
                    if (_name_words(n) == query if exact else _contains(_name_words(n), query))
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
            return tuple(out)
    return ()


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


# --------------------------------------------------------------------------- command line

USAGE = "usage: python -m rocm_dl_guide.doctor.chips [--write | --check | ID-or-NAME ...]"


def _write_or_check(check: bool) -> int:
    new = chips_build.build(chips_build.read_upstream(), chips_build.read_sources())
    text = chips_build.render(new)
    if not check:
        JSON_PATH.write_text(text, encoding="utf-8")
        s = new["summary"]
        print(f"wrote {JSON_PATH}: {s['ids']} IDs, {s['with_gfx']} with a gfx target")
        return 0
    old_text = JSON_PATH.read_text(encoding="utf-8") if JSON_PATH.exists() else "{}"
    if old_text == text:
        print(f"{JSON_PATH.name} is current")
        return 0
    diff = chips_build.differences(json.loads(old_text), new) or ["formatting differs"]
    print(f"{JSON_PATH.name} is stale; run python -m rocm_dl_guide.doctor.chips --write:")
    print("\n".join(f"  {d}" for d in diff))
    return 1


def main(argv: list[str] | None = None) -> int:
    """``--write``, ``--check``, or look up each argument (an ID in hex, or a name)."""
    args = sys.argv[1:] if argv is None else argv
    if args in (["--write"], ["--check"]):
        return _write_or_check(args == ["--check"])
    if not args or any(a.startswith("-") for a in args):
        print(USAGE)
        return 0 if args in (["-h"], ["--help"]) else 2
    for item in args:
        try:
            found = [c] if (c := by_pci_id(item)) else []
        except ValueError:
            found = []
        for c in found or by_name(item):
            print(f"{c.device_id:#06x}  {c.gfx or '?':8} {c.codename or '':14} {c.name or ''}")
            print(f"        {c.derivation}")
        if not (found or by_name(item)):
            print(f"{item}: not found")
    return 0


if __name__ == "__main__":
    sys.exit(main())
