"""How a setup hands the GPU to a program, as the reader's text shows it: the
container's device requests, an LXC container's device entries, the variables
that choose the visible GPUs, the compiler a HIP build uses, and ROCm's tools that
are missing.

Part of :mod:`~rocm_dl_guide.doctor.setup_text` (its :data:`RULES` and
:data:`DETAILS` are added there); each rule is a class of setups, recognised by
what any report of it prints.
"""

from __future__ import annotations

import re

from .log_details import Facts, Finding, Rule
from .rules import cite

HIP_ENV = "https://rocm.docs.amd.com/projects/HIP/en/latest/reference/env_variables.html"
ROCM_DOCKER = "https://rocm.docs.amd.com/projects/install-on-linux/en/latest/how-to/docker.html"

RULES: tuple[Rule, ...] = (
    Rule(
        "docker-gpu-capabilities",
        r'could not select device driver "[^"]*" with capabilities',
        "a container asked for a GPU the NVIDIA way",
        "--gpus, and Compose's deploy: resources: devices: with capabilities: [gpu], ask "
        "Docker for a device driver that only NVIDIA's container toolkit registers; AMD GPUs "
        "are passed in as devices",
        "pass the GPU's devices instead: docker run --device /dev/kfd --device /dev/dri "
        "--group-add video --group-add render (Compose: devices: - /dev/kfd - /dev/dri and "
        "group_add:), and drop --gpus or the capabilities block",
        (ROCM_DOCKER, "https://docs.docker.com/compose/how-tos/gpu-support/"),
        ("device-access",),
    ),
    Rule(
        "lxc-device-gid",
        r"^dev\d+:\s*/dev/kfd\b[^\n]*\bgid=\d+",
        "an LXC container's /dev/kfd passed with a group's number",
        "Proxmox passes each device into the container with the group number its entry "
        "gives; /dev/kfd must belong to the container's render group (the one its user is "
        "in), as the render nodes do, or ROCm inside cannot open it",
        "give /dev/kfd the container's render group number, as the render nodes have it: "
        "devN: /dev/kfd,gid=RENDER (getent group render inside the container prints it), "
        "then restart the container",
        ("https://pve.proxmox.com/wiki/Linux_Container#pct_settings",),
        ("device-access",),
    ),
    Rule(
        "no-render-node",
        r"/dev/dri\S*[^\n]*(?:No such file or directory|does ?n[o']t exist|is missing)"
        r"|\bno (?:card\d* or )?renderD\w*",
        "no render node (/dev/dri)",
        "ROCm opens a GPU through two device files: /dev/kfd for compute and the GPU's "
        "render node, /dev/dri/renderD*; the amdgpu driver makes the render node when it "
        "sets the GPU up, so without one ROCm finds no GPU, even where /dev/kfd exists",
        "on the host (a container only gets what the host has): sudo dmesg | grep -iE "
        "'amdgpu|drm' says why the driver did not set the GPU up, and ls /sys/class/drm "
        "should list a cardN and a renderDN for it; a kernel without the GPU's driver or "
        "firmware (some appliance and NAS systems) needs them; in a container, then pass "
        "it in with --device /dev/dri",
        (ROCM_DOCKER, "https://docs.kernel.org/gpu/drm-uapi.html#render-nodes"),
        ("device-access",),
    ),
    Rule(
        "amdgpu-module-refused",
        r"Key was rejected by service|Required key not available|Loading of unsigned module is "
        r"rejected|modprobe: ERROR: could not insert '?amdgpu|(?:impossible|unable|fail(?:ed|s)?"
        r"|can ?not|could ?n[o']t) (?:to )?load (?:the )?amdgpu(?: kernel)? module",
        "the amdgpu kernel module does not load",
        "a module that DKMS built (amdgpu-dkms) is signed by no key the firmware trusts, so "
        "with UEFI Secure Boot on the kernel refuses it ('Key was rejected by service'), often "
        "first after a reboot; or DKMS did not build it for the kernel now running; or the "
        "kernel's command line keeps it out (modprobe.blacklist=amdgpu, nomodeset)",
        "mokutil --sb-state says whether Secure Boot is on: then enrol DKMS's signing key (sudo "
        "mokutil --import /var/lib/shim-signed/mok/MOK.der, reboot, and enrol it in the MOK "
        "manager) or turn Secure Boot off; dkms status shows whether amdgpu is built for uname "
        "-r (sudo dkms autoinstall builds it); cat /proc/cmdline shows a blacklist or nomodeset",
        (
            "https://wiki.ubuntu.com/UEFI/SecureBoot/DKMS",
            "https://docs.kernel.org/admin-guide/module-signing.html",
        ),
        ("kernel-driver",),
    ),
    Rule(
        "amdsmi-no-hsmp",
        r"ESMI Not initialized|AMDSMI_STATUS_NO_HSMP|\bhsmp\b[^\n]*not (?:found|available)",
        "amd-smi could not reach the CPU's HSMP interface",
        "amd-smi also reads AMD CPUs (its E-SMI part) through the HSMP interface, which needs "
        "the amd_hsmp kernel driver and HSMP support on in the firmware; an APU such as the "
        "MI300A fails to initialise without it, though its GPU is not at fault",
        "sudo modprobe amd_hsmp (and turn 'HSMP Support' on in the BIOS where it is off), "
        "then run amd-smi again; rocm-smi and rocminfo read the GPU without it",
        ("https://github.com/amd/esmi_ib_library",),
    ),
    Rule(
        "copy-hangs",
        r"\bhipMemcpy\w*\b[^\n]*\b(?:hangs?|hung|stuck|freez\w*|never returns)\b"
        r"|\b(?:hangs?|hung|stuck)\b[^\n]*\bhipMemcpy",
        "a memory copy that hangs",
        "ROCm copies between host and GPU with the GPU's SDMA engines; on some GPUs and APUs, "
        "and with some kernel drivers, an SDMA copy never completes and the call hangs",
        "try HSA_ENABLE_SDMA=0 (the copies then run as GPU kernels); if that helps, say so in "
        "a report with the GPU, ROCm and kernel versions; a newer ROCm may have fixed it",
        ("https://rocm.docs.amd.com/en/latest/reference/env-variables.html",),
    ),
    Rule(
        "rocm-tool-missing",
        r"\b(rocm-smi|amd-smi|rocminfo|rocm_agent_enumerator|hipcc|hipconfig|rocprofv?\d?)"
        r"(?:: command not found|: not found|: No such file or directory)",
        "a ROCm tool that is not installed, or not on the PATH",
        "ROCm's command-line tools come in packages of their own and live in /opt/rocm/bin: "
        "an image or an install that carries only the libraries a program needs (a build or "
        "runtime image, PyTorch's wheels) has none of them, and a ROCm from AMD's packages "
        "puts them on the PATH only through /opt/rocm/bin",
        "install the tool's package (rocm-smi: rocm-smi-lib; amd-smi: amd-smi-lib; rocminfo: "
        "rocminfo; hipcc: hipcc), in an image through its Dockerfile; where ROCm is installed, "
        "add /opt/rocm/bin to the PATH",
        (
            "https://rocm.docs.amd.com/projects/install-on-linux/en/docs-6.4.0/reference/"
            "package-manager-integration.html",
        ),
    ),
    Rule(
        "offload-arch-not-hip-compiler",
        r"unrecognized command[- ]line option [‘'`\"]?--offload-arch",
        "HIP code compiled by the system's C++ compiler",
        "--offload-arch is an option of ROCm's clang (hipcc); the build handed HIP sources "
        "to the system's GNU c++, which does not know it",
        "build with ROCm's compiler: CXX=hipcc (or CXX=/opt/rocm/llvm/bin/clang++) before "
        "pip or cmake, or CMake's -DCMAKE_HIP_COMPILER=/opt/rocm/llvm/bin/clang++; start "
        "from a clean build folder",
        ("https://rocm.docs.amd.com/projects/HIP/en/latest/install/build.html",),
    ),
)
"""Device requests, device entries and compilers, the more specific first."""


