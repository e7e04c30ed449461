"""The error catalog generated from upstream excerpts (rocm_dl_guide.doctor.catalogs).

The stored JSON must be what the stored excerpts generate; real error lines
must map to the right entries; the layer of an unknown line must be told; and
``--check`` must notice an edited entry.
"""

from __future__ import annotations

import copy
import json
import re

import pytest

from rocm_dl_guide.doctor import catalog_families, catalog_parse, catalogs

STORED = catalogs.DATA / "error-catalog.json"


@pytest.fixture(scope="module")
def fresh() -> dict:
    return catalogs.build()


def test_the_json_is_what_the_stored_excerpts_generate(fresh):
    stored = json.loads(STORED.read_text(encoding="utf-8"))
    assert catalogs.differences(stored, fresh) == []
    assert STORED.read_text(encoding="utf-8") == catalogs.render(fresh)
    assert len(STORED.read_bytes()) < 300_000


def test_check_names_an_edited_entry(fresh, tmp_path, monkeypatch, capsys):
    edited = copy.deepcopy(fresh)
    entry = next(e for e in edited["hip"] if e["name"] == "hipErrorNoDevice")
    entry["family"] = "out-of-memory"
    edited["kernel"] = [e for e in edited["kernel"] if "gpu-post-error" not in e["name"]]
    assert catalogs.differences(edited, fresh) == [
        "hip: hipErrorNoDevice: differs in family",
        "kernel: linux-amdgpu-device:gpu-post-error: missing from the JSON",
    ]
    (tmp_path / "error-catalog.json").write_text(catalogs.render(edited), encoding="utf-8")
    monkeypatch.setattr(catalogs, "DATA", tmp_path)
    assert catalogs.main(["--check"]) == 1
    assert "hipErrorNoDevice: differs in family" in capsys.readouterr().out
    (tmp_path / "error-catalog.json").write_text(catalogs.render(fresh), encoding="utf-8")
    assert catalogs.main(["--check"]) == 0


def test_every_entry_cites_a_commit_and_each_excerpt_its_recorded_hash(fresh):
    sources = catalogs.load_sources()  # raises when an excerpt's sha256 changed
    assert {"hip-runtime-api", "hsa-status", "rocr-fault-messages"} <= set(sources)
    for section in catalogs.SECTIONS:
        for entry in fresh[section]:
            source = entry["source"]
            assert re.fullmatch(r"[0-9a-f]{40}", source["commit"]), entry["name"]
            assert source["repo"] and source["path"], entry["name"]
            assert entry["family"] in fresh["families"], entry["name"]


def test_each_format_regex_finds_a_line_printed_from_it(fresh):
    samples = {"s": "gfx_0.0.0", "d": "-2", "u": "1234", "x": "1f", "X": "1F", "p": "0x55d4"}
    for entry in fresh["runtime"] + fresh["kernel"]:
        printed = re.sub(
            r"%[-+ #0]*\d*(?:\.\d+)?(?:hh|h|ll|l|z)?([diuxXsp%])",
            lambda m: "%" if m.group(1) == "%" else samples[m.group(1).replace("i", "d")],
            entry["format"],
        )
        line = f"[  12.345678] amdgpu 0000:03:00.0: amdgpu: {printed.strip()}"
        assert re.search(entry["regex"], line), (entry["name"], line)


def test_hip_codes_come_with_the_headers_description_and_the_runtimes_string(fresh):
    hip = {e["name"]: e for e in fresh["hip"]}
    assert hip["hipErrorOutOfMemory"]["number"] == 2
    assert hip["hipErrorOutOfMemory"]["description"] == "out of memory range."
    assert hip["hipErrorOutOfMemory"]["runtime_string"] == "out of memory"
    assert hip["hipErrorMemoryAllocation"]["alias_of"] == "hipErrorOutOfMemory"
    assert hip["hipErrorNoDevice"]["runtime_string"] == "no ROCm-capable device is detected"
    assert "hipErrorTbd" not in hip
    assert set(hip) == set(catalog_families.HIP_FAMILY)
    hsa = {e["name"]: e for e in fresh["hsa"]}
    assert hsa["HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION"]["hex"] == "0x29"
    assert hsa["HSA_STATUS_ERROR_OUT_OF_RESOURCES"]["number"] == 0x1008
    assert set(hsa) == set(catalog_families.HSA_FAMILY)


