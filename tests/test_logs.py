"""doctor --log: the reader's own error text, recognised and explained.

Every text below is real output in its upstream format, quoted from the public
report named beside it (ROCm's, PyTorch's and rocBLAS's issue trackers, and the
AMD_LOG_LEVEL lines HIP's hip_code_object.cpp prints).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import doctor_cli
from rocm_dl_guide.doctor import logs, snapshot, wsl_text

# ROCm/legacy-rocm-build#5379 (an unprivileged LXC container, user in render)
KFD_INVALID = """ROCk module is loaded
Unable to open /dev/kfd read-write: Invalid argument
root is member of render group
"""
# ROCm/ROCm-docker#116 (rocm/rocm-terminal started without the render group)
KFD_DENIED = """# rocminfo
ROCk module is loaded
Unable to open /dev/kfd read-write: Permission denied
Failed to get user name to check for video group membership
"""
# ROCm/legacy-rocm-build#1211 (in render already, still refused)
KFD_DENIED_IN_RENDER = """Unable to open /dev/kfd read-write: Operation not permitted
maculele is member of render group
"""
# ROCm/legacy-rocm-build#2232 (a GPU the kernel driver does not support)
OUT_OF_RESOURCES = """ROCk module is loaded

Unable to open /dev/kfd read-write: Cannot allocate memory

igor is member of render group

hsa api call failure at: /src/rocminfo/rocminfo.cc:1142

Call returned HSA_STATUS_ERROR_OUT_OF_RESOURCES: The runtime failed to allocate the necessary \
resources. This error may also occur when the core runtime library needs to spawn threads or \
create internal OS-specific events.
"""


def _carried(target: str) -> str:
    triple = f"amdgcn-amd-amdhsa--{target}"
    return f"    hipv4-{triple} - [code object targetID is {triple}]"


# HIP's AMD_LOG_LEVEL=1 lines: two RX 7900 found, the Ryzen's integrated gfx1036 not
IGPU_CODE_OBJECTS = "\n".join(
    ":1:hip_code_object.cpp      :509 : 221750325581 us: 1255284: [tid:0x7fcc46391bc0] " + s
    for s in (
        "hipErrorNoBinaryForGpu: Unable to find code object for all current devices!",
        "  Devices:",
        "    amdgcn-amd-amdhsa--gfx1100 - [Found]",
        "    amdgcn-amd-amdhsa--gfx1100 - [Found]",
        "    amdgcn-amd-amdhsa--gfx1036 - [Not Found]",
        "  Bundled Code Objects:",
        "    host-x86_64-unknown-linux - [Unsupported]",
        _carried("gfx1030"),
        _carried("gfx1100"),
    )
)
# a wheel without gfx1100, run with AMD_LOG_LEVEL=3 (quoted in a ROCm issue, 2023-11-17)
WHEEL_WITHOUT_TARGET = """RuntimeError: HIP error: invalid device function
hipErrorNoBinaryForGpu: Unable to find code object for all current devices!
  Devices:
    amdgcn-amd-amdhsa--gfx1100 - [Not Found]
  Bundled Code Objects:
    host-x86_64-unknown-linux-- - [Unsupported]
    hipv4-amdgcn-amd-amdhsa--gfx1030 - [code object targetID is amdgcn-amd-amdhsa--gfx1030]
    hipv4-amdgcn-amd-amdhsa--gfx900 - [code object targetID is amdgcn-amd-amdhsa--gfx900]
