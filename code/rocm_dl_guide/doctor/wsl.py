"""ROCm under WSL 2: detected from the machine, advised on WSL's own terms.

Under WSL there is no amdgpu kernel driver in Linux and no ``/dev/kfd``: the
GPU reaches Linux through ``/dev/dxg`` from AMD's Windows driver, and ROCm (7.1
and later) reaches it through the ROCDXG library (``librocdxg.so``), loaded when
``HSA_ENABLE_DXG_DETECTION=1`` (ROCm/librocdxg's README). So the advice for a
native Linux machine (install ``amdgpu-dkms``, reboot, join ``render``) is
wrong there: :func:`checks` gives WSL's, and the other checks defer to it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .rules import FAIL, INFO, OK, UNKNOWN, WARN, Check

if TYPE_CHECKING:  # pragma: no cover
    from .system import SystemReport

README = "https://github.com/ROCm/librocdxg/blob/021a477ae052e38dc03c82213480157b20a10735/README.md"
GUIDE = "https://rocm.docs.amd.com/projects/radeon-ryzen/en/latest/index.html"
SOURCES = (README, GUIDE)

MATRIX = (
    {
        "librocdxg": "1.1.0",
        "rocm": "7.2",
        "windows_driver": "AMD's current Windows driver (amd.com/en/support/download/drivers.html)",
        "os": ("Windows 11", "Ubuntu 24.04 LTS", "Ubuntu 22.04 LTS"),
        "gpus": (
            "AMD Radeon RX 9070",
            "AMD Radeon RX 9070 XT",
            "AMD Radeon RX 9070 GRE",
            "AMD Radeon AI PRO R9700",
            "AMD Radeon RX 9060",
            "AMD Radeon RX 9060 XT",
            "AMD Radeon RX 7900 XTX",
            "AMD Radeon RX 7900 XT",
            "AMD Radeon RX 7900 GRE",
            "AMD Radeon PRO W7900",
            "AMD Radeon PRO W7900 Dual Slot",
            "AMD Radeon PRO W7800",
            "AMD Radeon PRO W7800 48GB",
            "AMD Radeon RX 7800 XT",
            "AMD Radeon PRO W7700",
            "AMD Ryzen AI Max+ 395",
            "AMD Ryzen AI Max 390",
            "AMD Ryzen AI Max 385",
            "AMD Ryzen AI 9 HX 375",
            "AMD Ryzen AI 9 HX 370",
            "AMD Ryzen AI 9 365",
        ),
    },
)
"""AMD's WSL support matrix, as ROCm/librocdxg's README gives it (:data:`README`)."""


def supported(name: str | None) -> bool | None:
    """Whether a GPU (its marketing name) is in :data:`MATRIX` (None: no name)."""
    if not name:
        return None
    wanted = name.lower().replace("amd ", "").strip()
    return any(wanted == g.lower().replace("amd ", "") for row in MATRIX for g in row["gpus"])


WSL_LINE = "WSL environment detected"
"""What rocminfo prints under WSL in place of its 'ROCk module' line (the package's
``cpu-only.txt`` sample, ROCm 6.3.4; corpus case 39, ROCm 7.2)."""


def rocminfo_says_wsl(sysrep: SystemReport) -> bool:
    """Whether rocminfo's output (read here or from a snapshot) has its WSL line."""
    cap = sysrep.rocminfo_capture
    notes = " ".join(sysrep.rocminfo.notes or ())
    return WSL_LINE in notes or WSL_LINE in ((cap.text if cap else None) or "")


def device_line(host) -> str | None:
    """How the device-access check should speak of WSL (None: not WSL): /dev/dxg is named
    as the GPU's device only where it was seen."""
    facts = host.wsl if host else None
    if facts is None or not facts.is_wsl:
        return None
    if facts.dxg:
        return "WSL 2: the GPU is /dev/dxg here, not /dev/kfd and /dev/dri (see the WSL 2 check)"
    if facts.dxg is None:
        return "WSL 2: whether /dev/dxg (the GPU's device under WSL) exists was not collected"
    return "WSL 2: there is no /dev/dxg, the GPU's device under WSL (see the WSL 2 check)"


def checks(sysrep: SystemReport) -> list[Check]:
    """WSL's own checks, only where this is WSL 2 (the host facts say so, or rocminfo's
    output has its 'WSL environment detected' line)."""
    host = sysrep.host
    facts = host.wsl if host else None
    name, cid = "WSL 2", "wsl"
    never = "never install amdgpu-dkms or a kernel driver inside WSL, and no reboot of Linux helps"
    if (facts is None or not facts.is_wsl) and rocminfo_says_wsl(sysrep):
        msg = (
            f"rocminfo says '{WSL_LINE}'; whether /dev/dxg exists and librocdxg.so is "
            "installed was not collected; no Linux kernel driver belongs inside WSL: AMD's "
            "Windows driver serves the GPU"
        )
        return [Check(name, UNKNOWN, msg, SOURCES, cid)]
    if facts is None or not facts.is_wsl:
        return []
    if facts.dxg is None:
        msg = (
            "this is WSL, but whether /dev/dxg exists and librocdxg.so is installed was not "
            "collected; " + never
        )
        return [Check(name, UNKNOWN, msg, SOURCES, cid)]
    if not facts.dxg:
        msg = (
            "this is WSL but there is no /dev/dxg: the GPU is not passed to Linux (WSL 1, or "
            "an old WSL); " + never
        )
        fix = "wsl --set-version <distro> 2 and wsl --update in Windows, then wsl --shutdown"
        return [Check(name, FAIL, msg, SOURCES, cid, fix)]
    if not facts.librocdxg:
        msg = (
            "WSL 2 with /dev/dxg, but ROCm's WSL library librocdxg.so is not installed: "
            "ROCm cannot reach the GPU; " + never
        )
        fix = (
            "install AMD's Windows driver on the host, ROCm 7.2 in WSL, then build and install "
            "librocdxg (github.com/ROCm/librocdxg) and export HSA_ENABLE_DXG_DETECTION=1"
        )
        return [Check(name, FAIL, msg, SOURCES, cid, fix)]
    env = dict(host.env)
    if env.get("HSA_ENABLE_DXG_DETECTION") != "1":
        msg = f"librocdxg is installed ({facts.librocdxg}) but HSA_ENABLE_DXG_DETECTION is not 1"
        fix = "export HSA_ENABLE_DXG_DETECTION=1 (in containers: -e HSA_ENABLE_DXG_DETECTION=1)"
        return [Check(name, WARN, msg, SOURCES, cid, fix)]
    gpus = [a.marketing_name for a in sysrep.rocminfo.gpus]
    outside = [g for g in gpus if supported(g) is False]
    if outside:
        rows = MATRIX[0]
        msg = (
            f"{', '.join(outside)} is not in AMD's WSL support matrix (librocdxg "
            f"{rows['librocdxg']}, ROCm {rows['rocm']}.x); it may work, unsupported"
        )
        return [Check(name, INFO, msg, SOURCES, cid)]
    msg = f"WSL 2: /dev/dxg, {facts.librocdxg}, HSA_ENABLE_DXG_DETECTION=1; " + never
    return [Check(name, OK, msg, SOURCES, cid)]
