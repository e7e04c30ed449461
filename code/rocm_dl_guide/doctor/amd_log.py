"""The code objects an ``AMD_LOG_LEVEL`` log shows: the GPU targets found, those
missing, and the targets the program carries, in each format clr has printed them."""

from __future__ import annotations

import re

_DEVICE = re.compile(r"(?<![\w-])(amdgcn-amd-amdhsa--\S+) - \[(Found|Not Found)\]")
_BUNDLED = re.compile(r"(?:hipv4|hip)-amdgcn-amd-amdhsa--(\S+) - \[")
_MISSING_LIST = re.compile(r"Missing CO for these ISAs")
_LISTED_ISA = re.compile(r"^(?::\d+:\S+\s*:\s*\d+\s*:.*?\]\s*)?\s*amdgcn-amd-amdhsa--(\S+)\s*$")
_NO_CO = re.compile(
    r"Cannot find CO in the bundle \S+ for ISA: amdgcn-amd-amdhsa--(\S+)|"
    r"No compatible code objects found for: (gfx[0-9a-f]+)"
)
"""clr's other ``AMD_LOG_LEVEL`` forms of a missing code object (hip_fatbin.cpp): the
"Missing CO for these ISAs" list, one bundle without the ISA, and "No compatible code
objects found for"."""


def code_objects(text: str) -> tuple[list[str], list[str], list[str]]:
    """From ``AMD_LOG_LEVEL`` output (``hip_code_object.cpp``'s "Devices:" and
    "Bundled Code Objects:" lists): the GPU targets found, those not found, and
    the targets the program carries code objects for."""
    found, missing, bundled = [], [], []
    listing = False
    for line in text.splitlines():
        if _MISSING_LIST.search(line):
            listing = True
            continue
        listed = _LISTED_ISA.match(line) if listing else None
        if listed:
            missing.append(listed.group(1))
            continue
        listing = False
        if none := _NO_CO.search(line):
            missing.append(none.group(1) or none.group(2))
            continue
        device = _DEVICE.search(line)
        if device:
            target = device.group(1).removeprefix("amdgcn-amd-amdhsa--")
            (found if device.group(2) == "Found" else missing).append(target)
            continue
        carried = _BUNDLED.search(line)
        if carried and carried.group(1) not in bundled:
            bundled.append(carried.group(1))
    return found, missing, bundled
