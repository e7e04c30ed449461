"""What the doctor's checks are made of: the :class:`Check` each returns, and the
sourced facts they rest on.

The facts live in ``rocm_dl_guide/data/doctor-rules.json`` (package data, read
with :func:`importlib.resources.files`): every source a check cites
(:data:`SOURCES`, by key, through :func:`cite`), the ``HSA_OVERRIDE_GFX_VERSION``
families and the targets no override helps, the integrated GPUs, and the
error messages readers see with the checks that explain them. The checks
themselves are :mod:`~rocm_dl_guide.doctor.gpu_targets`' and
:mod:`~rocm_dl_guide.doctor.diagnose`'s; the rules that read a reader's error
text (``--log``) are :mod:`~rocm_dl_guide.doctor.logs`'.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from importlib import resources

# Check statuses, from best to worst.
OK, INFO, UNKNOWN, WARN, FAIL = "ok", "info", "unknown", "warn", "fail"


def slug(name: str) -> str:
    """``Kernel driver`` -> ``kernel-driver``: the default check id."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


@dataclass
class Check:
    name: str
    status: str
    message: str
    sources: tuple[str, ...] = ()
    id: str = ""
    """Stable identifier for scripts (``arch-mismatch``, ``device-access`` ...)."""
    fix: str = ""
    """What to do about it, when there is something to do."""

    def __post_init__(self) -> None:
        self.id = self.id or slug(self.name)

    @property
    def uncollected(self) -> bool:
        """Whether it says only that its fact was not collected. A report on text from
        another machine (neither rocminfo nor PyTorch's probe ran) has eight such
        checks: the text report names them on one line, and ``--json`` keeps each."""
        if self.status not in (UNKNOWN, INFO) or self.fix:
            return False
        message = self.message.removeprefix(f"{self.name}: ")
        return bool(_UNREAD.match(message)) or message.endswith("was not collected")


_UNREAD = re.compile(
    r"(?i)((?:rocminfo \(from snapshot [^)]*\): )?not collected\b[^;]*"
    r"|not checked \((?:its probe did not run|on ROCm, install[^)]*)\))$"
)


RULES_FILE = "data/doctor-rules.json"
"""The facts the rules rest on, as data, each with its sources (package data)."""


def _rules() -> dict:
    text = resources.files("rocm_dl_guide").joinpath(RULES_FILE).read_text(encoding="utf-8")
    return json.loads(text)


_RULES = _rules()

SOURCES: dict[str, str] = _RULES["sources"]
"""Every source a check cites, by key (an issue, a release note, a documentation page)."""

OVERRIDE_FAMILIES: dict[str, tuple[str, ...]] = {
    value: tuple(targets) for value, targets in _RULES["override_families"].items()
}
"""Consumer GPUs whose family has a supported sibling target with the same
instruction set: the documented (unofficial) ``HSA_OVERRIDE_GFX_VERSION`` values."""

OVERRIDE_FAMILY_SOURCES: dict[str, tuple[str, ...]] = {
    value: tuple(keys) for value, keys in _RULES["override_family_sources"].items()
}
"""The sources that report each family's override working (keys of :data:`SOURCES`)."""

PROCESSOR_MODELS: tuple[tuple[re.Pattern, str], ...] = tuple(
    (re.compile(pattern, re.IGNORECASE), codename)
    for pattern, codename in _RULES["processor_models"]["models"]
)
"""A Ryzen model number with its suffix (``5700U``) -> its integrated GPU's codename."""
PROCESSOR_SOURCES: tuple[str, ...] = tuple(_RULES["processor_models"]["sources"])

NO_OVERRIDE: dict[str, tuple[str, str | None, tuple[str, ...]]] = {
    gfx: (e["known"], e["index"], tuple(e["sources"])) for gfx, e in _RULES["no_override"].items()
}
"""Targets for which the sources say no ``HSA_OVERRIDE_GFX_VERSION`` works (the fix
is a PyTorch build that has the target): gfx -> (what is known, TheRock's nightly
index for it, source keys)."""

OVERRIDE_CAVEATS: dict[str, tuple[str, tuple[str, ...]]] = {
    gfx: (e["known"], tuple(e["sources"])) for gfx, e in _RULES["override_caveats"].items()
}
"""Targets whose family override is known to fail for some work (cited): gfx -> (what is
known, source keys). The override is still named, with the warning beside it."""

IGPU_TARGETS = frozenset(_RULES["igpu_targets"])
"""Integrated GPUs of AMD APUs (besides what the compatibility data lists)."""

ERROR_MESSAGES: dict[str, tuple[str, ...]] = {
    message: tuple(ids) for message, ids in _RULES["error_messages"].items()
}
"""What readers see, and the checks that explain it (the troubleshooting page's table)."""


def cite(*keys: str) -> tuple[str, ...]:
    """The URLs of :data:`SOURCES` ``keys`` (a :class:`KeyError` for an unknown key)."""
    return tuple(SOURCES[k] for k in keys)


def override_target(value: str | None) -> str | None:
    """``10.3.0`` -> ``gfx1030``, ``9.4.2`` -> ``gfx942``, ``9.0.10`` -> ``gfx90a``;
    None when ``value`` is not ``MAJOR.MINOR.STEPPING``."""
    m = re.fullmatch(r"\s*(\d+)\.(\d+)\.(\d+)\s*", value or "")
    if not m:
        return None
    major, minor, step = (int(x) for x in m.groups())
    if minor > 15 or step > 15:
        return None
    return f"gfx{major}{minor:x}{step:x}"
