"""doctor --smi: GPU partitions and topology from amd-smi / rocm-smi output.

Every text below is real output in its upstream format, quoted from the public
page or report named beside it; where a test composes a case from real blocks
(no public output of that situation was found), the comment says so.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

import rocm_dl_guide
from conftest import ROOT, doctor_cli, hang_limit, process_gone
from rocm_dl_guide import doctor
from rocm_dl_guide.doctor import samples, smi, snapshot, system

# AMD's "Quick Start Guide to Partitioning MI300X GPUs", `amd-smi static --partition`
# on 8 MI300X in CPX/NPS4 (64 blocks): ROCm/amdgpu-docs at da91f8f,
# docs/gpu-partitioning/mi300x/quick-start-guide.rst, published at
# https://instinct.docs.amd.com/projects/amdgpu-docs/en/latest/gpu-partitioning/mi300x/quick-start-guide.html
CPX_NPS4 = (
    Path(rocm_dl_guide.__file__).parent / "samples" / "smi" / "mi300x-cpx-nps4-static-partition.txt"
)

# https://github.com/ROCm/ROCm/issues/4477 (4x MI300A, ROCm 6.3.3): amd-smi static --partition
STATIC_SPX = """GPU: 0
    PARTITION:
        COMPUTE_PARTITION: SPX
        MEMORY_PARTITION: NPS1
        PARTITION_ID: 0

GPU: 1
    PARTITION:
        COMPUTE_PARTITION: SPX
        MEMORY_PARTITION: NPS1
        PARTITION_ID: 0

GPU: 2
    PARTITION:
        COMPUTE_PARTITION: SPX
        MEMORY_PARTITION: NPS1
        PARTITION_ID: 0

GPU: 3
    PARTITION:
        COMPUTE_PARTITION: SPX
        MEMORY_PARTITION: NPS1
        PARTITION_ID: 0
"""
# https://github.com/ROCm/ROCm/issues/4477#issuecomment (harkgill-amd, 2025-06-25): the
# output `sudo amd-smi partition` gives once the fix is released (its first table)
PARTITION_TABLE = """sudo amd-smi partition
CURRENT_PARTITION:
GPU_ID  MEMORY  ACCELERATOR_TYPE  ACCELERATOR_PROFILE_INDEX  PARTITION_ID
0       NPS1    SPX               0                          0
1       NPS1    SPX               0                          0
2       NPS1    SPX               0                          0
3       NPS1    SPX               0                          0

MEMORY_PARTITION:
GPU_ID  MEMORY_PARTITION_CAPS  CURRENT_MEMORY_PARTITION
0       N/A                    NPS1
1       N/A                    NPS1
2       N/A                    NPS1
3       N/A                    NPS1
"""
# amd_smi_lib's CHANGELOG (ROCm/amdsmi at 0ceca28, "Created new amdsmi_kfd_info_t"):
# https://github.com/ROCm/amdsmi/blob/0ceca28f4139dced5e9b5739a3f393780d7add48/CHANGELOG.md
AMD_LIST = """$ amd-smi list
GPU: 0
    BDF: 0000:23:00.0
    UUID: <redacted>
    KFD_ID: 45412
    NODE_ID: 1
    PARTITION_ID: 0

GPU: 1
    BDF: 0000:26:00.0
    UUID: <redacted>
    KFD_ID: 59881
    NODE_ID: 2
    PARTITION_ID: 0
"""
# the same CHANGELOG, `amd-smi topology -cndz` on 8 GPUs (its first table)
AMD_TOPOLOGY = """$ amd-smi topology -cndz
CACHE COHERANCY TABLE:
             0000:0c:00.0 0000:22:00.0 0000:38:00.0 0000:5c:00.0 0000:9f:00.0 0000:af:00.0 0000:bf:00.0 0000:df:00.0
