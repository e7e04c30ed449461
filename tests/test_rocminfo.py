"""Tests for rocm_dl_guide.doctor.rocminfo: the parser on real outputs, odd input, and run().

The samples under code/rocm_dl_guide/samples/rocminfo/ are real outputs (origins in the
README.md there); the values asserted below were read from those files.
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import sys
import time

import pytest

from conftest import hang_limit, process_gone
from rocm_dl_guide.doctor import rocminfo, samples
from rocm_dl_guide.doctor.agents import Agent, RocminfoError, RocminfoReport
from rocm_dl_guide.doctor.rocminfo import parse

posix_only = pytest.mark.skipif(os.name != "posix", reason="uses /bin/sh scripts")


def sample(name: str) -> RocminfoReport:
    return parse(samples.load_sample(name))


# ---------------------------------------------------------------------------
# Samples
# ---------------------------------------------------------------------------


def test_sample_names_lists_the_bundled_outputs():
    names = samples.sample_names()
    for required in ("mi-instinct", "radeon", "cpu-only", "driver-not-loaded"):
        assert required in names
    assert names == sorted(names)


def test_load_sample_accepts_txt_suffix_and_rejects_unknown_names():
    assert samples.load_sample("radeon.txt") == samples.load_sample("radeon")
    with pytest.raises(ValueError) as info:
        samples.load_sample("no-such-machine")
    message = str(info.value)
    assert "no-such-machine" in message
    assert "mi-instinct" in message and "radeon" in message


def test_mi_instinct_sample():
    # ROCm/ROCm#1886 (now ROCm/legacy-rocm-build#1886): 2x EPYC 7452, 3x MI210 (gfx90a),
    # MI50 (gfx906), MI100 (gfx908).
    report = sample("mi-instinct")
    assert report.error is None
    assert report.ok
    assert report.complete
    assert report.kernel_module_loaded is True
    assert report.kernel_module_version is None  # old wording: "ROCk module is loaded"
    assert report.runtime_version == "1.1"
    assert report.system["Machine Model"] == "LARGE"
    assert [a.index for a in report.agents] == [1, 2, 3, 4, 5, 6, 7]

    assert len(report.cpus) == 2
    for cpu in report.cpus:
        assert cpu.name == "AMD EPYC 7452 32-Core Processor"
        assert cpu.vendor == "CPU"
        assert cpu.compute_units == 64
        assert cpu.gfx is None
        assert not cpu.is_gpu

    gpus = report.gpus
    assert [(g.index, g.gfx, g.marketing_name, g.compute_units) for g in gpus] == [
        (3, "gfx90a", "AMD Instinct MI210", 104),
        (4, "gfx906", "AMD Instinct MI50/MI60", 60),
        (5, "gfx908", "AMD Instinct MI100", 120),
        (6, "gfx90a", "AMD Instinct MI210", 104),
        (7, "gfx90a", "AMD Instinct MI210", 104),
    ]
    mi210 = gpus[0]
    assert mi210.name == "gfx90a"
    assert mi210.vendor == "AMD"
    assert mi210.device_type == "GPU"
    assert mi210.uuid == "GPU-21e4cb94e63377ab"
    assert mi210.isas == ("amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-",)
    # Agent-level keys are kept; Pool/ISA/Cache sub-keys never leak into them.
    assert mi210.extra["Chip ID"] == "29711(0x740f)"
    assert mi210.extra["Wavefront Size"] == "64(0x40)"
    assert mi210.extra["Workgroup Max Size"] == "1024(0x400)"
    for sub_key in ("Segment", "Allocatable", "Machine Models", "L1", "L2", "x", "Pool Info"):
        assert sub_key not in mi210.extra
    assert "ISA Info" not in mi210.extra and "Cache Info" not in mi210.extra


def test_mi300x_sample():
    report = sample("mi300x")
    assert report.error is None
    assert [a.device_type for a in report.agents] == ["CPU", "CPU", "GPU", "GPU"]
    for gpu in report.gpus:
        assert gpu.gfx == "gfx942"
        assert gpu.marketing_name == "AMD Instinct MI300X"
        assert gpu.compute_units == 304
        assert gpu.isas == ("amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-",)
        # "Packet Processor uCode:: 138" has a doubled colon in real output.
        assert gpu.extra["Packet Processor uCode"] == "138"
        assert gpu.extra["IOMMU Support"] == "None"
    assert report.cpus[0].name == "AMD EPYC 9474F 48-Core Processor"  # trailing pad stripped
    assert report.system["DMAbuf Support"] == "YES"


def test_radeon_sample():
    # ROCm/ROCm#3949 (now ROCm/legacy-rocm-build#3949): Ryzen 7 7800X3D + Radeon RX 7900 XTX,
    # ROCm 6.2.2.
    report = sample("radeon")
    assert report.error is None
    assert report.kernel_module_loaded is True
    assert report.kernel_module_version == "6.8.5"
    assert report.runtime_version == "1.14"
    assert report.system["Runtime Ext Version"] == "1.6"
    assert len(report.agents) == 2
    (cpu,) = report.cpus
    assert cpu.name == "AMD Ryzen 7 7800X3D 8-Core Processor"
    assert cpu.compute_units == 16
    (gpu,) = report.gpus
    assert gpu.index == 2
    assert gpu.name == "gfx1100"
    assert gpu.gfx == "gfx1100"
    assert gpu.marketing_name == "Radeon RX 7900 XTX"
    assert gpu.compute_units == 96
    assert gpu.uuid == "GPU-dd12161dec38e7a2"
    assert gpu.isas == ("amdgcn-amd-amdhsa--gfx1100",)
    assert gpu.extra["Wavefront Size"] == "32(0x20)"
    assert gpu.extra["Memory Properties"] == ""  # an empty field, not a section
    assert "Alloc Recommended Granule" not in gpu.extra


def test_cpu_only_sample():
    # ROCm/ROCm#4471 (now ROCm/legacy-rocm-build#4471): WSL2, RX 9070 not visible,
    # only the Intel CPU agent.
    report = sample("cpu-only")
    assert report.gpus == ()
    assert len(report.cpus) >= 1
    assert report.cpus[0].name == "13th Gen Intel(R) Core(TM) i5-13600KF"
    assert report.cpus[0].compute_units == 20
    assert report.kernel_module_loaded is None  # WSL prints no ROCk line
    assert "WSL environment detected." in report.notes
    assert report.error is None  # the runtime worked; it just found no GPU
    assert report.complete


def test_driver_not_loaded_sample():
    # Captured with Debian's rocminfo 5.2.3 on a machine without amdgpu / /dev/kfd
    # (stdout and stderr together). The real exit status was 1.
    text = samples.load_sample("driver-not-loaded")
    assert "\x1b[31m" in text  # the sample keeps rocminfo's colour codes
    report = parse(text)
    assert report.agents == ()
    assert report.kernel_module_loaded is False
    assert report.error is not None
    assert "driver" in report.error and "not loaded" in report.error
    assert "\x1b" not in report.error
    assert not report.ok


@posix_only
def test_run_reports_driver_not_loaded_with_real_exit_status(tmp_path):
    exe = _script(
        tmp_path,
        "rocminfo",
        f"cat '{_sample_path(tmp_path, 'driver-not-loaded')}'\nexit 1\n",
    )
    report = rocminfo.run(str(exe), timeout=10)
    assert report.agents == ()
    assert report.kernel_module_loaded is False
    assert report.error.startswith(f"{exe} exited with status 1: the amdgpu kernel driver")


def test_agents_table():
    rows = rocminfo.agents_table(sample("radeon"))
    assert rows == [
        {
            "agent": 1,
            "type": "CPU",
            "name": "AMD Ryzen 7 7800X3D 8-Core Processor",
            "marketing_name": "AMD Ryzen 7 7800X3D 8-Core Processor",
            "gfx": None,
            "compute_units": 16,
        },
        {
            "agent": 2,
            "type": "GPU",
            "name": "gfx1100",
            "marketing_name": "Radeon RX 7900 XTX",
            "gfx": "gfx1100",
            "compute_units": 96,
        },
    ]
    assert rocminfo.agents_table(samples.load_sample("radeon")) == rows
    assert rocminfo.agents_table(sample("driver-not-loaded")) == []
    with pytest.raises(RocminfoError):
        rocminfo.agents_table(42)


def test_agents_and_reports_are_frozen_and_hashable():
    report = sample("radeon")
    gpu = report.gpus[0]
    assert isinstance(gpu, Agent)
    with pytest.raises(AttributeError):
        gpu.name = "gfx000"  # type: ignore[misc]
    assert hash(gpu) == hash(sample("radeon").gpus[0])
    hash(report)


# ---------------------------------------------------------------------------
# Real-world variations
# ---------------------------------------------------------------------------


def test_crlf_ansi_and_trailing_spaces_do_not_matter():
    text = samples.load_sample("radeon")
    mangled = "\x1b[32m" + text.replace("\n", "  \r\n").replace("Agent 2", "\x1b[1mAgent 2\x1b[0m")
    assert rocminfo.agents_table(parse(mangled)) == rocminfo.agents_table(parse(text))


def test_tabs_and_lost_indentation_keep_agent_keys():
    text = samples.load_sample("mi-instinct")
    flat = "\n".join(line.lstrip() for line in text.splitlines())
    report = parse(flat)
    assert [(g.gfx, g.marketing_name, g.compute_units) for g in report.gpus][:3] == [
        ("gfx90a", "AMD Instinct MI210", 104),
        ("gfx906", "AMD Instinct MI50/MI60", 60),
        ("gfx908", "AMD Instinct MI100", 120),
    ]
    # The ISA "Name:" did not overwrite the agent's Name, but was still recorded.
    assert report.gpus[0].name == "gfx90a"
    assert report.gpus[0].isas == ("amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-",)
    tabbed = text.replace("  Name:", "\tName:")
    assert [g.gfx for g in parse(tabbed).gpus] == [g.gfx for g in sample("mi-instinct").gpus]


def test_gfx_comes_from_isa_name_when_agent_name_is_not_a_gfx_string():
    text = samples.load_sample("mi300x").replace(
        "  Name:                    gfx942", "  Name:                    MI300X-board"
    )
    report = parse(text)
    for gpu in report.gpus:
        assert gpu.name == "MI300X-board"
        assert gpu.gfx == "gfx942"


def test_generic_isa_is_not_preferred_over_the_specific_one():
    # Newer rocminfo lists a generic ISA too (e.g. gfx9-4-generic after gfx942).
    text = (
        "*******\nAgent 2\n*******\n"
        "  Name:                    something\n"
        "  Device Type:             GPU\n"
        "  ISA Info:\n"
        "    ISA 1\n"
        "      Name:                    amdgcn-amd-amdhsa--gfx9-4-generic:sramecc+:xnack-\n"
        "    ISA 2\n"
        "      Name:                    amdgcn-amd-amdhsa--gfx942:sramecc+:xnack-\n"
    )
    (gpu,) = parse(text).gpus
    assert gpu.gfx == "gfx942"
    assert len(gpu.isas) == 2


def test_na_values_become_none():
    text = (
        samples.load_sample("radeon")
        .replace("Compute Unit:            96", "Compute Unit:            N/A")
        .replace("GPU-dd12161dec38e7a2", "N/A")
    )
    gpu = parse(text).gpus[0]
    assert gpu.compute_units is None
    assert gpu.uuid is None
    assert gpu.gfx == "gfx1100"


def test_hsa_api_call_failure_is_an_error():
    # Real output quoted in ROCm/legacy-rocm-build#4382 (formerly ROCm/ROCm#4382).
    text = (
        "ROCk module version 6.10.5 is loaded\n"
        "hsa api call failure at: /long_pathname_so_that_rpms_can_package_the_debug_info"
        "/src/rocminfo/rocminfo.cc:1282\n"
        "Call returned HSA_STATUS_ERROR_OUT_OF_RESOURCES: The runtime failed to allocate the "
        "necessary resources. This error may also occur when the core runtime library needs "
        "to spawn threads or create internal OS-specific events.\n"
    )
    report = parse(text)
    assert report.kernel_module_loaded is True
    assert report.kernel_module_version == "6.10.5"
    assert report.agents == ()
    assert "HSA_STATUS_ERROR_OUT_OF_RESOURCES" in report.error
    assert "failed to allocate the necessary resources" in report.error


def test_hsa_init_failed_is_an_error():
    # Real output quoted in ROCm/legacy-rocm-build#5900 (ROCm 7.2 under WSL2).
    text = (
        "WSL environment detected.\n"
        "pid:6895 tid:0x76bf09cbb100 [topology_sysfs_get_system_props] No WDDM adapters found.\n"
        "hsa_init Failed, possibly no supported GPU devices\n"
    )
    report = parse(text)
    assert report.agents == ()
    assert report.error == (
        "The ROCm runtime (HSA) failed to start "
        "(hsa_init failed: possibly no supported GPU devices)."
    )
    assert "WSL environment detected." in report.notes


def test_dev_kfd_permission_denied_is_an_error():
    # Real output quoted in ROCm/ROCm-docker#116.
    text = (
        "ROCk module is loaded\n"
        "Unable to open /dev/kfd read-write: Permission denied\n"
        "Failed to get user name to check for video group membership\n"
    )
    report = parse(text)
    assert report.agents == ()
    assert "/dev/kfd" in report.error and "Permission denied" in report.error
    assert "render" in report.error


def test_dev_kfd_missing_in_container_is_an_error():
    # Real output quoted in ROCm/legacy-rocm-build#1798 (a container started without
    # --device=/dev/kfd).
    text = (
        "ROCk module is loaded\n"
        "Unable to open /dev/kfd read-write: No such file or directory\n"
        "Failed to get user name to check for video group membership\n"
    )
    error = parse(text).error
    assert "No such file or directory" in error and "--device=/dev/kfd" in error


def test_module_not_loaded_but_cpu_listed_is_not_a_failure():
    # rocminfo can still list the CPU agent when the GPU driver is absent (ROCm/rocminfo#20).
    text = "ROCk module is NOT loaded, possibly no GPU devices\n" + samples.load_sample(
        "cpu-only"
    ).replace("WSL environment detected.\n", "")
    report = parse(text)
    assert report.kernel_module_loaded is False
    assert report.gpus == () and len(report.cpus) == 1
    assert report.error is None


def test_command_not_found_paste():
    report = parse("bash: rocminfo: command not found\n")
    assert report.agents == ()
    assert "not installed" in report.error


# ---------------------------------------------------------------------------
# Garbage never raises
# ---------------------------------------------------------------------------


def test_empty_and_blank_text():
    for text in ("", "\n\n   \n", "\x1b[0m"):
        report = parse(text)
        assert report.agents == ()
        assert report.error == "No rocminfo output to read: the text is empty."


def test_no_text_and_no_error_is_not_collected_not_printed_nothing():
    from rocm_dl_guide.doctor.rocminfo import report_from
    from rocm_dl_guide.doctor.tools import Capture

    assert report_from(Capture("rocminfo")).error == "Not collected: rocminfo did not run here."
    ran = report_from(Capture("rocminfo", text="", returncode=0))
    assert ran.error == "rocminfo ran and printed nothing (exit status 0)."


def test_html_page_is_not_rocminfo():
    html = (
        "<!DOCTYPE html><html><head><title>404 Not Found</title></head>\n"
        "<body><h1>Not Found: Agent</h1><p>style: color: red;</p>\n"
        "<pre>Name: nothing</pre></body></html>\n"
    )
    report = parse(html)
    assert report.agents == ()
    assert report.kernel_module_loaded is None
    assert "does not look like rocminfo output" in report.error


@pytest.mark.parametrize("seed", range(20))
def test_random_bytes_never_raise(seed):
    rng = random.Random(seed)
    blob = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 4000)))
    report = parse(blob.decode("utf-8", errors="replace"))
    assert report.agents == () and not report.ok
    assert "does not look like rocminfo output" in report.error
    assert parse(blob) == report  # bytes are accepted too, decoded the same way


@pytest.mark.parametrize("seed", range(10))
def test_sample_with_random_corruption_never_raises(seed):
    rng = random.Random(seed)
    name = rng.choice(["mi-instinct", "radeon", "mi300x"])
    chars = list(samples.load_sample(name))
    for _ in range(200):
        chars[rng.randrange(len(chars))] = rng.choice(":*\n\x00\x1b\r\t =Agent9xgf")
    report = parse("".join(chars))
    full = [a.index for a in parse(samples.load_sample(name)).agents]
    # What survives is some of the sample's agents, in order, each once.
    got = [a.index for a in report.agents]
    assert got and got == sorted(set(got)) and set(got) <= set(full), (got, full)
    assert [row["agent"] for row in rocminfo.agents_table(report)] == got


@pytest.mark.parametrize("name", ["mi-instinct", "radeon", "mi300x", "cpu-only"])
def test_truncated_output_gives_a_prefix_of_the_agents(name):
    text = samples.load_sample(name)
    full = parse(text).agents
    for cut in range(0, len(text), 97):
        report = parse(text[:cut])
        got = [a.index for a in report.agents]
        assert got == [a.index for a in full[: len(got)]]
        if report.agents:
            assert report.error is None
        else:
            assert report.error is not None
        assert not report.complete or cut >= len(text) - 20


def test_truncated_mid_agent_keeps_what_was_read():
    text = samples.load_sample("mi-instinct")
    cut = text.index("  Compute Unit:            120")  # inside Agent 5 (MI100)
    report = parse(text[:cut])
    assert [a.index for a in report.agents] == [1, 2, 3, 4, 5]
    mi100 = report.agents[-1]
    assert mi100.gfx == "gfx908" and mi100.marketing_name == "AMD Instinct MI100"
    assert mi100.compute_units is None
    assert not report.complete


def test_misuse_raises_rocminfo_error():
    with pytest.raises(RocminfoError):
        parse(None)  # type: ignore[arg-type]
    with pytest.raises(RocminfoError):
        rocminfo.run("")
    with pytest.raises(RocminfoError):
        rocminfo.run("rocminfo", timeout=0)


# ---------------------------------------------------------------------------
# run()
# ---------------------------------------------------------------------------


def _script(tmp_path, name: str, body: str):
    path = tmp_path / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


def _sample_path(tmp_path, name: str):
    path = tmp_path / f"{name}.out"
    path.write_text(samples.load_sample(name))
    return path


def test_run_missing_executable_path(tmp_path):
    missing = tmp_path / "no" / "rocminfo"
    report = rocminfo.run(str(missing))
    assert report.agents == ()
    assert report.error == f"rocminfo is not installed at {missing} (no such file)."


def test_run_missing_from_path(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    report = rocminfo.run("rocminfo")
    assert report.agents == ()
    assert report.error == "rocminfo is not installed (not found on PATH)."


@posix_only
def test_run_garbage_and_exit_1(tmp_path):
    exe = _script(tmp_path, "fake-rocminfo", "echo 'garbage: %%% !!'\necho oops >&2\nexit 1\n")
    report = rocminfo.run(str(exe), timeout=10)
    assert report.agents == ()
    assert report.error.startswith(f"{exe} exited with status 1:")
    assert "does not look like rocminfo output" in report.error


@posix_only
def test_run_timeout_kills_the_tool(tmp_path):
    # The tool waits for a child far longer than any limit here: the run returns
    # because both were stopped, not because the tool ended.
    pid_file = tmp_path / "child.pid"
    body = f"echo 'ROCk module is loaded'\nsleep 600 &\necho $! > {pid_file}\nwait\n"
    exe = _script(tmp_path, "slow-rocminfo", body)
    start = time.monotonic()
    try:
        report = rocminfo.run(str(exe), timeout=0.5)
        assert time.monotonic() - start < hang_limit(10)
        assert process_gone(int(pid_file.read_text()))  # what the tool started went with it
    finally:
        if pid_file.is_file():
            with contextlib.suppress(OSError, ValueError):
                os.kill(int(pid_file.read_text()), signal.SIGKILL)
    assert report.agents == ()
    assert report.error == f"{exe} did not finish within 0.5 seconds and was stopped."


@posix_only
def test_run_undecodable_output(tmp_path):
    exe = _script(tmp_path, "binary-rocminfo", "printf '\\377\\376\\000garbage'\n")
    report = rocminfo.run(str(exe), timeout=10)
    assert report.agents == ()
    assert "not valid UTF-8" in report.error


@posix_only
def test_run_not_executable(tmp_path):
    path = tmp_path / "rocminfo"
    path.write_text("not a program\n")
    path.chmod(0o644)
    report = rocminfo.run(str(path), timeout=10)
    assert report.agents == ()
    assert "cannot be run" in report.error


@posix_only
def test_run_success_parses_stdout(tmp_path, monkeypatch):
    exe = _script(tmp_path, "rocminfo", f"cat '{_sample_path(tmp_path, 'radeon')}'\n")
    report = rocminfo.run(str(exe), timeout=10)
    assert report.error is None
    assert [(g.gfx, g.marketing_name) for g in report.gpus] == [("gfx1100", "Radeon RX 7900 XTX")]
    # The same through a PATH lookup.
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ.get('PATH', '')}")
    assert rocminfo.run("rocminfo", timeout=10).gpus == report.gpus


@pytest.mark.skipif(shutil.which("rocminfo") is None, reason="rocminfo not installed")
def test_run_real_rocminfo_never_raises():
    report = rocminfo.run(timeout=60)
    assert isinstance(report, RocminfoReport)
    # Either it listed agents, or it says why not.
    assert report.agents or report.error
    print(sys.platform, report.error, rocminfo.agents_table(report))
