"""Which ROCm release each part of a setup was built for, as the reader's text shows it.

Part of :mod:`~rocm_dl_guide.doctor.setup_text` (its :func:`finish` adds these
findings). A PyTorch wheel names the ROCm release it was built for in its version
(``2.0.1+rocm5.4.2``); a system's ROCm shows in its packages' names and versions
(``rocm-runtime-5.7.2``, ``rocm-core 6.0.2``), its install folder (``/opt/rocm-6.2.0``),
an issue form's "ROCm Version" field, or the amdgpu-install package.
"""

from __future__ import annotations

import re

from .log_details import Finding, Rule
from .wsl_text import release_in

_WHEEL = re.compile(r"\b\d+\.\d+(?:\.\d+)?(?:\.dev\d+)?\+rocm(\d+\.\d+)(?:\.\d+)?\b")
"""A ROCm wheel's version: its local label names the release it was built for."""
_PACKAGE = re.compile(
    r"\b(?:rocm-core|rocm-runtime|rocm-hip-runtime|hip-runtime-amd|hsa-rocr|rocm-hip-sdk)"
    r"[\s|:=_-]+v?(\d+\.\d+(?:\.\d+)?)\b",
    re.IGNORECASE,
)
"""A system ROCm package with its version (a package manager's line, a table's row)."""


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in version.split(".")[:2])


def system_release(text: str) -> str | None:
    """The system ROCm release the text shows by its packages, else its install folder,
    issue form or installer (not a release named in passing, which may be the wheel's)."""
    if m := _PACKAGE.search(text):
        return m.group(1)
    found = release_in(text)
    forms = ("ROCm Version", "/opt/rocm-", "amdgpu-install", "repo.radeon.com/rocm/apt/")
    return found if found and any(w in text for w in forms) else None


def wheel_older_than_system(text: str) -> Finding | None:
    """A PyTorch wheel built for an older ROCm release (major.minor) than the system's."""
    wheel = _WHEEL.search(text)
    system = system_release(text)
    if not wheel or not system or _key(wheel.group(1)) >= _key(system):
        return None
    built, mm = wheel.group(1), ".".join(system.split(".")[:2])
    found = Finding(WHEEL_RULE, "", 0)
    found.details = (
        f"PyTorch {wheel.group(0)} is built for ROCm {built}; the system has ROCm {system}"
    )
    found.fix = (
        f"install PyTorch built for ROCm {mm}: pip install torch --index-url "
        f"https://download.pytorch.org/whl/rocm{mm} (where that index has no build, the newest "
        f"index not newer than {mm}, or AMD's wheels for {mm} from repo.radeon.com)"
    )
    return found


WHEEL_RULE = Rule(
    "wheel-older-than-system-rocm",
    "",
    "PyTorch built for an older ROCm release than the system's",
    "a ROCm wheel carries its own ROCm libraries, but it runs on the system's kernel driver, "
    "and where the system puts its own ROCm runtime on the loader's path (NixOS, Arch, a "
    "LD_LIBRARY_PATH) it may load that instead; an older wheel may also lack a newer GPU's "
    "kernels: crashes in the runtime (libhsa-runtime64, rocr) follow",
    "install PyTorch built for the system's ROCm release (its major.minor)",
    (
        "https://pytorch.org/get-started/locally/",
        "https://rocm.docs.amd.com/projects/install-on-linux/en/docs-6.2.0/how-to/3rd-party/"
        "pytorch-install.html",
    ),
    ("pytorch",),
)