def _lxc_gid(finding: Finding, text: str, seen: Facts, ids: set[str]) -> bool:
    """Where the render nodes have another number than /dev/kfd, that is render's."""
    kfd = re.search(r"/dev/kfd\b[^\n]*\bgid=(\d+)", finding.line).group(1)
    render = set(re.findall(r"/dev/dri/renderD\d+\b[^\n]*\bgid=(\d+)", text))
    finding.details = f"/dev/kfd is passed with gid {kfd}"
    if render and kfd not in render:
        number = sorted(render)[0]
        finding.details += f", the render nodes with gid {number}"
        finding.fix = (
            f"give /dev/kfd the render nodes' group: /dev/kfd,gid={number} (the container's "
            "render group), then restart the container"
        )
    return True


_PACKAGES = {"rocm-smi": "rocm-smi-lib", "amd-smi": "amd-smi-lib", "hipcc": "hipcc"}


def _tool(finding: Finding, text: str, seen: Facts, ids: set[str]) -> bool:
    """Which tool, and its package."""
    tool = re.search(
        r"\b(rocm-smi|amd-smi|rocminfo|rocm_agent_enumerator|hip\w+|rocprof\w*)", finding.line
    )
    name = tool.group(1) if tool else "the tool"
    package = _PACKAGES.get(name, "rocminfo" if name == "rocm_agent_enumerator" else name)
    finding.details = f"{name} is not found"
    where = "in the image (its Dockerfile)" if seen.container else "with the package manager"
    finding.fix = (
        f"install {package} {where}, or, where ROCm is installed, add /opt/rocm/bin to the "
        f"PATH (ls /opt/rocm/bin/{name} says whether it is there)"
    )
    return True


