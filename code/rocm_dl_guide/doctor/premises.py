"""The premises of the error reader's advice: where the program runs, and who it runs as.

A fix for /dev/kfd refused or a kernel driver that is missing depends on facts the
text may or may not show: a container (its fix is ``--device`` and the host's
driver, never a driver inside the image), WSL (no Linux kernel driver at all), the
user's groups (no ``usermod`` for a group the user is in). Each function here gives
the fix for what was seen, and names what it rests on.
"""

from __future__ import annotations

import re
from typing import Any

Facts = Any
""":class:`~rocm_dl_guide.doctor.log_details.Facts` (not imported: it imports this module)."""


def where_it_runs(seen: Facts) -> list[str]:
    """The premises a kernel-driver fix rests on: a container, WSL, or neither shown."""
    if seen.container:
        return [f"a container (the text shows: {seen.container_seen})"]
    if seen.wsl:
        return ["WSL 2 (the text shows it)"]
    return []


_HOST_DRIVER = (
    "in a container the kernel driver is the host's, never the image's: check it on the "
    "host (lsmod | grep amdgpu; dmesg | grep -i -e amdgpu -e kfd) and pass the devices in "
    "(docker run --device=/dev/kfd --device=/dev/dri --group-add video --group-add render)"
)
"""The container's side of every kernel-driver fix."""


def driver_fix(seen: Facts, host_fix: str) -> tuple[str, list[str]]:
    """(fix, premises) for a finding whose host fix is about the kernel driver: only the
    container's side where the text shows a container; both sides, each named, where it
    shows neither a container nor a host."""
    premises = where_it_runs(seen)
    if seen.container:
        return _HOST_DRIVER, premises
    return f"on a host: {host_fix}; {_HOST_DRIVER}", premises


ROOTLESS = (
    "a rootless engine (Podman, rootless Docker, distrobox or toolbox on Podman) maps the "
    "host's groups away: pass the host's GID (--group-add $(getent group render | cut -d: "
    "-f3), run on the host), or --group-add keep-groups with Podman"
)
"""The one way doctor words a rootless container's groups, wherever its fixes need it."""


def permission_fix(seen: Facts) -> tuple[str, str]:
    """(details, fix) for /dev/kfd refused, from the groups and container the text shows."""
    groups = seen.groups
    if seen.container and "render" in seen.group_add:
        return (
            "the container was started with --group-add render already",
            "a group name is looked up inside the container, whose render group may have "
            f"another number than the host's that owns /dev/kfd, and {ROOTLESS}; and check that "
            "the host user is in render (id -nG on the host)",
        )
    if groups is not None and "render" in groups:
        details = (
            f"the text shows the user in {', '.join(sorted(groups & {'render', 'video'}))} "
            "already: running usermod again changes nothing; log in again if it was added "
            "in this session (a new group applies to new sessions)"
        )
        if seen.container:
            fix = (
                "in a container, pass the devices (--device=/dev/kfd --device=/dev/dri) and the "
                "group by the host's number (--group-add $(getent group render | cut -d: -f3), "
                f"run on the host); {ROOTLESS}"
            )
        else:
            fix = (
                "the user is in render already: check the owner and mode of /dev/kfd "
                "(ls -l /dev/kfd; crw-rw---- root render) and that the kernel driver installed "
                "cleanly (dmesg | grep kfd)"
            )
        return details, fix
    outside = ({"render", "video"} - groups) if groups is not None else seen.not_member
    if outside:
        shown = "shows the user in " + ", ".join(sorted(groups)) if groups else "says the user is"
        details = f"the text {shown}, not in {' or '.join(sorted(outside))}"
        add = " ".join(f"--group-add {g}" for g in sorted(outside))
        if seen.container:
            return (
                details,
                f"start the container with {add} (and --device=/dev/kfd --device=/dev/dri)",
            )
        return details, (
            f"sudo usermod -aG {','.join(sorted(outside))} $USER, then log out and in again "
            "(groups apply at login)"
        )
    if seen.container:
        return "", (
            "docker run --device=/dev/kfd --device=/dev/dri --group-add render --group-add video"
        )
    return "", ""