0000:0c:00.0 SELF         C            NC           NC           C            C            C            NC
0000:22:00.0 C            SELF         NC           C            C            C            NC           C
0000:38:00.0 NC           NC           SELF         C            C            NC           C            NC
0000:5c:00.0 NC           C            C            SELF         NC           C            NC           NC
0000:9f:00.0 C            C            C            NC           SELF         NC           NC           C
0000:af:00.0 C            C            NC           C            NC           SELF         C            C
0000:bf:00.0 C            NC           C            NC           NC           C            SELF         NC
0000:df:00.0 NC           C            NC           NC           C            C            NC           SELF
"""  # noqa: E501
# https://github.com/ROCm/ROCm/issues/1482 (4x MI100, ROCm 4.2): rocm-smi --showbus
SHOWBUS = """xxx@xxx:~/$ rocm-smi --showbus


======================= ROCm System Management Interface =======================
================================== PCI Bus ID ==================================
GPU[0]          : PCI Bus: 0000:41:00.0
GPU[1]          : PCI Bus: 0000:D7:00.0
GPU[2]          : PCI Bus: 0000:DC:00.0
GPU[3]          : PCI Bus: 0000:E2:00.0
================================================================================
============================= End of ROCm SMI Log ==============================
"""
# `rocm-smi -a` of a 4x MI300X virtual machine (its PCI Bus ID and partition sections),
# kept in thamada/nvidia-smi's MI300X_x4_smi.py (gls/ at b09ef13)
ROCM_A = (
    "======================================= PCI Bus ID =======================================\n"
    "GPU[0]\t\t: PCI Bus: 0000:26:00.0\n"
    "GPU[1]\t\t: PCI Bus: 0000:46:00.0\n"
    "GPU[2]\t\t: PCI Bus: 0000:65:00.0\n"
    "GPU[3]\t\t: PCI Bus: 0000:85:00.0\n"
    "==========================================================================================\n"
    "=============================== Current Compute Partition ================================\n"
    "GPU[0]\t\t: Compute Partition: SPX\n"
    "GPU[1]\t\t: Compute Partition: SPX\n"
    "GPU[2]\t\t: Compute Partition: SPX\n"
    "GPU[3]\t\t: Compute Partition: SPX\n"
    "==========================================================================================\n"
    "================================ Current Memory Partition ================================\n"
    "GPU[0]\t\t: Memory Partition: NPS1\n"
    "GPU[1]\t\t: Memory Partition: NPS1\n"
    "GPU[2]\t\t: Memory Partition: NPS1\n"
    "GPU[3]\t\t: Memory Partition: NPS1\n"
    "==========================================================================================\n"
    "================================== End of ROCm SMI Log ===================================\n"
)
# https://github.com/ROCm/ROCm/issues/4750 (one MI300X in QPX mode, ROCm 6.3-6.4): rocm-smi
CONCISE_QPX = """$ rocm-smi


============================================ ROCm System Management Interface ============================================
====================================================== Concise Info ======================================================
Device  Node  IDs              Temp        Power     Partitions          SCLK    MCLK    Fan  Perf  PwrCap  VRAM%  GPU%  
              (DID,     GUID)  (Junction)  (Socket)  (Mem, Compute, ID)                                                  
==========================================================================================================================
0       2     0x74a1,   1971   47.0°C      133.0W    NPS1, QPX, 0        126Mhz  900Mhz  0%   auto  750.0W  0%     0%    
1       3     0x74a1,   49074  47.0°C      133.0W    NPS1, QPX, 1        136Mhz  900Mhz  0%   auto  750.0W  0%     0%    
2       4     0x74a1,   14258  47.0°C      133.0W    NPS1, QPX, 2        136Mhz  900Mhz  0%   auto  750.0W  0%     0%    
3       5     0x74a1,   36787  47.0°C      133.0W    NPS1, QPX, 3        153Mhz  900Mhz  0%   auto  750.0W  0%     0%     
==========================================================================================================================
================================================== End of ROCm SMI Log ===================================================
"""  # noqa: E501, W291
# https://github.com/ROCm/rocm_smi_lib/issues/108 (4 GPUs on PCIe): rocm-smi --showtopo
SHOWTOPO = """======================= ROCm System Management Interface =======================
=========================== Weight between two GPUs ============================
       GPU0         GPU1         GPU2         GPU3         