def _module(finding: Finding, text: str, seen: Facts, ids: set[str]) -> bool:
    """In a container the kernel, and its modules, are the host's."""
    if seen.container:
        finding.premises = [f"a container (the text shows: {seen.container_seen})"]
        finding.fix = f"on the host (a container runs on the host's kernel): {finding.rule.fix}"
    return True


def _render_node(finding: Finding, text: str, seen: Facts, ids: set[str]) -> bool:
    """Inside a container that the text does not show the host lacking the node, the
    container was not given it."""
    host = re.search(r"/dev/dri[^\n]*\b(?:on|of) (?:the )?host|\bhost\b[^\n]*/dev/dri", text, re.I)
    if seen.container and not host:
        finding.premises = [f"a container (the text shows: {seen.container_seen})"]
        finding.fix = (
            "pass the render nodes in: --device /dev/dri with --device /dev/kfd (Compose: "
            "devices:); where the host lacks them too (ls /dev/dri on the host), the host's "
            "driver did not set the GPU up: sudo dmesg | grep -iE 'amdgpu|drm' there"
        )
    return True


def visible_twice(seen: Facts) -> Finding | None:
    """Both ROCR_VISIBLE_DEVICES and HIP_VISIBLE_DEVICES set: HIP's indices count
    among the GPUs ROCr left visible, so the same index in both hides the wrong one."""
    rocr, hip = (seen.env.get(v) for v in ("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES"))
    if rocr is None or hip is None:
        return None
    found = Finding(TWICE_RULE, "", 0)
    found.details = f"the text sets ROCR_VISIBLE_DEVICES={rocr} and HIP_VISIBLE_DEVICES={hip}"
    return found


TWICE_RULE = Rule(
    "visible-devices-twice",
    "",
    "GPUs selected twice: ROCR_VISIBLE_DEVICES and HIP_VISIBLE_DEVICES",
    "ROCr applies ROCR_VISIBLE_DEVICES first; HIP_VISIBLE_DEVICES then counts among the "
    "GPUs left, from 0: ROCR_VISIBLE_DEVICES=1 with HIP_VISIBLE_DEVICES=1 asks for a second "
    "GPU among one, and no GPU is visible",
    "set one of them: ROCR_VISIBLE_DEVICES (AMD's advice on Linux), or HIP_VISIBLE_DEVICES "
    "with the indices counted after it",
    (HIP_ENV,),
    ("gpu-support",),
)


def cuda_visible(seen: Facts, text: str) -> Finding | None:
    """CUDA_VISIBLE_DEVICES set where the text shows an AMD GPU or ROCm: HIP reads it
    too, so a value meant for NVIDIA's GPUs hides or picks AMD's as well."""
    value = seen.env.get("CUDA_VISIBLE_DEVICES")
    if value is None or not re.search(r"\bROCm|\bHIP|\bhip|Radeon|Instinct|\bgfx\d", text, re.I):
        return None
    found = Finding(CUDA_RULE, "", 0)
    found.details = f"the text sets CUDA_VISIBLE_DEVICES={value}"
    if value.strip() not in ("", "-1"):
        found.details += (
            ": HIP selects by it as by HIP_VISIBLE_DEVICES, counting among the GPUs "
            "ROCR_VISIBLE_DEVICES leaves, and a program that reads both (Ray) may require "
            "them to agree"
        )
        found.fix = (
            f"select AMD GPUs with one variable: HIP_VISIBLE_DEVICES={value} alone (or the "
            "same value in both), and no ROCR_VISIBLE_DEVICES that leaves fewer GPUs than "
            "the index asks for"
        )
    return found


CUDA_RULE = Rule(
    "cuda-visible-devices-on-amd",
    "",
    "CUDA_VISIBLE_DEVICES also chooses AMD GPUs",
    "HIP reads CUDA_VISIBLE_DEVICES as it reads HIP_VISIBLE_DEVICES (for CUDA programs' "
    "sake): a value meant for NVIDIA's GPUs (-1 to hide them) hides or picks AMD's too",
    "unset it where an AMD GPU should stay visible; choose AMD's GPUs with "
    "HIP_VISIBLE_DEVICES or ROCR_VISIBLE_DEVICES, and keep a program off NVIDIA's GPUs with "
    "its own device option",
    (HIP_ENV, *cite("gpu-isolation")),
)

DETAILS = {
    "lxc-device-gid": _lxc_gid,
    "no-render-node": _render_node,
    "rocm-tool-missing": _tool,
    "amdgpu-module-refused": _module,
}
"""Rule id -> what fills a finding of it from the text (False drops the finding)."""
