"""Issue 46, items 1 and 2: advice from the GPU alone, and citations that say what the
advice says.

Without a PyTorch arch list, doctor answers from the GPU's gfx target and the ROCm
release data (``compatibility.json``): whether the installed release lists the target
(or, when the release is unknown, which releases do), which
``HSA_OVERRIDE_GFX_VERSION`` family applies or that the data says none helps, and
where a native build exists. An environment that was not read is "not collected",
never "not set".
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rocm_dl_guide import doctor
from rocm_dl_guide.doctor import compat_data, gpu_targets, logs, rules, snapshot

COMPAT_URLS = {s["url"] for s in compat_data.sources().values()}
RULE_URLS = set(rules.SOURCES.values())


def _log_machine(text: str) -> doctor.DoctorReport:
    """doctor --log TEXT on a machine nothing else was collected from."""
    data = snapshot.compose(None, torch={"name": "pytorch", "installed": False, "details": {}})
    data["host"] = None
    data["kernel_driver"] = {"loaded": None, "note": None}
    data["rocm"] = {"path": None}
    data["rocminfo"].update(error="not collected (doctor --log on another machine)")
    data["log"] = {"source": "log.txt", "text": text}
    return doctor.check_system(snapshot.from_dict(data, "log.txt"))


def _check(rep: doctor.DoctorReport, cid: str):
    found = [c for c in rep.checks if c.id == cid]
    assert len(found) == 1, [c.id for c in rep.checks]
    return found[0]


# --------------------------------------------------------------------------- item 2


def test_an_installed_release_that_lists_the_target_is_ok():
    status, message, fix, sources = gpu_targets.support_for("gfx1100", "6.4.1")
    assert status == rules.OK and "ROCm 6.4.1 lists it" in message and not fix
    assert sources and set(sources) <= COMPAT_URLS


def test_a_gfx103x_radeon_gets_the_10_3_0_family_with_the_releases_that_help():
    status, message, fix, sources = gpu_targets.support_for("gfx1031", None)
    assert status == rules.INFO
    assert "the installed ROCm release is not known" in message
    assert "ROCm 5.5.1 lists it" in message  # the one release whose list has gfx1031
    assert "HSA_OVERRIDE_GFX_VERSION=10.3.0 runs it as gfx1030" in message
    assert "HSA_OVERRIDE_GFX_VERSION=10.3.0" in fix and "unofficial" in fix
    assert rules.SOURCES["override-gfx1031"] in sources
    assert set(sources) & COMPAT_URLS  # the release lists are cited


def test_a_gfx110x_igpu_gets_the_release_that_added_it_and_the_overrides_risk():
    status, message, fix, sources = gpu_targets.support_for("gfx1103", "6.2.0")
    assert status == rules.WARN
    assert "ROCm 6.2.0's supported GPU targets do not include it" in message
    assert "ROCm 10.0.0 is the next release to list it" in message  # a native build
    assert "HSA_OVERRIDE_GFX_VERSION set to 11.0.0 runs it as gfx1100" in message
    assert "known to fail for some work on gfx1103" in message
    assert fix == "install ROCm 10.0.0 or later with a PyTorch build for it"


@pytest.mark.parametrize("gfx", ["gfx1151", "gfx1201"])
def test_where_the_data_says_no_override_helps_none_is_offered(gfx):
    status, message, fix, sources = gpu_targets.support_for(gfx, "6.2.0")
    assert "no target override helps" in message
    assert "export HSA_OVERRIDE_GFX_VERSION" not in fix
    assert "rocm.nightlies.amd.com" in message and "rocm.nightlies.amd.com" in fix
    for key in rules.NO_OVERRIDE[gfx][2]:
        assert rules.SOURCES[key] in sources


def test_a_target_no_release_lists_says_so_and_guesses_no_override():
    status, message, fix, _ = gpu_targets.support_for("gfx1010", None)
    assert "none of the ROCm releases" in message
    assert "names no HSA_OVERRIDE_GFX_VERSION value for gfx1010" in message
    assert not fix


def test_release_spans_break_where_the_data_gives_no_list():
    spans = [(a["rocm"], b["rocm"]) for a, b in gpu_targets.release_spans("gfx1030")]
    assert ("10.0.0", "10.0.0") in spans  # 7.14.0 gives no target list: the run ends there
    assert all(a != "7.14.0" and b != "7.14.0" for a, b in spans)


def test_every_source_of_the_support_check_is_a_known_source():
    for gfx in ("gfx1031", "gfx1036", "gfx1103", "gfx1150", "gfx1151", "gfx1201", "gfx90a"):
        for version in (None, "6.0.0", "6.4.1", "7.2.4"):
            *_, sources = gpu_targets.support_for(gfx, version)
            assert set(sources) <= COMPAT_URLS | RULE_URLS, (gfx, version)


def test_the_gpu_of_an_error_text_gets_the_release_advice():
    text = (
        "rocBLAS error: Cannot read /opt/rocm/lib/rocblas/library/TensileLibrary.dat: "
        "No such file or directory for GPU arch : gfx1032\n"
    )
    rep = _log_machine(text)
    check = _check(rep, "gpu-support")
    assert check.message.startswith("gfx1032 (named in your error text): ")
    assert "HSA_OVERRIDE_GFX_VERSION=10.3.0" in check.fix


def test_device_targets_are_the_gpus_not_the_build_lists():
    text = "\n".join(
        [
            "PYTORCH_ROCM_ARCH=gfx1030",
            "torch.cuda.get_arch_list(): ['gfx1100']",
            "GPU models and configuration: AMD Radeon RX 5700 XT (gfx1010:xnack-)",
            "MIOpen(HIP): Warning [SQLiteBase] Missing system database file: gfx906_60.kdb",
            "GPU[2]\t\t: GFX Version: \t\tgfx1036",
        ]
    )
    assert logs.device_targets(text) == ["gfx1010", "gfx906", "gfx1036"]


# --------------------------------------------------------------------------- unknown env


def test_an_environment_not_read_is_not_collected_never_not_set():
    rep = _log_machine("Segmentation fault (core dumped)\n")
    check = _check(rep, "hsa-override")
    assert check.status == rules.UNKNOWN and "not collected" in check.message
    line = next(ln for ln in rep.to_text(wrap=1000).splitlines() if "environment" in ln)
    assert line.startswith("  [??]   Not collected here: ") and "[ok]" not in line


def test_an_override_the_error_text_sets_is_named():
    rep = _log_machine("export HSA_OVERRIDE_GFX_VERSION=10.3.0\nSegmentation fault\n")
    check = _check(rep, "hsa-override")
    assert check.status == rules.UNKNOWN
    assert "your error text sets it to 10.3.0" in check.message


def test_an_override_named_in_prose_is_judged_against_the_gpu_the_text_names():
    """A real report (blind2, 02): ROCm 7 on a Radeon 8060S (gfx1151) run "with
    HSA_OVERRIDE_GFX_VERSION=12.0.1", which crashed the kernel driver; the fix was to
    remove it, since gfx1151 is a target of its own."""
    path = Path(__file__).parent / "data/doctor/blind2/02-strix-halo-wrong-override-12.0.1.txt"
    check = _check(_log_machine(path.read_text(encoding="utf-8")), "hsa-override")
    assert check.status == rules.FAIL
    assert "your error text sets it to 12.0.1: gfx1151 runs as gfx1201" in check.message
    assert check.fix.startswith("unset it; ")
    # A GPU whose sibling's target is the usual override is warned, not failed.
    text = "Radeon RX 6700 XT\nI run it with HSA_OVERRIDE_GFX_VERSION=10.3.0 and it works\n"
    check = _check(_log_machine(text), "hsa-override")
    assert check.status == rules.WARN and "gfx1031 natively" in check.message


# --------------------------------------------------------------------------- item 1


def _rule(rid: str) -> logs.Rule:
    return next(r for r in logs.RULES if r.id == rid)


def test_the_miopen_user_db_fix_names_only_variables_its_sources_document():
    rule = _rule("miopen-user-db")
    assert "MIOPEN_USER_DB_PATH" in rule.fix and "MIOPEN_DISABLE_CACHE" in rule.fix
    assert "MIOPEN_CUSTOM_CACHE_DIR" not in rule.fix + rule.causes
    assert rules.SOURCES["miopen-user-db"].endswith("/conceptual/tuningdb.html")
    assert rules.SOURCES["miopen-cache"].endswith("/conceptual/cache.html")
    assert {rules.SOURCES["miopen-user-db"], rules.SOURCES["miopen-cache"]} <= set(rule.sources)


def test_the_iommu_fix_cites_amds_recommendation():
    rule = _rule("iommu")
    assert rules.SOURCES["iommu-pt-amd"] in rule.sources
    assert "rocm.docs.amd.com" in rules.SOURCES["iommu-pt-amd"]


def test_the_nps4_note_is_covered_by_the_amd_smi_rules_sources():
    text = (
        "GPU: 1\n    MEMORY_PARTITION: [AMDSMI_STATUS_NOT_SUPPORTED] "
        "Unable to set memory partition to NPS4\n"
    )
    finding = next(f for f in logs.read(text) if f.rule.id == "amd-smi")
    assert "NPS4 is only compatible with the CPX" in finding.details
    assert rules.SOURCES["mi300x-partition-quickstart"] in finding.rule.sources


def test_the_udev_rule_is_the_line_its_source_gave():
    finding = next(
        f
        for f in logs.read("crw-------   1 root    root    234,   0 Mai 21 05:13 kfd\n")
        if f.rule.id == "kfd-mode"
    )
    assert 'KERNEL=="kfd", MODE="0660", GROUP="video", TAG+="uaccess"' in finding.fix
    assert rules.SOURCES["kfd-udev"] in finding.rule.sources
    assert not re.search(r'GROUP="render"', finding.fix)


def test_a_vega_apu_gets_its_familys_override_with_the_reports_that_it_works():
    """gfx90c (Renoir, Cezanne) and gfx902 (Raven, Picasso) run gfx900's kernels:
    AMD's rocBLAS maintainers point to 9.0.0, and users report it working."""
    line = "rocBLAS error: Cannot read /opt/rocm/lib/rocblas/library/TensileLibrary.dat: "
    rep = _log_machine(line + "No such file or directory for GPU arch : gfx90c\n")
    check = _check(rep, "gpu-support")
    assert "HSA_OVERRIDE_GFX_VERSION=9.0.0 runs it as gfx900" in check.message
    assert "https://github.com/ROCm/rocBLAS/issues/1398" in check.sources
    assert check.fix.startswith("export HSA_OVERRIDE_GFX_VERSION=9.0.0")