"""
# ROCm/rocBLAS#1300
TENSILE = (
    "rocBLAS error: Cannot read /opt/rocm/rocblas/lib/rocblas/library/TensileLibrary.dat: "
    "No such file or directory\nAborted (core dumped)\n"
)
# ROCm/hip#3799
NO_HIP_GPUS = (
    '  File "/home/guest/project/pytorch/torch/cuda/__init__.py", line 383, in _lazy_init\n'
    "    torch._C._cuda_init()\n"
    "RuntimeError: No HIP GPUs are available\n"
)
# vladmandic/sdnext#913 (the kernel's log) and ROCm/legacy-rocm-build#1973 (gdb)
SEGFAULT_DMESG = (
    "kernel: python3[40923]: segfault at 100 ip 00007f2711b2d282 sp 00007fffa29a1530 error 4 "
    "in libamdhip64.so[7f2711a00000+3f3000] likely on CPU 9 (core 1, socket 0)\n"
)
SEGFAULT_GDB = """Segmentation fault (core dumped)
#0  0x00007fffadcdb335 in ?? () from /opt/rocm-5.4.2/lib/libamdhip64.so
#1  0x00007fffadcdb4bd in ?? () from /opt/rocm-5.4.2/lib/libamdhip64.so
"""


def ids(text: str) -> list[str]:
    return [f.rule.id for f in logs.read(text)]


def test_invalid_argument_on_kfd_is_not_a_permission_problem():
    (found,) = logs.read(KFD_INVALID)
    assert found.rule.id == "kfd-invalid-argument" and found.line_number == 2
    assert "not a permission problem" in found.rule.causes
    assert "usermod" not in found.rule.fix and "device-access" in found.rule.explained_by
    assert any("5379" in s for s in found.rule.sources)


def test_permission_denied_on_kfd_and_already_in_render():
    (denied,) = logs.read(KFD_DENIED)
    assert denied.rule.id == "kfd-permission" and "--group-add render" in denied.rule.fix
    assert denied.details == ""
    (again,) = logs.read(KFD_DENIED_IN_RENDER)
    assert "log in again" in again.details and "usermod again changes nothing" in again.details


def test_out_of_resources_after_an_hsa_call_failure():
    assert ids(OUT_OF_RESOURCES) == ["hsa-call-failure", "out-of-resources"]
    found = logs.read(OUT_OF_RESOURCES)[1]
    assert "not supported in kfd" in found.rule.causes and found.line_number == 9


def test_code_objects_name_the_integrated_gpu_that_has_none():
    found, missing, bundled = logs.code_objects(IGPU_CODE_OBJECTS)
    assert found == ["gfx1100", "gfx1100"] and missing == ["gfx1036"]
    assert bundled == ["gfx1030", "gfx1100"]
    (finding,) = logs.read(IGPU_CODE_OBJECTS)
    assert finding.rule.id == "no-binary"
    assert "no code object for gfx1036" in finding.details
    assert "integrated GPU" in finding.details and "HIP_VISIBLE_DEVICES" in finding.details


def test_a_wheel_without_the_cards_target():
    assert ids(WHEEL_WITHOUT_TARGET) == ["invalid-device-function", "no-binary"]
    first = logs.read(WHEEL_WITHOUT_TARGET)[0]
    assert first.details == ("no code object for gfx1100 (the program carries gfx1030, gfx900)")
    assert "arch-mismatch" in first.rule.explained_by


@pytest.mark.parametrize(
    "text, rule",
    [
        (TENSILE, "tensile"),
        (NO_HIP_GPUS, "no-hip-gpus"),
        (SEGFAULT_DMESG, "runtime-segfault"),
        (SEGFAULT_GDB, "runtime-segfault"),
    ],
)
def test_each_message_is_recognised(text, rule):
    assert ids(text) == [rule]
    finding = logs.read(text)[0]
    assert finding.rule.fix and finding.rule.sources


def test_text_without_a_known_message_is_classified_by_its_layer():
    text = "Traceback (most recent call last):\nValueError: bad shape\n"
    assert logs.read(text) == []
    out = logs.to_text([], "x.log", None, text)
    assert "no message the doctor knows; its lines come from:" in out
    assert "PyTorch (1 line): collect the whole traceback" in out
    out = logs.to_text([], "x.log", None, "hello world\n")
    assert "no line says which layer" in out and "run doctor on the machine itself" in out


# a real amdgpu SMU line (the SMU busy message of amdgpu's smu_cmn.c), in no catalog family
UNKNOWN_KERNEL = (
    "[  41.201934] amdgpu 0000:c3:00.0: amdgpu: SMU: I'm not done with your previous command: "
    "SMN_C2PMSG_66:0x0000001E SMN_C2PMSG_82:0x00000000\n"
)


def test_an_unknown_kernel_line_is_classified_and_gets_what_to_collect():
    assert logs.read(UNKNOWN_KERNEL) == []
    out = logs.to_text([], "dmesg.txt", None, UNKNOWN_KERNEL)
    assert "kernel (1 line): collect sudo dmesg" in out and "lspci -nnk -d 1002:" in out


def test_catalog_lines_get_upstream_words_and_what_to_collect():
    fault = (
        "Memory access fault by GPU node-2 (Agent handle: 0x63155be5d980) on address (nil). "
        "Reason: Unknown.\n"
    )
    found = {f.rule.id: f for f in logs.read(fault)}
    assert "catalog:memory-access-fault" in found
    assert "AMD_LOG_LEVEL=3" in found["catalog:memory-access-fault"].advice
    assert found["catalog:memory-access-fault"].details == "reason: Unknown"
    oom = {f.rule.id: f for f in logs.read("RuntimeError: HIP error: out of memory\n")}
    assert oom["catalog:out-of-memory"].rule.title.startswith("hipErrorOutOfMemory (2)")


def test_a_container_premise_turns_driver_advice_to_the_host():
    text = (
        "$ docker run -it --device=/dev/kfd --device=/dev/dri rocm/pytorch\n"
        "ROCk module is NOT loaded, possibly no GPU devices\n"
    )
    found = {f.rule.id: f for f in logs.read(text)}["driver-not-loaded"]
    assert "amdgpu-dkms" not in found.advice and "on the host" in found.advice
    assert found.premises and found.premises[0].startswith("a container")
    bare = {f.rule.id: f for f in logs.read(text.split("\n", 1)[1])}["driver-not-loaded"]
    assert bare.advice.startswith("on a host:") and "in a container" in bare.advice


def test_an_override_that_masks_the_chip_is_named_with_the_real_target():
    text = (  # llama.cpp's device line under HSA_OVERRIDE_GFX_VERSION=11.0.0 on a Strix Halo
        "  Device 0: AMD Radeon 8060S Graphics, gfx1100 (0x1100), VMM: no, Wave Size: 32\n"
    )
    found = {f.rule.id: f for f in logs.read(text)}
    assert "gfx1151" in found["gpus"].details
    masked = found["override-masks-target"]
    assert "its chip is gfx1151" in masked.details and "unset it" in masked.advice


def test_the_report_shows_the_log_and_the_checks_that_explain_it(tmp_path):
    from rocm_dl_guide import doctor

    data = snapshot.example("first-kernel")
    data["log"] = {"source": "run.log", "text": WHEEL_WITHOUT_TARGET}
    path = tmp_path / "s.json"
    path.write_text(json.dumps(data))
    report = doctor.from_snapshot(path)
    text = report.to_text()
    assert "Your error text (run.log):" in text
    assert "check arch-mismatch: [fail]" in text
    record = report.to_dict()["log"]
    assert [f["id"] for f in record["findings"]] == ["invalid-device-function", "no-binary"]
    data["log"] = {"source": "x"}
    path.write_text(json.dumps(data))
    with pytest.raises(snapshot.SnapshotError, match="log: expected an object with a text"):
        doctor.from_snapshot(path)


def test_doctor_log_from_a_file_and_from_stdin(tmp_path):
    snap = tmp_path / "s.json"
    snap.write_text(json.dumps(snapshot.example("rx6600xt")))
    log = tmp_path / "seen.txt"
    log.write_text(KFD_INVALID)
    done = doctor_cli("--snapshot", str(snap), "--log", str(log))
    assert done.returncode == 0, done.stderr
    assert "line 2: Unable to open /dev/kfd read-write: Invalid argument" in done.stdout
    piped = doctor_cli("--snapshot", str(snap), "--log", "-", "--json", stdin=TENSILE)
    assert piped.returncode == 0, piped.stderr
    record = json.loads(piped.stdout)["log"]
    assert record["source"] == "standard input" and record["findings"][0]["id"] == "tensile"
    missing = doctor_cli("--snapshot", str(snap), "--log", str(tmp_path / "nope.txt"))
    assert missing.returncode == 2 and "cannot read the log" in missing.stderr


def test_collect_keeps_the_log_in_the_snapshot(tmp_path):
    log = tmp_path / "seen.txt"
    log.write_text(SEGFAULT_DMESG)
    out = tmp_path / "collected.json"
    done = doctor_cli("--collect", str(out), "--log", str(log), "--json")
    assert done.returncode == 0, done.stderr
    saved = json.loads(out.read_text())
    assert saved["log"] == {"source": "seen.txt", "text": SEGFAULT_DMESG}
    replay = doctor_cli("--snapshot", str(out))
    assert "a crash inside the HIP or HSA runtime" in replay.stdout


BLIND = Path(__file__).parent / "data" / "doctor" / "blind"
CORPUS = Path(__file__).parent / "data" / "doctor" / "corpus"


def test_the_wsl_recipe_is_the_release_of_the_text():
    # real: ROCm 6.2.0 on Oracle Linux under WSL2 (blind corpus)
    text = (BLIND / "06-wsl-oracle-linux-out-of-resources.txt").read_text()
    wsl = {f.rule.id: f for f in logs.read(text)}["wsl"]
    assert (
        wsl.advice.startswith("ROCm 6.2.0 has no WSL recipe") and "not Oracle Linux" in wsl.advice
    )
    assert "ROCm 6.2.0 (named in the text)" in wsl.premises
    # real: amdgpu-install 7.0's deb under WSL, whose repositories lack the WSL runtime
    text = (BLIND / "16-wsl-rocm70-no-rocr4wsl-package.txt").read_text()
    assert wsl_text.release_in(text) == "7.0.0" and wsl_text.wsl_release("7.0.0") is None
    # a 7.2 point release gets 7.2.1's librocdxg recipe; 6.2.3 its own, never librocdxg
    fix, _ = wsl_text.wsl_fix("WSL environment detected.\nROCm version: 7.2.3\n")
    assert fix.startswith("ROCm 7.2.1 under WSL 2") and "HSA_ENABLE_DXG_DETECTION=1" in fix
    fix, _ = wsl_text.wsl_fix("WSL environment detected.\nROCm version: 6.2.3\n")
    assert "hsa-runtime-rocr4wsl-amdgpu" in fix and "librocdxg" not in fix
    assert "amdgpu-dkms" not in fix


def test_no_kfd_under_wsl_is_answered_with_dxg():
    # real: a Docker Desktop user under WSL 2 passing --device=/dev/kfd (blind corpus)
    text = (BLIND / "21-wsl-docker-rx580-gfx803-no-kfd.txt").read_text()
    found = {f.rule.id: f for f in logs.read(text)}
    assert "kfd-missing" not in found  # its container fix (--device=/dev/kfd) is wrong here
    assert "--device=/dev/dxg" in found["wsl"].advice


def test_idle_gpus_unread_by_rocm_smi_are_runtime_power_management():
    # real: eight W7800s idling in runtime PM, rocm-smi 6.3/6.4 (blind corpus)
    text = (BLIND / "08-rocm-smi-w7800-idle-expected-integer.txt").read_text()
    found = {f.rule.id: f for f in logs.read(text)}["smi-runtime-pm"]
    assert "runtime_status" in found.advice and "power/control" in found.advice
    assert "partition" not in found.advice.lower()  # not MI300's partition-reporting bug


def test_clr_lists_of_missing_code_objects_name_the_targets():
    # real: clr's "Missing CO for these ISAs" list (a self-built SDK, blind corpus)
    text = (BLIND / "22-sdk-build-missing-co-gfx1101.txt").read_text()
    assert set(logs.code_objects(text)[1]) == {"gfx1101", "gfx1036"}
    found = {f.rule.id: f for f in logs.read(text)}["no-binary"]
    assert (
        "gfx1036 is an integrated GPU" in found.details and "gfx1101 still needs" in found.details
    )
    # real: "No compatible code objects found for: gfx1152" (llama.cpp, blind corpus)
    text = (BLIND / "01-llamacpp-gfx1152-no-code-objects.txt").read_text()
    assert logs.code_objects(text)[1] == ["gfx1152"]


def test_a_dkms_build_failure_and_a_full_gpu_are_named():
    # real: amdgpu-dkms 7.2.4 against Ubuntu 26.04's 7.0 kernels (blind corpus)
    text = (BLIND / "09-amdgpu-dkms-build-fails-ubuntu-2604.txt").read_text()
    dkms = {f.rule.id: f for f in logs.read(text)}["dkms-build"]
    assert "--no-dkms" in dkms.advice and "uname -r" in dkms.advice
    # real: PyTorch's HIP out of memory on an 8 GB RX 6600 (blind corpus)
    text = (BLIND / "23-comfyui-rx6600-hip-oom.txt").read_text()
    oom = {f.rule.id: f for f in logs.read(text)}["torch-oom"]
    assert "VRAM" in oom.rule.title and "expandable_segments" in oom.advice


def test_a_container_given_the_devices_is_asked_what_it_got():
    # real: vLLM's ROCm image started with --device /dev/kfd and /dev/dri (blind corpus)
    text = (BLIND / "14-vllm-docker-desktop-no-hip-gpus.txt").read_text()
    found = {f.rule.id: f for f in logs.read(text)}["no-hip-gpus"]
    assert "--device /dev/kfd and /dev/dri were passed" in found.premises
    assert "Docker Desktop" in found.advice and "amdgpu-dkms" not in found.advice


@pytest.mark.parametrize(
    ("line", "rule"),
    [  # the message formats of each family, as the runtime and the kernel print them
        ("HW Exception by GPU node-1 (Agent handle: 0x55dc6e221990) reason :GPU Hang",
         "catalog:gpu-hang-or-ecc"),
        ("amdgpu 0000:c3:00.0: amdgpu: MES failed to respond to msg=MISC (WAIT_REG_MEM)",
         "catalog:mes-timeout"),
        ("[drm:amdgpu_device_init [amdgpu]] *ERROR* gpu post error!",
         "catalog:amdgpu-init-failure"),
        ("amdgpu 0000:03:00.0: probe with driver amdgpu failed with error -22", "amdgpu-probe"),
        ("RuntimeError: HIP error: no ROCm-capable device is detected", "catalog:no-device"),
        ("Direct firmware load for amdgpu/gc_11_0_0_mes_2.bin failed with error -2",
         "catalog:firmware-missing"),
    ],
)  # fmt: skip
def test_each_family_of_unknown_messages_is_named(line, rule):
    assert rule in {f.rule.id for f in logs.read(line + "\n")}


def test_a_container_without_the_devices_is_told_to_pass_them():
    # real: rocminfo in a container started without /dev/kfd (the first corpus)
    text = (CORPUS / "35-kfd-missing-in-container.txt").read_text()
    found = {f.rule.id: f for f in logs.read(text)}["kfd-missing"]
    assert "--device=/dev/kfd" in found.advice and "lsmod" not in found.advice
    assert "amdgpu loaded in the kernel (rocminfo), no /dev/kfd here" in found.premises


# real: rocm-clinfo under a forgotten HSA_OVERRIDE_GFX_VERSION=12.0.1 on a Strix Halo beside
# an R9700 (ROCm/legacy-rocm-build#5696; not in either corpus)
CLINFO_OVERRIDE = (
    "  Board name:\t\t\t\t\t AMD Radeon AI PRO R9700\n"
    "  Name:\t\t\t\t\t\t gfx1201\n"
    "  Board name:\t\t\t\t\t Radeon 8060S Graphics\n"
    "  Name:\t\t\t\t\t\t gfx1201\n"
)


def test_clinfo_under_an_override_shows_the_chip_it_hides():
    found = {f.rule.id: f for f in logs.read(CLINFO_OVERRIDE)}
    masked = found["override-masks-target"]
    assert "Radeon 8060S Graphics as gfx1201, but its chip is gfx1151" in masked.details


# real: Docker's daemon refusing --device=/dev/kfd, on an Ubuntu host and on Windows 11
# (l1na-forever/stable-diffusion-rocm-docker#8, hydrian/stable-diffusion-webui-rocm#17;
# in neither corpus)
DAEMON_NO_KFD = (
    "docker run -it --cap-add=SYS_PTRACE --security-opt seccomp=unconfined --device=/dev/kfd "
    "--device=/dev/dri --group-add video --ipc=host --shm-size 8G rocm/pytorch:latest "
    "--privileged\n"
    "docker: Error response from daemon: error gathering device information while adding "
    'custom device "/dev/kfd": no such file or directory.\n'
)


def test_the_daemon_missing_kfd_is_the_hosts_driver_not_the_flags():
    found = {f.rule.id: f for f in logs.read(DAEMON_NO_KFD)}["kfd-missing"]
    assert found.advice.startswith("the flags are right") and "lsmod" in found.advice
    windows = DAEMON_NO_KFD.split("\n", 1)[1] + " - OS + Distro and Version: Windows 11\n"
    found = {f.rule.id: f for f in logs.read(windows)}["kfd-missing"]
    assert "Windows (the text shows: Windows 11)" in found.premises
    assert "WSL 2" in found.advice and "--device=/dev/kfd" not in found.advice


def test_a_general_protection_fault_in_the_hip_runtime_is_a_runtime_crash():
    # real: the kernel's traps line for llama-bench crashing in libamdhip64 (blind corpus)
    text = (BLIND / "26-strix-halo-stale-override-gfx1100.txt").read_text()
    assert "runtime-segfault" in {f.rule.id for f in logs.read(text)}