FAULT = (
    "Memory access fault by GPU node-1 (Agent handle: 0x55d4bc0) on address 0x7f2a3c000000. "
    "Reason: Page not present or supervisor privilege."
)
KNOWN = [
    (FAULT, "runtime", "memory-access-fault", "core/runtime/runtime.cpp"),
    (
        "amdgpu 0000:03:00.0: amdgpu: ring gfx_0.0.0 timeout, signaled seq=1234, emitted seq=1236",
        "kernel",
        "ring-timeout",
        "amdgpu/amdgpu_job.c",
    ),
    ("hipErrorNoDevice", "hip", "no-device", "hip_runtime_api.h"),
    ("RuntimeError: HIP error: out of memory", "hip", "out-of-memory", "hip_runtime_api.h"),
    (
        "[drm:amdgpu_device_init [amdgpu]] *ERROR* gpu post error!",
        "kernel",
        "amdgpu-init-failure",
        "amdgpu/amdgpu_device.c",
    ),
    (
        "amdgpu: MES failed to respond to msg=MISC (WAIT_REG_MEM)",
        "kernel",
        "mes-timeout",
        "amdgpu/mes_v11_0.c",
    ),
    (
        "amdgpu 0000:c3:00.0: amdgpu: [gfxhub0] retry page fault (src_id:0 ring:0 vmid:8 "
        "pasid:32769)",
        "kernel",
        "vm-page-fault",
        "amdgpu/gmc_v9_0.c",
    ),
    (
        "hsa api call failure at: rocminfo.cc:1306 Call returned HSA_STATUS_ERROR_OUT_OF_RESOURCES:"
        " The runtime failed to allocate the necessary resources.",
        "hsa",
        "hsa-out-of-resources",
        "inc/hsa.h",
    ),
    (
        "kfd kfd: amdgpu: GC IP 0b0500 not supported in kfd",
        "kernel",
        "kfd-unsupported-gpu",
        "amdkfd/kfd_device.c",
    ),
    (
        "amdgpu 0000:0b:00.0: Direct firmware load for amdgpu/gc_11_0_0_mes_2.bin failed with "
        "error -2",
        "kernel",
        "firmware-missing",
        "firmware_loader/main.c",
    ),
    (
        "amdgpu 0000:03:00.0: amdgpu: GPU reset(2) succeeded!",
        "kernel",
        "gpu-reset",
        "amdgpu/amdgpu_device.c",
    ),
    ("amdgpu 0000:03:00.0: amdgpu: MODE1 reset", "kernel", "gpu-reset", "amdgpu/soc15.c"),
    ("HIP error code 98", "hip", "no-kernel-for-gpu", "hip_runtime_api.h"),
]


@pytest.mark.parametrize("line,kind,family,path", KNOWN)
def test_real_lines_map_to_their_entries(line, kind, family, path):
    hit = catalogs.lookup(line)
    assert hit is not None, line
    assert (hit.kind, hit.family) == (kind, family)
    assert hit.source["path"].endswith(path)
    assert hit.source["url"].startswith("https://github.com/")
    assert hit.meaning and hit.collect


def test_a_hit_carries_what_the_line_adds():
    fault = catalogs.lookup(FAULT)
    assert fault.fields == {"reason": "Page not present or supervisor privilege"}
    assert "AMD_LOG_LEVEL=3" in " ".join(fault.collect)
    oom = catalogs.lookup("HIP error: out of memory")
    assert (oom.name, oom.number, oom.runtime_string) == ("hipErrorOutOfMemory", 2, "out of memory")
    assert oom.description == "out of memory range."
    mes = catalogs.lookup("amdgpu: MES failed to respond to msg=MISC (WAIT_REG_MEM)")
    assert mes.description == "MES failed to respond to msg=%s (%s)"
    queue = catalogs.lookup(
        "Callback: Queue 0x7f3c24a00000 aborting with error : "
        "HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION: The agent attempted to access memory beyond "
        "the largest legal address. code: 0x29"
    )
    assert queue.kind == "runtime" and queue.family == "memory-access-fault"
    assert queue.fields == {"status": "HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION"}
    assert catalogs.lookup("training step 10, loss 2.31") is None


@pytest.mark.parametrize(
    "line,source",
    [
        ("[   12.345678] amdgpu 0000:03:00.0: amdgpu: something the catalog lacks", "kernel"),
        ("dpkg: error processing package amdgpu-dkms (--configure):", "package manager"),
        (
            "Error! Bad return status for module build on kernel: 6.8.0-45-generic (x86_64)",
            "package manager",
        ),
        (
            '  File "/usr/lib/python3/dist-packages/torch/cuda/__init__.py", line 300, in '
            "_lazy_init",
            "PyTorch",
        ),
        ("Traceback (most recent call last):", "PyTorch"),
        (
            "rocBLAS error: Cannot read /opt/rocm/lib/rocblas/library/TensileLibrary.dat",
            "rocBLAS/MIOpen/other ROCm library",
        ),
        ("hipMalloc returned hipErrorInvalidValue", "HIP"),
        ("HSA_STATUS_ERROR_INVALID_ISA", "HSA"),
        ("the weather is fine", None),
    ],
)
def test_classify_source_tells_the_layer(line, source):
    assert catalogs.classify_source(line) == source
    if source:
        assert catalogs.what_to_collect(source)


def test_format_strings_become_loose_regexes():
    regex = catalog_parse.format_regex("ring %s timeout, signaled seq=%u, emitted seq=%u\n")
    line = "amdgpu 0000:03:00.0: amdgpu: ring comp_1.0.0 timeout, signaled seq=7, emitted seq=9"
    assert re.search(regex, line)
    assert not re.search(regex, "ring gfx timeout, but soft recovered")
    pointer = catalog_parse.format_regex("on address %p%s. Reason: %s.")
    assert re.search(
        pointer, "on address 0x7f2a3c000000(may not be exact address). Reason: Unknown."
    )


def test_a_wide_table_is_looked_up_quickly():
    """Formats with several %s gave regexes that backtracked for about 30 s on the wide
    lines of a real rocm-smi --showtopo table (MI300X in TPX mode, the first corpus)."""
    import time
    from pathlib import Path

    corpus = Path(__file__).parent / "data" / "doctor" / "corpus"
    lines = (corpus / "51-rocm-smi-showtopo-tpx-xxxx.txt").read_text().splitlines()
    began = time.perf_counter()
    for line in lines:
        catalogs.lookup(line)
    assert time.perf_counter() - began < 3.0  # about 0.02 s here
