"""Issue 46 item 4: partitions, GCDs, NUMA nodes and topology read from rocminfo and
rocm-smi alone, on real outputs (``rocm_dl_guide/samples``, their README names each
source); the one form with no real output found is a labelled minimal construction."""

from __future__ import annotations

from pathlib import Path

import rocm_dl_guide
from rocm_dl_guide.doctor import agents, rocminfo, smi
from rocm_dl_guide.doctor.samples import load_sample

SMI = Path(rocm_dl_guide.__file__).parent / "samples" / "smi"


def _notes(text: str) -> dict[str, agents.Note]:
    return {n.id: n for n in agents.topology(rocminfo.parse(text))}


def test_mi300x_cpx_agents_sharing_a_uuid_are_one_partitioned_gpu():
    report = rocminfo.parse(load_sample("mi300x-cpx"))
    assert [(g.compute_units, g.global_kib) for g in report.gpus] == [(38, 25163776)] * 2
    note = _notes(load_sample("mi300x-cpx"))["rocminfo-partitions"]
    assert "CPX mode, 8 partitions per GPU" in note.message
    assert "38 of the 304 CUs of an MI300X and 24.0 GiB" in note.message
    assert "agents 3/4 share one UUID" in note.message
    assert "2 of 8 partitions of 1 GPU are visible here" in note.message
    assert "not several GPUs or missing ones" in note.message
    assert note.sources and all(s.startswith("https://") for s in note.sources)


def test_whole_gpus_get_no_partition_or_gcd_note():
    for name in ("mi300x", "mi-instinct", "radeon", "apu-igpu"):
        notes = _notes(load_sample(name))
        assert "rocminfo-partitions" not in notes and "rocminfo-gcd" not in notes, name


def test_one_mi250x_gcd_under_slurm():
    note = _notes(load_sample("mi250x-gcd-slurm"))["rocminfo-gcd"]
    assert "1 GPU agent with gfx90a and 110 CUs" in note.message
    assert "part of a card is visible here" in note.message


def test_numa_nodes_and_nps1_from_the_cpu_agents():
    note = _notes(load_sample("mi300x"))["rocminfo-numa"]
    assert "2 NUMA nodes" in note.message
    assert "all 96 threads of one 48-core CPU: NPS1" in note.message
    assert "rocminfo-numa" not in _notes(load_sample("radeon"))  # one node: nothing to say


# A labelled minimal construction: no real rocminfo output with a blank CPU name was
# found. The layout is rocminfo's own (samples/rocminfo/mi300x.txt's CPU agent, name
# fields emptied), as ROCm's rocminfo documentation shows the agent block.
BLANK_CPU = """*******
Agent 1
*******
  Name:
  Uuid:                    CPU-XX
  Marketing Name:
  Vendor Name:             CPU
  Device Type:             CPU
  Compute Unit:            16
*** Done ***
"""


def test_blank_cpu_name_is_cosmetic():
    note = _notes(BLANK_CPU)["rocminfo-cpu-name"]
    assert "blank name" in note.message and "not a fault" in note.message
    assert "rocminfo-cpu-name" not in _notes(load_sample("radeon"))


def test_rocm_smi_showhw_in_tpx_mode():
    rep = smi.read((SMI / "mi300a-tpx-showhw.txt").read_text(encoding="utf-8"))
    assert rep.formats == ["rocm-smi --showhw"] and len(rep.devices) == 12
    assert {d.gfx for d in rep.devices} == {"gfx942"} and {d.did for d in rep.devices} == {"0x74a0"}
    assert [d.partition_id for d in rep.devices[:4]] == [0, 1, 2, 0]
    text = smi.to_text(rep, "t")
    assert "4 physical GPUs" in text and "3 per GPU is TPX mode on an MI300A" in text
    assert "partitions are missing" not in text


def test_rocm_smi_showtopo_in_tpx_mode_names_the_bug():
    rep = smi.read((SMI / "mi300a-tpx-showtopo.txt").read_text(encoding="utf-8"))
    assert rep.formats == ["rocm-smi --showtopo"]
    assert rep.links == {"XGMI": 54} and rep.xxxx_links == 12
    check = smi.check(rep)
    assert "known rocm-smi bug" in check.message and "not a missing link" in check.message
    assert smi.TOPO_TPX_BUG in check.sources


def test_old_showhw_layout_without_partition_columns():
    # The pre-6.1.1 layout, as rocm_smi_lib's rocm_smi.py prints it (showAllConciseHw's
    # header GPU DID GFX RAS SDMA RAS UMC RAS VBIOS BUS); a labelled construction.
    text = (
        "GPU  DID   GFX RAS  SDMA RAS  UMC RAS   VBIOS           BUS\n"
        "0    7408  ENABLED  ENABLED   DISABLED  113-D65201-046  0000:C1:00.0\n"
    )
    rep = smi.read(text)
    assert rep.devices[0].did == "0x7408" and rep.devices[0].bdf == "0000:c1:00.0"