def override_alone(gfx: str, value: str, others: str) -> str:
    """The override fix for ``gfx`` where the GPUs of ``others`` share the process:
    HSA_OVERRIDE_GFX_VERSION applies to every GPU of a process, so only a process that
    sees ``gfx``'s GPU alone may set it."""
    return (
        f"HSA_OVERRIDE_GFX_VERSION applies to every GPU a process sees, and {others} is here "
        f"too: give the {gfx} alone the override, as HSA_OVERRIDE_GFX_VERSION_N={value} (N: "
        f"its Node number in rocminfo), or set {value} only in a process that sees the {gfx} "
        "alone (HIP_VISIBLE_DEVICES set to its index); never exported for the others"
    )


def no_hip_gpus(finding: Any, text: str, seen: Facts, ids: set[str]) -> bool:
    """In a container started with the devices, the devices are not the question: what
    the container sees of them is."""
    if seen.container and not re.search(r"/dev/kfd", text):
        finding.premises = [f"a container (the text shows: {seen.container_seen})"]
        finding.premises.append("the text shows no /dev/kfd passed in")
        finding.fix = (
            "give the container the GPU: --device /dev/kfd --device /dev/dri --group-add video "
            "--group-add render (distrobox: --additional-flags with them; Compose: devices: and "
            f"group_add:); {ROOTLESS}"
        )
        return True
    if not (seen.container and re.search(r"--device[= ]/dev/kfd", text)):
        return True
    finding.premises = [
        f"a container (the text shows: {seen.container_seen})",
        "--device /dev/kfd and /dev/dri were passed",
    ]
    finding.fix = (
        "the devices were passed, so check what the container got: ls -l /dev/kfd /dev/dri "
        "and rocminfo inside it; where they are missing or rocminfo sees no GPU, check the "
        "engine (docker context ls): Docker Desktop runs containers in a virtual machine that "
        f"has no GPU, so use Docker Engine on the host; {ROOTLESS}"
    )
    return True


def kfd_missing(finding: Any, text: str, seen: Facts, ids: set[str]) -> bool:
    """Under WSL there is no /dev/kfd to pass: the WSL finding says what there is. Docker's
    daemon refusing the device means the host lacks it; rocminfo saying the kernel has
    amdgpu means only this environment does (a container it was not passed into)."""
    if seen.wsl:
        return False
    daemon = "error gathering device information while adding custom device" in text
    windows = re.search(r"\bWindows (?:10|11|Server)\b|\bPS [A-Z]:\\", text)
    loaded = re.search(r"ROCk module(?: version \S+)? is loaded", text)
    finding.premises = where_it_runs(seen)
    if windows:
        finding.premises.append(f"Windows (the text shows: {windows.group(0)})")
        finding.fix = (
            "Docker on Windows runs Linux containers in a virtual machine that has no "
            "/dev/kfd: ROCm containers need a Linux host with the amdgpu driver, or WSL 2 with "
            "a release that has a WSL recipe (its containers get /dev/dxg)"
        )
    elif daemon:
        finding.premises.append("Docker's daemon could not find /dev/kfd on its host")
        finding.fix = (
            "the flags are right; the host the daemon runs on has no /dev/kfd: on that host, "
            "ls -l /dev/kfd and lsmod | grep amdgpu (load or install the driver there); Docker "
            "Desktop's daemon runs in a virtual machine without the GPU: use Docker Engine"
        )
    elif loaded:
        finding.premises.append("amdgpu loaded in the kernel (rocminfo), no /dev/kfd here")
        finding.fix = (
            "the kernel has the driver, but this environment has no /dev/kfd: start the "
            "container with --device=/dev/kfd --device=/dev/dri --group-add video --group-add "
            "render (Apptainer: --bind=/dev/kfd,/dev/dri; Kubernetes: AMD's device plugin)"
        )
    return True
