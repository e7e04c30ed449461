"""The GPUs a pasted text names, and the real target of each.

A reader's text names its GPUs in many ways: rocminfo's ``Marketing Name`` and
``Chip ID``, lspci's ``[1002:7480]``, llama.cpp's ``Device 0: AMD Radeon 8060S
Graphics, gfx1100``, or the reader's own "RX 6700 XT". :func:`named_gpus` finds
them and looks each up in :mod:`~rocm_dl_guide.doctor.chips` (generated from
libdrm's ``amdgpu.ids``, pci.ids and ROCm's own tables), so that a target the
text shows can be checked against the chip's real one: under
``HSA_OVERRIDE_GFX_VERSION`` rocminfo and every HIP program print the
override's target, never the chip's (:func:`masked`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from . import chips

if TYPE_CHECKING:  # pragma: no cover
    from .agents import Agent


@dataclass(frozen=True)
class NamedGPU:
    """One GPU the text names."""

    name: str
    """As the text writes it (or the chip's first name, for a PCI ID)."""
    gfx: str
    """The chip's own target."""
    codename: str | None
    device_id: int
    shown_gfx: str | None = None
    """The target the text prints beside it (rocminfo's agent ``Name``, a program's
    device line), where it does."""

    def describe(self) -> str:
        if not self.device_id:  # a processor named by its model: its integrated GPU
            return f"{self.name} is {self.gfx} (its integrated GPU)"
        chip = f"{self.codename}, " if self.codename else ""
        return f"{self.name} is {self.gfx} ({chip}PCI ID 0x{self.device_id:04x})"


_PRODUCT = re.compile(
    r"\b(?:AMD\s+)?(?:Radeon|Instinct|RX\s*\d|MI\d{2,3}|Ryzen\s+AI)[^\n,;:()\[\]\"'|]{0,40}",
    re.IGNORECASE,
)
_RX = re.compile(r"\bRX\s?(\d{3,4})(?:\s?(XTX|XT|GRE))?\b", re.IGNORECASE)


def _rx_words(m: re.Match) -> str:
    """``rx7600xt`` and ``RX560`` as their products are named: ``RX 7600 XT``, ``RX 560``."""
    return f"RX {m.group(1)}" + (f" {m.group(2).upper()}" if m.group(2) else "")


_BARE = re.compile(r"\b([5-9]\d{3})\s?(XTX|XT|GRE)\b", re.IGNORECASE)
"""A Radeon RX model written without "RX" ("6950xt", "7900 XTX")."""
_PROCESSOR = re.compile(
    r"\b(?:AMD\s+)?(?:Ryzen\s+)?AI\s+(?:MAX\+?\s+|\d\s+)(?:HX\s+)?(?:PRO\s+)?\d{3}\b",
    re.IGNORECASE,
)
"""A Ryzen AI processor named by its model, whose integrated GPU it is."""
STRIX_HALO = (
    "https://hothardware.com/news/amd-ryzen-ai-max-leak",
    "https://tomshardware.com/pc-components/cpus/mysterious-amd-ryzen-ai-max-pro-395-strix-halo-"
    "apu-emerges-on-geekbench-processor-expected-to-officially-debut-at-ces-2025",
)
"""The Ryzen AI MAX 300 series (385, 390, 395 and their PRO models) is Strix Halo,
whose GPU is the Radeon 8060S or 8050S ("AMD RYZEN AI MAX+ PRO 395 w/Radeon 8060S")."""
_GFX_AFTER = re.compile(r"^[,\s]*(?:\(|\[)?\s*(gfx[0-9a-f]{3,4})\b")
_AGENT_GFX = re.compile(r"^\s*Name:\s+(gfx[0-9a-f]{3,4})\s*$")
_MARKETING = re.compile(r"^\s*(Marketing Name|Board name):\s+(.+?)\s*$")
"""rocminfo's agent name (its ``Name: gfx...`` comes two lines before) and clinfo's
board name (its ``Name: gfx...`` comes after)."""


def _lookup(span: str) -> tuple[str, chips.Chip] | None:
    """The longest prefix of ``span`` (in words) that names chips of one target."""
    words = span.split()
    for n in range(len(words), 0, -1):
        name = " ".join(words[:n]).strip(" .-")
        if not re.search(r"\d|instinct|radeon\s+pro", name, re.IGNORECASE):
            continue
        try:
            found = chips.by_name(name)
        except TypeError:  # a name that matches entries without a codename
            continue
        # a card's HDMI audio function shares its product names, and has no target
        found = [c for c in found if "audio" not in (c.name or "").lower()]
        targets = {c.gfx for c in found if c.gfx}
        if len(targets) == 1 and all(c.gfx for c in found):
            return name, found[0]
    return None


def _words(name: str) -> str:
    return " ".join(re.sub(r"\bAMD\b|\bRyzen\b", " ", name, flags=re.IGNORECASE).lower().split())


def processor_gpu(name: str) -> NamedGPU | None:
    """The integrated GPU of a Ryzen AI processor named by its model: AMD's GPU list
    (the compatibility data's APUs), else the Ryzen AI MAX 300 series' Strix Halo."""
    from . import compat_data

    wanted = _words(name)
    for apu in compat_data.apus():
        if any(_words(n) == wanted for n in apu["names"]):
            return NamedGPU(name, apu["gfx"], None, 0)
    if re.search(r"\bmax\+? (?:pro )?3\d\d$", wanted):
        chip = next((c for c in chips.by_name("Radeon 8060S") if c.gfx), None)
        return NamedGPU(name, chip.gfx, chip.codename, 0) if chip else None
    return None


NVIDIA_GPU = re.compile(
    r"\b(?:NVIDIA\s+)?(?:GeForce\s+(?:RTX|GTX)\s*\d{3,4}\w*(?:\s+(?:Ti|SUPER))?|"
    r"Quadro\s+\w+|Tesla\s+[A-Z]\d+|RTX\s+A\d{4}|NVIDIA\s+[AHBLTV]\d{1,3})\b",
    re.IGNORECASE,
)
"""An NVIDIA GPU named by product."""
_RYZEN = re.compile(
    r"\b(?:Ryzen(?:\s+(?:PRO|[3579]))*|AMD)\s+(\d{4}(?:[A-Z]{1,3}\d?[A-Z]?)?)\b", re.IGNORECASE
)
"""A Ryzen processor by its model number ("Ryzen 7 5700U", "AMD 4800u", "Ryzen 5 5500GT")."""
_GENERIC_IGPU = re.compile(r"^(?:AMD\s+)?Radeon(?:\W+RX)?\W+(?:Vega\s+\d+\s+)?Graphics\b", re.I)
"""The names an APU's integrated GPU shares across chips (amdgpu.ids gives "Vega 8
Graphics" to Raven's chip, and Renoir's and Cezanne's drivers print it too)."""


def ryzen_gpu(model: str) -> NamedGPU | None:
    """The integrated GPU of a Ryzen processor named by its model number and suffix
    (:data:`~rocm_dl_guide.doctor.rules.PROCESSOR_MODELS` gives the chip's codename,
    ``pci-chips.json`` its target); None for a model without one (a desktop 5800X)."""
    from .rules import PROCESSOR_MODELS

    number = re.sub(r"\s+", "", model).upper()
    for pattern, codename in PROCESSOR_MODELS:
        if pattern.fullmatch(number):
            gfx = {c["gfx"] for c in chips.table()["chips"] if c["codename"] == codename}
            gfx.discard(None)
            if len(gfx) == 1:
                return NamedGPU(f"Ryzen {number}", gfx.pop(), codename, 0)
    return None


def named_gpus(text: str) -> list[NamedGPU]:
    """Every GPU ``text`` names by product name or PCI ID, with its chip's own target
    and the target printed beside it where one is; in the order they appear, once each."""
    found: dict[str, NamedGPU] = {}
    lines = [_RX.sub(_rx_words, line) for line in text.splitlines()]
    for n, line in enumerate(lines):
        marketing = _MARKETING.match(line)
        spans = [(marketing.group(2), line.find(marketing.group(2)))] if marketing else []
        spans += [(m.group(0), m.start()) for m in _PRODUCT.finditer(line)]
        for span, start in spans:
            hit = _lookup(span)
            if not hit:
                continue
            name, chip = hit
            after = line[start + len(name) :] if start >= 0 else ""
            shown = _GFX_AFTER.match(after)
            shown_gfx = shown.group(1) if shown else None
            if marketing and shown_gfx is None:  # the agent's or device's Name line
                if marketing.group(1) == "Marketing Name":
                    near = reversed(lines[max(0, n - 3) : n])
                else:
                    near = lines[n + 1 : n + 4]
                hits = (_AGENT_GFX.match(x) for x in near)
                shown_gfx = next((m.group(1) for m in hits if m), None)
            key = chip.gfx or name
            if key not in found or (shown_gfx and not found[key].shown_gfx):
                found[key] = NamedGPU(name, chip.gfx, chip.codename, chip.device_id, shown_gfx)
        for m in _BARE.finditer(line):
            hit = _lookup(f"RX {m.group(1)} {m.group(2)}")
            if hit and hit[1].gfx not in found:
                chip = hit[1]
                found[chip.gfx] = NamedGPU(m.group(0), chip.gfx, chip.codename, chip.device_id)
        for m in _PROCESSOR.finditer(line):
            gpu = processor_gpu(m.group(0).strip())
            if gpu and gpu.gfx not in found:
                found[gpu.gfx] = gpu
    ryzen = [g for m in _RYZEN.finditer(text) if (g := ryzen_gpu(m.group(1)))]
    # a discrete GPU named (AMD's, or a laptop's NVIDIA GPU) is the one the text is about
    discrete = any(not _GENERIC_IGPU.match(g.name) for g in found.values())
    discrete = discrete or bool(NVIDIA_GPU.search(text))
    shown = set(re.findall(r"\bgfx[0-9a-f]{3,4}\b", text))
    if ryzen and not discrete and shown <= {ryzen[0].gfx}:
        found = {ryzen[0].gfx: ryzen[0]}
    for device, revision in chips.pci_ids_in(text):
        chip = chips.by_pci_id(device, revision)
        if chip and chip.gfx and chip.gfx not in found:
            found[chip.gfx] = NamedGPU(chip.name or f"0x{device:04x}", chip.gfx, chip.codename,
                                       device)  # fmt: skip
    return list(found.values())


def masked(gpus: list[NamedGPU]) -> list[NamedGPU]:
    """The GPUs the text shows as another target than their chip's own: run as
    another target, which ``HSA_OVERRIDE_GFX_VERSION`` does."""
    return [g for g in gpus if g.shown_gfx and g.shown_gfx != g.gfx]


def real_gfx(agent: Agent) -> str | None:
    """The target of ``agent``'s chip (from rocminfo's ``Chip ID``, else its marketing
    name; :mod:`~rocm_dl_guide.doctor.chips`), which ``HSA_OVERRIDE_GFX_VERSION``
    hides: rocminfo prints the override's target as the agent's name. ``agent.gfx``
    where the chip is not known."""
    chip_id = re.search(r"0x([0-9a-fA-F]{4})", agent.extra.get("Chip ID", ""))
    chip = chips.by_pci_id(int(chip_id.group(1), 16)) if chip_id else None
    if chip and chip.gfx:
        return chip.gfx
    named = named_gpus(agent.marketing_name) if agent.marketing_name else []
    return named[0].gfx if len(named) == 1 else agent.gfx


def real_targets(targets: list[str], text: str) -> list[str]:
    """``targets`` with each target the text shows for a GPU whose chip is another
    replaced by the chip's own, and the targets of the GPUs the text names added."""
    gpus = named_gpus(text) if text else []
    swap = {g.shown_gfx: g.gfx for g in masked(gpus)}
    return list(dict.fromkeys([swap.get(t, t) for t in targets] + [g.gfx for g in gpus]))