def _quoted(corpus: str, prefix: str) -> str:
    folder = Path(__file__).parent / "data" / "doctor" / corpus
    return next(folder.glob(f"{prefix}-*.txt")).read_text(encoding="utf-8")


def test_an_override_one_gpu_needs_and_another_must_not_get_is_set_per_node():
    """blind4, 09: an RX 6600 (gfx1032) needs 10.3.0, and the RX 9060 XT (gfx1200) beside
    it must keep its own target: libhsakmt reads HSA_OVERRIDE_GFX_VERSION_<node> first."""
    check = _check(_log_machine(_quoted("blind4", "09")), "hsa-override")
    assert check.status == rules.WARN
    assert "gfx1032 needs it, but every GPU of the process runs as gfx1030, gfx1200 too" in (
        check.message
    )
    assert "HSA_OVERRIDE_GFX_VERSION_N=10.3.0" in check.fix
    assert rules.SOURCES["override-per-node"] in check.sources


def test_an_override_on_a_gpu_its_reader_names_by_target_alone_is_judged():
    """blind4, 08: an app sets 10.3.0 for every AMD GPU; the reader's is a gfx1201."""
    check = _check(_log_machine(_quoted("blind4", "08")), "hsa-override")
    assert check.status == rules.FAIL and "gfx1201 runs as gfx1030" in check.message
    assert check.fix.startswith("unset it; install a PyTorch build that has gfx1201")


