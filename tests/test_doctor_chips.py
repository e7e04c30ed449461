"""The PCI device ID -> chip -> gfx table (rocm_dl_guide.doctor.chips).

The JSON is checked against the stored upstream files it is generated from, the
IDs the doctor meets most against the gfx targets they really are, and the ID
finder against real ``rocminfo``/``rocm-smi``/``dmesg`` outputs of the corpus.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import pytest

from rocm_dl_guide.doctor import chips, chips_build

CORPUS = Path(__file__).parent / "data" / "doctor" / "corpus"


# --------------------------------------------------------------------------- the data


def test_json_is_current_with_the_stored_sources() -> None:
    built = chips_build.build(chips_build.read_upstream(), chips_build.read_sources())
    text = chips_build.render(built)
    assert chips.JSON_PATH.read_text(encoding="utf-8") == text, (
        "data/pci-chips.json is stale: python -m rocm_dl_guide.doctor.chips --write"
    )


def test_sources_record_exact_files_and_commits() -> None:
    sources = chips_build.read_sources()
    assert {s["key"] for s in sources} == set(chips_build.FILES)
    total = 0
    for s in sources:
        data = (chips_build.UPSTREAM / s["file"]).read_bytes()
        total += len(data)
        assert hashlib.sha256(data).hexdigest() == s["sha256"], s["file"]
        assert re.fullmatch(r"[0-9a-f]{40}", s["commit"]), s["key"]
        assert s["commit"] in s["url"] and s["path"] and s["repo"]
        assert s["lines"] == "whole file" or (
            len(s["lines"]) == 2 and s["lines"][0] <= s["lines"][1]
        )
        if isinstance(s["lines"], list):
            assert data.decode().count("\n") == s["lines"][1] - s["lines"][0] + 1
    assert total < 1_000_000


def test_summary_counts_the_table() -> None:
    table = chips.table()
    rows = table["chips"]
    assert table["summary"]["ids"] == len(rows) > 1000
    assert table["summary"]["with_gfx"] == sum(1 for c in rows if c["gfx"]) > 200
    assert [c["device_id"] for c in rows] == sorted(c["device_id"] for c in rows)
    for c in rows:
        assert c["gfx"] is None or re.fullmatch(r"gfx[0-9a-f]{3,4}", c["gfx"])
        assert (c["gfx"] is None) == (c["route"] is None)
        assert set(c["sources"]) <= set(table["sources"])


@pytest.mark.parametrize(
    ("device_id", "gfx", "name", "chip"),
    [
        (0x7480, "gfx1102", "AMD Radeon RX 7600 XT", "NAVI33"),
        (0x15BF, "gfx1103", "AMD Radeon 780M Graphics", "PHOENIX"),
        (0x744C, "gfx1100", "AMD Radeon RX 7900 XTX", "NAVI31"),
        (0x73BF, "gfx1030", "AMD Radeon RX 6800 XT", "NAVI21"),
        (0x74A1, "gfx942", "AMD Instinct MI300X", None),
        (0x1586, "gfx1151", "Radeon 8060S Graphics", "STRIX_HALO"),
        (0x150E, "gfx1150", "AMD Radeon 890M Graphics", "STRIX1"),
        (0x1636, "gfx90c", None, "RENOIR"),
        (0x7550, "gfx1201", "AMD Radeon RX 9070 XT", None),
    ],
)
def test_known_ids(device_id: int, gfx: str, name: str | None, chip: str | None) -> None:
    c = chips.by_pci_id(device_id)
    assert c is not None and c.gfx == gfx and c.chip == chip
    assert name is None or name in c.names
    assert c.derivation and c.sources


def test_the_override_case_rx_7600_xt() -> None:
    # rocminfo under HSA_OVERRIDE_GFX_VERSION=11.0.0 names gfx1100; its Chip ID is the chip's own
    text = "  Name:                    gfx1100\n  Chip ID:                 29824(0x7480)\n"
    [(dev, rev)] = chips.pci_ids_in(text)
    c = chips.by_pci_id(dev, rev)
    assert c.gfx == "gfx1102" and c.codename == "Navi 33" and c.route == "rocm-table"
    assert {"codename", "product"} <= set(c.confirmed_by)


def test_derivations_name_their_chain() -> None:
    assert "Phoenix1" in chips.by_pci_id(0x15BF).derivation
    assert "CHIP_PHOENIX" in chips.by_pci_id(0x15BF).derivation
    assert "CHIP_STRIX_HALO" in chips.by_pci_id(0x1586).derivation
    hawk = chips.by_pci_id(0x1900)  # Hawk Point: named like Phoenix in amdgpu.ids
    assert hawk.gfx == "gfx1103" and hawk.route == "shared-name" and "0x15bf" in hawk.derivation
    # Mesa compiles Renoir for gfx909; ROCm's tables (gfx90c) win, and the entry says so
    assert any("gfx909" in n for n in chips.by_pci_id(0x1636).notes)


def test_unknown_stays_null() -> None:
    mi350 = chips.by_pci_id(0x75A0)  # gfx950: no stored source says so
    assert mi350 is not None and mi350.gfx is None and mi350.route is None
    audio = chips.by_pci_id(0xAB30)  # Navi 31 HDMI/DP Audio
    assert audio.gpu is False and audio.gfx is None and chips.by_pci_id(0x744C).gpu
    assert chips.by_pci_id(0x0001) is None


# --------------------------------------------------------------------------- lookups


def test_by_pci_id_forms_and_revisions() -> None:
    for form in (0x7480, "0x7480", "7480", "1002:7480", "0X7480"):
        assert chips.by_pci_id(form).device_id == 0x7480
    assert chips.by_pci_id(0x7480, 0xC0).names == ("AMD Radeon RX 7600 XT",)
    assert chips.by_pci_id("7480", "cf").names == ("AMD Radeon RX 7600",)
    assert chips.by_pci_id(0x7480, "0xc0").revision == 0xC0
    everything = chips.by_pci_id(0x7480, 0x55)  # a revision amdgpu.ids does not list
    assert len(everything.names) > 3 and everything.revision == 0x55


@pytest.mark.parametrize(
    ("query", "device_id", "gfx"),
    [
        ("AMD Radeon RX 7600 XT", 0x7480, "gfx1102"),
        ("Radeon 780M", 0x15BF, "gfx1103"),
        ("AMD Instinct MI300X", 0x74A1, "gfx942"),
        ("Radeon RX 7900 XTX", 0x744C, "gfx1100"),
        ("Radeon 8060S Graphics", 0x1586, "gfx1151"),
    ],
)
def test_by_name(query: str, device_id: int, gfx: str) -> None:
    found = chips.by_name(query)
    assert device_id in [c.device_id for c in found]
    assert {c.gfx for c in found} == {gfx}


def test_by_name_exact_before_contained() -> None:
    [c] = chips.by_name("AMD Radeon RX 7600 XT")
    assert c.revision == 0xC0 and c.names == ("AMD Radeon RX 7600 XT",)
    assert [c.device_id for c in chips.by_name("AMD Instinct MI300X")] == [0x74A1]
    assert len(chips.by_name("MI300X")) > 1  # MI300X HF, MI300X VF too
    assert {c.codename for c in chips.by_name("Navi 33")} == {"Navi 33"}
    assert chips.by_name("Radeon 780M")[0].names == ("AMD Radeon 780M Graphics",)
    assert chips.by_name("no such gpu") == [] and chips.by_name("") == []


# --------------------------------------------------------------------------- IDs in text


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("27-rocm-smi-concise-spx-nps1.txt", [(0x74A1, None)]),  # (DID, GUID) column
        ("28-rocm-smi-productname-igpu.txt", [(0x744C, 0xC8), (0x164E, 0xC4)]),  # Card Model
        ("46-kfd-igpu-dmesg.txt", [(0x164E, None)]),  # [0x164e:0x1002], 1002:164e
        ("48-rocminfo-mi300x-cpx-shared-uuid.txt", [(0x74A1, None)]),  # Chip ID
        ("49-rocminfo-mi250x-one-gcd-slurm.txt", [(0x7408, None)]),
        ("50-rocm-smi-showhw-mi300a-tpx.txt", [(0x74A0, None)]),  # DID column
        ("21-amd-smi-amdgpu-built-in.txt", []),
    ],
)
def test_pci_ids_in_corpus(case: str, expected: list) -> None:
    assert chips.pci_ids_in((CORPUS / case).read_text(encoding="utf-8")) == expected


def test_pci_ids_in_other_formats() -> None:
    lspci = (
        "03:00.0 VGA compatible controller [0300]: Advanced Micro Devices, Inc. [AMD/ATI] "
        "Navi 33 [Radeon RX 7700S/7600/7600S/7600M XT/PRO W7600] [1002:7480] (rev c0)\n"
        "\tSubsystem: Advanced Micro Devices, Inc. [AMD/ATI] Device [1002:0e3b]\n"
        "03:00.1 Audio device [0403]: Advanced Micro Devices, Inc. [AMD/ATI] "
        "Navi 31 HDMI/DP Audio [1002:ab30]\n"
    )
    assert chips.pci_ids_in(lspci) == [(0x7480, 0xC0), (0xAB30, None)]
    assert chips.pci_ids_in("DRIVER=amdgpu\nPCI_ID=1002:744C\nPCI_SUBSYS_ID=1002:0E3B\n") == [
        (0x744C, None)
    ]
    amd_smi = "GPU: 0\n    ASIC:\n        VENDOR_ID: 0x1002\n        DEVICE_ID: 0x74a1\n"
    amd_smi += "        SUBSYSTEM_ID: 0x74a2\n        REV_ID: 0x00\n"
    assert chips.pci_ids_in(amd_smi) == [(0x74A1, 0x00)]
    assert chips.pci_ids_in('{"device_id": "0x7550", "rev_id": "0xc0"}') == [(0x7550, 0xC0)]
    rocm_smi_id = "GPU[0]\t\t: Device ID: 0x73bf\nGPU[0]\t\t: Device Rev: 0xc1\n"
    assert chips.pci_ids_in(rocm_smi_id) == [(0x73BF, 0xC1)]
    sysfs = "/sys/class/drm/card1/device/device:0x15bf\n/sys/class/drm/card1/device/revision:0xc4\n"
    assert chips.pci_ids_in(sysfs) == [(0x15BF, 0xC4)]
    assert chips.pci_ids_in("pci:v00001002d00001586sv00001002sd00000123bc03sc80i00") == [
        (0x1586, None)
    ]
    assert chips.pci_ids_in(r"PCI\VEN_1002&DEV_73BF&SUBSYS_0E3A1002&REV_C1") == [(0x73BF, 0xC1)]
    assert chips.pci_ids_in("  Chip ID:                 0(0x0)\n") == []  # a CPU agent


# --------------------------------------------------------------------------- --write, --check


def test_check_names_a_modified_entry(tmp_path, monkeypatch, capsys) -> None:
    target = tmp_path / "pci-chips.json"
    monkeypatch.setattr(chips, "JSON_PATH", target)
    assert chips.main(["--write"]) == 0
    assert chips.main(["--check"]) == 0
    table = json.loads(target.read_text(encoding="utf-8"))
    entry = next(c for c in table["chips"] if c["device_id"] == "0x7480")
    entry["gfx"] = "gfx1100"
    table["chips"] = [c for c in table["chips"] if c["device_id"] != "0x15bf"]
    target.write_text(json.dumps(table), encoding="utf-8")
    capsys.readouterr()
    assert chips.main(["--check"]) == 1
    out = capsys.readouterr().out
    assert "stale" in out and "0x7480 gfx" in out and "0x15bf" in out