GPU0   0            52           52           52           
GPU1   52           0            52           52           
GPU2   52           52           0            52           
GPU3   52           52           52           0            

============================ Hops between two GPUs =============================
       GPU0         GPU1         GPU2         GPU3         
GPU0   0            3            3            3            
GPU1   3            0            3            3            
GPU2   3            3            0            3            
GPU3   3            3            3            0            

========================== Link Type between two GPUs ==========================
       GPU0         GPU1         GPU2         GPU3         
GPU0   0            PCIE         PCIE         PCIE         
GPU1   PCIE         0            PCIE         PCIE         
GPU2   PCIE         PCIE         0            PCIE         
GPU3   PCIE         PCIE         PCIE         0            
"""  # noqa: W291


def test_amd_smi_static_partition_cpx_nps4_is_64_devices_on_8_gpus():
    rep = smi.read(CPX_NPS4.read_text())
    assert rep.formats == ["amd-smi static --partition"]
    assert len(rep.devices) == 64
    assert {d.compute for d in rep.devices} == {"CPX"} and {d.memory for d in rep.devices} == {
        "NPS4"
    }
    lay = smi.layout(rep)
    assert len(lay.groups) == 8 and lay.groups[1] == list(range(8, 16))
    words = "\n".join(smi.explain(rep))
    assert "8 physical GPUs in CPX mode (memory NPS4): 64 logical devices, 8 per GPU." in words
    assert "torchrun --nproc-per-node 64 starts one rank on each" in words
    assert "--nproc-per-node 8 would use devices 0-7, all on the first physical GPU" in words
    assert (
        "1/8 of its GPU's compute and memory (on an MI300X: 38 of 304 CUs, 24 of 192 GB)" in words
    )
    assert "HIP_VISIBLE_DEVICES (and ROCR_VISIBLE_DEVICES) number logical devices" in words
    assert "devices 0-7 share one physical GPU, 8-15 the next" in words
    assert smi.findings(rep) == []
    assert smi.check(rep).status == doctor.OK


def test_amd_smi_static_partition_spx_is_one_device_per_gpu():
    rep = smi.read(STATIC_SPX)
    assert [d.partition_id for d in rep.devices] == [0, 0, 0, 0]
    assert len(smi.layout(rep).groups) == 4
    assert "Each device is a whole GPU" in "\n".join(smi.explain(rep))


def test_amd_smi_partition_current_table():
    rep = smi.read(PARTITION_TABLE)
    assert rep.formats == ["amd-smi partition"]
    assert [(d.index, d.compute, d.memory, d.partition_id) for d in rep.devices] == [
        (i, "SPX", "NPS1", 0) for i in range(4)
    ]


def test_amd_smi_list_gives_bdfs_and_nodes():
    rep = smi.read(AMD_LIST)
    assert rep.formats == ["amd-smi list"]
    assert [(d.bdf, d.node_id, d.partition_id) for d in rep.devices] == [
        ("0000:23:00.0", 1, 0),
        ("0000:26:00.0", 2, 0),
    ]
    assert smi.layout(rep).basis == "PCI addresses"


def test_a_partition_id_in_the_bdf_function_groups_by_physical_gpu():
    # amd-smi's changelog: in non-SPX modes the partition ID may sit in the BDF's
    # function bits (0000:05:00.0 and 0000:05:00.1 are one GPU in DPX; ROCm/amdsmi#132)
    rep = smi.read(AMD_LIST.replace("0000:26:00.0", "0000:23:00.1"))
    assert smi.layout(rep).groups == [[0, 1]]


def test_amd_smi_topology_names_the_physical_gpus():
    rep = smi.read(AMD_TOPOLOGY)
    assert rep.formats == ["amd-smi topology"]
    assert len(rep.topology_bdfs) == 8 and rep.topology_bdfs[0] == "0000:0c:00.0"
    assert rep.devices == [] and not rep.empty


def test_rocm_smi_showbus_and_partition_lines():
    bus = smi.read(SHOWBUS)
    assert bus.formats == ["rocm-smi --showbus"]
    assert [d.bdf for d in bus.devices][1] == "0000:d7:00.0"
    full = smi.read(ROCM_A)
    assert full.formats == [
        "rocm-smi --showbus",
        "rocm-smi --showcomputepartition",
        "rocm-smi --showmemorypartition",
    ]
    assert [(d.compute, d.memory) for d in full.devices] == [("SPX", "NPS1")] * 4
    assert len(smi.layout(full).groups) == 4


def test_rocm_smi_concise_table_qpx_is_four_devices_on_one_gpu():
    rep = smi.read(CONCISE_QPX)
    assert rep.formats == ["rocm-smi (concise table)"]
    assert [d.partition_id for d in rep.devices] == [0, 1, 2, 3]
    words = "\n".join(smi.explain(rep))
    assert "1 physical GPU in QPX mode (memory NPS1): 4 logical devices, 4 per GPU." in words
    assert (
        "1/4 of its GPU's compute and memory (on an MI300X: 76 of 304 CUs, 48 of 192 GB)" in words
    )


def test_rocm_smi_showtopo_link_types():
    rep = smi.read(SHOWTOPO)
    assert rep.formats == ["rocm-smi --showtopo"] and rep.links == {"PCIE": 6}
    assert "Links between GPU pairs (rocm-smi --showtopo): PCIE 6." in smi.to_text(rep, "t")


def _blocks(text: str) -> list[str]:
    return [b for b in text.strip().split("\n\n") if b.strip()]


def test_mixed_modes_are_flagged():
    # Composed from real blocks (no public output of a mixed node was found): GPU 0's
    # eight CPX/NPS4 partitions from AMD's quick start, then ROCm/ROCm#4477's SPX/NPS1
    # GPUs renumbered 8-11
    cpx = "\n\n".join(_blocks(CPX_NPS4.read_text())[:8])
    spx = "\n\n".join(
        b.replace(f"GPU: {i}", f"GPU: {i + 8}") for i, b in enumerate(_blocks(STATIC_SPX))
    )
    rep = smi.read(cpx + "\n\n" + spx)
    ids = [f.id for f in smi.findings(rep)]
    assert ids == ["mixed-compute", "mixed-memory"]
    text = smi.to_text(rep, "mixed.txt")
    assert "[warn] GPUs in different compute modes (CPX on devices 0-7; SPX on devices 8-11)" in (
        text
    )
    assert "AMD does not recommend mixed memory partitioning modes" in text
    assert smi.check(rep).status == doctor.WARN


def test_a_missing_partition_is_flagged():
    # AMD's quick-start output with GPU 13 (a partition of the second GPU) left out: what
    # AMD's troubleshooting page describes as fewer than 64 GPUs in CPX mode
    blocks = [b for b in _blocks(CPX_NPS4.read_text()) if not b.startswith("GPU: 13\n")]
    rep = smi.read("\n\n".join(blocks))
    found = smi.findings(rep)
    assert [f.id for f in found] == ["uneven-partitions"]
    assert "AST video driver" in found[0].message and smi.TROUBLESHOOTING in found[0].sources


def test_rocminfo_count_against_smi():
    rep = smi.read(CPX_NPS4.read_text())
    assert [f.id for f in smi.findings(rep, rocminfo_gpus=2)] == ["rocminfo-count"]
    assert smi.findings(rep, rocminfo_gpus=64) == []


def test_unknown_text_reads_nothing():
    assert smi.read("").empty and smi.read("hello\nGPU: x\n").empty
    assert smi.read(samples.load_sample("mi300x")).empty


def test_the_facts_cite_amds_pages():
    assert smi.MODES["CPX"].logical_per_gpu == smi.MI300X_XCDS == 8
    assert smi.MODES["DPX"].logical_per_gpu == 2 and smi.MODES["QPX"].logical_per_gpu == 4
    assert all(url.startswith("https://") for url in smi.SOURCES)


def test_doctor_smi_end_to_end_with_a_rocminfo_sample(tmp_path):
    sample = tmp_path / "mi300x.txt"
    sample.write_text(samples.load_sample("mi300x"))
    done = doctor_cli("--smi", str(CPX_NPS4), "--rocminfo", str(sample))
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "GPU partitions (mi300x-cpx-nps4-static-partition.txt" in out
    assert "64 logical devices, 8 per GPU" in out
    assert "rocminfo lists 2 GPU agents, smi 64 logical devices" in out
    assert "[warn] GPU partitions" in out


def test_doctor_smi_errors_are_one_sentence(tmp_path):
    snap = tmp_path / "s.json"
    snap.write_text(json.dumps(snapshot.example("rx6600xt")))
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    unknown = tmp_path / "notes.txt"
    unknown.write_text("nothing smi printed\n")
    for path, words in (
        (empty, "empty.txt: the smi output is empty"),
        (unknown, "notes.txt: no amd-smi or rocm-smi output doctor can read (it reads:"),
        (tmp_path / "nope.txt", "cannot read the smi output"),
    ):
        done = doctor_cli("--snapshot", str(snap), "--smi", str(path))
        assert done.returncode == 2 and words in done.stderr, done.stderr
        assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    piped = doctor_cli("--snapshot", str(snap), "--smi", "-", "--json", stdin=CONCISE_QPX)
    assert piped.returncode == 0, piped.stderr
    record = json.loads(piped.stdout)["smi"]
    assert record["source"] == "standard input" and record["logical_devices"] == 4
    assert record["compute_modes"] == {"QPX": [0, 1, 2, 3]}


def test_the_smi_text_round_trips_through_a_snapshot(tmp_path):
    data = snapshot.compose("mi300x")
    data["smi"] = {"source": "smi.txt", "text": CPX_NPS4.read_text()}
    sysrep = snapshot.from_dict(data, "case.json")
    path = snapshot.write(tmp_path / "s.json", sysrep)
    saved = json.loads(path.read_text())
    assert saved["format_version"] == snapshot.FORMAT_VERSION == 4 and saved["smi"] == data["smi"]
    rep = doctor.from_snapshot(path)
    part = [c for c in rep.checks if c.id == "partitions"][0]
    assert part.status == doctor.WARN and "rocminfo lists 2 GPU agents" in part.message
    assert rep.to_dict()["smi"]["physical_gpus"] == 8
    data["smi"] = {"source": "x"}
    path.write_text(json.dumps(data))
    with pytest.raises(snapshot.SnapshotError, match="smi: expected an object with a text"):
        doctor.from_snapshot(path)


def test_version_2_snapshots_migrate_with_no_smi(tmp_path):
    data = snapshot.compose("radeon")
    del data["smi"]
    data["format_version"] = 2
    assert snapshot.MIGRATIONS[2](data)["format_version"] == 3
    migrated = snapshot.migrate(data)
    assert migrated["format_version"] == snapshot.FORMAT_VERSION and migrated["smi"] is None
    assert "smi" not in data  # the input is left as it was
    path = tmp_path / "v2.json"
    path.write_text(json.dumps(data))
    rep = doctor.from_snapshot(path)
    assert not [c for c in rep.checks if c.id == "partitions"] and rep.to_dict()["smi"] is None


def test_collect_keeps_the_smi_text(tmp_path):
    out = tmp_path / "collected.json"
    done = doctor_cli("--collect", str(out), "--smi", "-", "--json", stdin=SHOWBUS)
    assert done.returncode == 0, done.stderr
    saved = json.loads(out.read_text())
    assert saved["smi"] == {"source": "standard input", "text": SHOWBUS}
    replay = doctor_cli("--snapshot", str(out))
    assert "GPU partitions (standard input; read: rocm-smi --showbus)" in replay.stdout


# --------------------------------------------------------------------------- collected
# doctor and doctor --collect run amd-smi (else rocm-smi) themselves. These fake tools
# print the real outputs quoted above; the ones that fail or hang are made up, and say so.

posix_only = pytest.mark.skipif(os.name != "posix", reason="uses /bin/sh scripts")


def _tool(bin_dir: Path, name: str, cases: dict[str, str], log: Path) -> Path:
    """A fake ``name`` that logs its arguments, then runs the shell body for its first
    argument (``*`` for any other)."""
    bin_dir.mkdir(exist_ok=True)
    body = "".join(f"  {arg}) {cmd} ;;\n" for arg, cmd in cases.items())
    path = bin_dir / name
    path.write_text(f'#!/bin/sh\necho "{name} $*" >> {log}\ncase "$1" in\n{body}esac\n')
    path.chmod(0o755)
    return path


def _prints(tmp_path: Path, name: str, text: str) -> str:
    (tmp_path / name).write_text(text)
    return f"cat {tmp_path / name}"


def _env(bin_dir: Path, tmp_path: Path) -> dict:
    """Only ``bin_dir`` on PATH and an empty ROCm tree: no real amd-smi is found."""
    (tmp_path / "no-rocm").mkdir(exist_ok=True)
    return {"PATH": str(bin_dir), "ROCM_PATH": str(tmp_path / "no-rocm")}


def _amd_smi(tmp_path: Path, static: str, listed: str) -> Path:
    """A fake amd-smi printing ``static`` for ``static --partition``, ``listed`` for ``list``."""
    bin_dir = tmp_path / "bin"
    static = _prints(tmp_path, "static.txt", static)
    listed = _prints(tmp_path, "list.txt", listed)
    cases = {"static": static, "list": listed, "*": "exit 2"}
    _tool(bin_dir, "amd-smi", cases, tmp_path / "calls.log")
    return bin_dir


def test_concatenated_outputs_read_as_their_union():
    amd = smi.read(STATIC_SPX + "\n" + AMD_LIST)
    assert amd.formats == ["amd-smi static --partition", "amd-smi list"]
    assert [(d.index, d.compute, d.memory, d.bdf) for d in amd.devices] == [
        (0, "SPX", "NPS1", "0000:23:00.0"),
        (1, "SPX", "NPS1", "0000:26:00.0"),
        (2, "SPX", "NPS1", None),
        (3, "SPX", "NPS1", None),
    ]
    rocm = smi.read(SHOWBUS + SHOWTOPO)
    assert rocm.formats == ["rocm-smi --showbus", "rocm-smi --showtopo"]
    assert len(rocm.devices) == 4 and rocm.links == {"PCIE": 6}
    assert rocm.devices[3].bdf == "0000:e2:00.0"


@posix_only
def test_doctor_runs_amd_smi_and_reads_the_partitions(tmp_path):
    # amd-smi static --partition prints AMD's CPX/NPS4 quick-start output; amd-smi list
    # prints nothing (made up: no real list of those 64 devices was found)
    env = _env(_amd_smi(tmp_path, CPX_NPS4.read_text(), ""), tmp_path)
    _tool(tmp_path / "bin", "rocm-smi", {"*": "exit 0"}, tmp_path / "calls.log")
    sysrep = system.collect(rocminfo_text="", frameworks=(), env=env)
    assert sysrep.smi["source"] == "amd-smi static --partition; amd-smi list (run by doctor)"
    assert sysrep.smi["error"] is None
    cpx = CPX_NPS4.read_text().rstrip()
    assert sysrep.smi["text"] == f"$ amd-smi static --partition\n{cpx}\n"  # list: nothing
    assert (tmp_path / "calls.log").read_text() == "amd-smi static --partition\namd-smi list\n"
    rep = doctor.check_system(sysrep)
    part = [c for c in rep.checks if c.id == "partitions"]
    assert [c.status for c in part] == [doctor.OK]
    assert part[0].message == (
        "8 physical GPUs in CPX mode (memory NPS4): 64 logical devices, 8 per GPU."
    )
    record = rep.to_dict()["smi"]
    assert record["formats"] == ["amd-smi static --partition"]
    assert record["logical_devices"] == 64 and record["physical_gpus"] == 8
    assert "torchrun --nproc-per-node 64 starts one rank on each" in rep.to_text(wrap=1000)
    assert snapshot.to_dict(sysrep)["smi"] == sysrep.smi


@posix_only
def test_without_amd_smi_doctor_runs_rocm_smi(tmp_path):
    bin_dir = tmp_path / "bin"
    bus = _prints(tmp_path, "bus.txt", SHOWBUS)
    topo = _prints(tmp_path, "topo.txt", SHOWTOPO)
    _tool(bin_dir, "rocm-smi", {"--showbus": bus, "--showtopo": topo}, tmp_path / "calls.log")
    found = system.collect_smi(_env(bin_dir, tmp_path))
    assert found["source"] == (
        "rocm-smi --showbus --showcomputepartition --showmemorypartition; "
        "rocm-smi --showtopo (run by doctor)"
    )
    rep = smi.read(found["text"])
    assert rep.formats == ["rocm-smi --showbus", "rocm-smi --showtopo"]
    assert len(rep.devices) == 4 and rep.links == {"PCIE": 6}


def test_no_smi_tool_is_not_collected(tmp_path):
    env = _env(tmp_path / "empty-bin", tmp_path)
    assert system.collect_smi(env) is None
    sysrep = system.collect(rocminfo_text="", frameworks=(), env=env)
    assert sysrep.smi is None
    rep = doctor.check_system(sysrep)
    assert not [c for c in rep.checks if c.id == "partitions"]
    assert rep.to_dict()["smi"] is None and "GPU partitions" not in rep.to_text()
    assert snapshot.to_dict(sysrep)["smi"] is None


@posix_only
def test_a_failing_smi_tool_is_one_line(tmp_path):
    # made up: amd-smi exiting 1 with a Python error on its last line
    bin_dir = tmp_path / "bin"
    fail = "echo 'Traceback (most recent call last):' >&2; echo \"ModuleNotFoundError: x\" >&2"
    _tool(bin_dir, "amd-smi", {"*": f"{fail}; exit 1"}, tmp_path / "calls.log")
    env = _env(bin_dir, tmp_path)
    sysrep = system.collect(rocminfo_text="", frameworks=(), env=env)
    exe = bin_dir / "amd-smi"
    assert sysrep.smi["error"] == (
        f"{exe} static --partition exited with status 1: ModuleNotFoundError: x; "
        f"{exe} list exited with status 1: ModuleNotFoundError: x"
    )
    rep = doctor.check_system(sysrep)
    part = [c for c in rep.checks if c.id == "partitions"]
    assert [c.status for c in part] == [doctor.INFO]
    assert part[0].message == f"not read: {sysrep.smi['error']}."
    text = rep.to_text(wrap=1000)
    section = text.split("GPU partitions (amd-smi static --partition; ", 1)[1]
    assert section.splitlines()[1] == f"  {sysrep.smi['error']}."
    assert "in the topology tables" not in section
    # rocm-smi, where it is installed too, is tried next and read
    bus = _prints(tmp_path, "bus.txt", SHOWBUS)
    _tool(bin_dir, "rocm-smi", {"--showbus": bus, "*": "exit 0"}, tmp_path / "calls.log")
    found = system.collect_smi(env)
    assert found["source"].endswith("rocm-smi --showtopo (run by doctor)")
    assert found["error"] == sysrep.smi["error"]
    assert smi.read(found["text"]).formats == ["rocm-smi --showbus"]


@posix_only
def test_a_hanging_smi_tool_is_stopped_alone(tmp_path):
    # made up: amd-smi static --partition that hangs in a child process
    bin_dir = tmp_path / "bin"
    # The child sleeps far longer than any limit here: collect_smi returns because
    # the tool was stopped, not because it ended.
    hang = f"sleep 600 & echo $! > {tmp_path / 'child.pid'}; wait"
    listed = _prints(tmp_path, "list.txt", AMD_LIST.split("\n", 1)[1])
    _tool(bin_dir, "amd-smi", {"static": hang, "list": listed}, tmp_path / "calls.log")
    bystander = subprocess.Popen(["sleep", "600"])
    try:
        start = time.monotonic()
        found = system.collect_smi(_env(bin_dir, tmp_path), timeout=0.5)
        assert time.monotonic() - start < hang_limit(10)
        assert bystander.poll() is None  # not started by doctor: left running
        child = int((tmp_path / "child.pid").read_text())
        assert process_gone(child)
    finally:
        bystander.kill()
        bystander.wait()
        if (tmp_path / "child.pid").is_file():
            with contextlib.suppress(OSError, ValueError):
                os.kill(int((tmp_path / "child.pid").read_text()), signal.SIGKILL)
    exe = bin_dir / "amd-smi"
    assert (
        found["error"]
        == f"{exe} static --partition did not finish within 0.5 seconds and was stopped"
    )
    assert smi.read(found["text"]).formats == ["amd-smi list"]  # the next command still ran


@posix_only
def test_doctor_collect_runs_amd_smi_and_smi_file_wins(tmp_path, monkeypatch):
    # ROCm/ROCm#4477's amd-smi static --partition (4 MI300A, SPX) and the changelog's
    # amd-smi list (two machines' real outputs, read together as one node's)
    bin_dir = _amd_smi(tmp_path, STATIC_SPX, AMD_LIST.split("\n", 1)[1])
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("ROCM_PATH", str(tmp_path / "no-rocm"))
    out = tmp_path / "collected.json"
    done = doctor_cli("--collect", str(out), "--json")
    assert done.returncode == 0, done.stderr
    saved = json.loads(out.read_text())["smi"]
    assert saved["source"] == "amd-smi static --partition; amd-smi list (run by doctor)"
    assert saved["error"] is None
    assert (
        saved["text"]
        == f"$ amd-smi static --partition\n{STATIC_SPX}\n$ amd-smi list\n"
        + (AMD_LIST.split("\n", 1)[1])
    )
    record = json.loads(done.stdout)["smi"]
    assert record["formats"] == ["amd-smi static --partition", "amd-smi list"]
    assert record["logical_devices"] == 4 and record["compute_modes"] == {"SPX": [0, 1, 2, 3]}
    assert [d["bdf"] for d in record["devices"]] == ["0000:23:00.0", "0000:26:00.0", None, None]
    (tmp_path / "calls.log").unlink()
    given = tmp_path / "bus.txt"
    given.write_text(SHOWBUS)
    done = doctor_cli("--collect", str(out), "--smi", str(given), "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(out.read_text())["smi"] == {"source": "bus.txt", "text": SHOWBUS}
    assert not (tmp_path / "calls.log").exists()  # the tools were not run


W7900_IDLE = Path(__file__).parent / "data" / "doctor" / "smi-w7900-idle-concise.txt"
"""rocm-smi 6.x's concise table for two idle workstation GPUs (W7900, DID 0x7448),
composed in the layout of the corpus's real tables, every reading N/A."""