def test_a_780m_is_pointed_at_a_native_build_not_at_an_override_known_to_fail():
    """Issue 58, item 6: for gfx1103 AMD's engineer warns that gfx1100's kernels fail
    (fewer VGPRs, no WMMA); a release lists gfx1103 itself, so the fix is that release,
    and the override is named with its warning, never as an export to copy."""
    check = _check(_log_machine("Radeon 780M Graphics\nSegmentation fault\n"), "gpu-support")
    assert "HSA_OVERRIDE_GFX_VERSION set to 11.0.0 runs it as gfx1100" in check.message
    assert "known to fail for some work on gfx1103" in check.message
    assert "HSA_OVERRIDE_GFX_VERSION=11.0.0" not in check.message + check.fix
    assert check.fix.startswith("use one of those releases (ROCm ")
    # a sibling without a known failure keeps the documented export
    check = _check(_log_machine("Radeon RX 6700 XT\nSegmentation fault\n"), "gpu-support")
    assert "export HSA_OVERRIDE_GFX_VERSION=10.3.0" in check.fix


def test_a_gpu_ollama_reports_it_runs_on_gets_no_target_advice():
    text = _quoted("blind8", "18")  # ollama's 'inference compute ... compute=gfx1102'
    check = _check(_log_machine(text), "gpu-support")
    assert check.status == rules.OK and not check.fix
    assert "gfx1102 (named in your error text): ollama runs on it" in check.message


def test_an_override_to_the_gpus_own_target_changes_nothing():
    check = _check(
        _log_machine("Radeon RX 9070 XT\nexport HSA_OVERRIDE_GFX_VERSION=12.0.1\n"), "hsa-override"
    )
    assert (
        check.status == rules.INFO and "the GPU's own target: it changes nothing" in check.message
    )


def test_a_target_the_newest_release_lists_is_pointed_at_releases_not_an_override():
    """An RX 7800 XT (gfx1101) named in a text from another machine: ROCm lists it, so
    the fix is a release that does; the family override is named, never given to copy."""
    check = _check(_log_machine("AMD Radeon RX 7800 XT\nSegmentation fault\n"), "gpu-support")
    assert check.fix.startswith("use one of those releases (ROCm ")
    assert "HSA_OVERRIDE_GFX_VERSION=" not in check.message + check.fix
    assert "HSA_OVERRIDE_GFX_VERSION set to 11.0.0 runs it as gfx1100" in check.message