def test_na_on_gpus_without_partitions_is_not_mi300s_bug():
    from rocm_dl_guide.doctor import smi, smi_read

    parts = smi_read.read(W7900_IDLE.read_text())
    assert [d.did for d in parts.devices] == ["0x7448", "0x7448"]
    words = smi.na_words(parts)
    assert "runtime power management" in words and "MI300X" not in words
    assert smi.na_sources(parts) == ("https://github.com/ROCm/legacy-rocm-build/issues/4878",)


def test_a_tools_known_bug_is_keyed_to_the_release_the_text_names():
    """The partition-N/A bug was reported for amd-smi of ROCm 6.4.1. The corpus's
    real lines (case 26) name no release; the version line before them is
    composed in ``amd-smi version``'s layout."""
    from rocm_dl_guide.doctor import smi, smi_read

    lines = (ROOT / "tests/data/doctor/corpus/26-amd-smi-partition-na.txt").read_text()
    header = "AMDSMI Tool: 25.4.2+aca1101 | AMDSMI Library version: 25.4.2 | ROCm version: {}\n"
    words = smi.na_words(smi_read.read(lines))
    assert "known reporting bug" in words and "names no ROCm release" in words
    same = smi.na_words(smi_read.read(header.format("6.4.1") + lines))
    assert "ROCm 6.4.1, of the 6.4 series it was reported for" in same
    other = smi_read.read(header.format("7.0.2") + lines)
    assert other.release == "7.0.2" and other.na_partitions == 1
    words = smi.na_words(other)
    assert "not the 6.4 series" in words and "not known to be the cause" in words
    assert "current_compute_partition" in words
