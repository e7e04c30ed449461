"""Issue 46, item 1, "never wrong": where a fact is unknown, doctor says so and does not guess.

Each case replays a snapshot (:func:`snapshot.compose`, then :func:`snapshot.from_dict`,
the path of ``doctor --snapshot``) in which a fact was not collected: null device
nodes, null groups, a PyTorch probe that did not run or reported nothing, WSL with
nothing read, an empty workload result, smi output with nothing recognised. No line of
the text report may print ``None`` or claim a count, a group list or a missing device
that was not observed, and no advice may rest on a premise that was not observed:
``usermod`` (the account is in the group, or its groups are unknown), "unsupported by
the KFD driver" (no data says the GPU is unsupported), "Ready" (no kernel ran), "need a
supported GPU" (a GPU is there: /dev/kfd refused the user, or an MI300X is partitioned).
"""

from __future__ import annotations

import json
import re

import pytest

from conftest import doctor_cli
from rocm_dl_guide import doctor
from rocm_dl_guide.doctor import hostfacts, report, rules, snapshot

snap = snapshot.compose
AMD_PCI = [{"vendor": "AMD", "device_id": "0x744c", "address": "0000:03:00.0", "class": "0x030000"}]
KFD_DENIED = (
    "ROCk module is loaded\n"
    "Unable to open /dev/kfd read-write: Permission denied\n"
    "maculele is member of render group\n"
)  # rocminfo's lines, ROCm/legacy-rocm-build#1211
KFD_INVALID = "ROCk module is loaded\nUnable to open /dev/kfd read-write: Invalid argument\n"
CPX_NPS4 = "".join(
    f"GPU: {i}\n    COMPUTE_PARTITION: CPX\n    MEMORY_PARTITION: NPS4\n"
    f"    PARTITION_ID: {i % 8}\n\n"
    for i in range(64)
)  # amd-smi static --partition on 8 MI300X in CPX/NPS4 (the layout of tests/test_smi.py's sample)


def _no_groups(data: dict) -> dict:
    data["host"]["groups"] = None  # not collected
    return data


def _with_rocminfo(data: dict, text: str) -> dict:
    data["rocminfo"].update(text=text, error=None, returncode=1)
    return data


def _cases() -> dict[str, dict]:
    cases = {}
    data = snap("radeon")
    data["host"]["devices"] = None
    cases["devices null"] = data
    data = snap("radeon")
    del data["host"]["devices"]
    cases["devices absent"] = data
    cases["groups null, kfd denied"] = _no_groups(snap("radeon", accessible=False))
    data = snap("radeon", accessible=False)
    del data["host"]["groups"]
    cases["groups absent, kfd denied"] = data
    data = snap("radeon")
    data["host"]["devices"][0] = {"path": "/dev/kfd", "exists": True}
    cases["kfd owner, mode and access null"] = data
    data = snap("radeon")
    data["host"]["devices"][1]["accessible"] = None
    cases["render node access null"] = data
    torch = snapshot.rocm_pytorch()
    torch["version"] = None
    torch["details"]["devices"] = None
    torch["details"]["distributed"] = {"available": True, "gloo": True, "nccl": True}
    cases["torch version and devices null"] = snap("radeon", torch=torch)
    torch = snapshot.rocm_pytorch()
    torch["details"]["gpu_available"] = None
    cases["torch gpu_available null"] = snap("radeon", torch=torch)
    cases["torch probe did not run"] = snap(
        "radeon", torch={"name": "pytorch", "installed": False, "details": {}, "error": None}
    )
    data = snap("radeon")
    data["frameworks"] = {
        "tensorflow": {"name": "tensorflow", "installed": True, "details": {}},
        "onnxruntime": {"name": "onnxruntime", "installed": True, "details": {}},
        "migraphx": {"name": "migraphx", "installed": False, "details": {}},
    }
    cases["frameworks with nothing reported"] = data
    data = snap("radeon", kfd=False, renders=0, wsl={"kernel_release": "5.15-microsoft-WSL2"})
    data["kernel_driver"] = {"loaded": False, "note": None}
    cases["wsl, nothing read"] = data
    data = snap("radeon")
    data["kernel_driver"] = {"loaded": None}
    data["rocm"] = {"path": "/opt/rocm"}
    cases["kernel driver and rocm not read"] = data
    cases["workload empty"] = snap("radeon", workload=[])
    cases["workload ok, no kernel recorded"] = snap("radeon", workload=[{"index": 0, "ok": True}])
    data = snap("radeon")
    data["smi"] = {"source": "rocm-smi", "text": "WARNING: nothing to show\n", "error": None}
    cases["smi, nothing recognised"] = data
    cases["kfd denied, already in render"] = _with_rocminfo(
        snap(None, torch=snapshot.rocm_pytorch(gpus=0), accessible=False, pci=AMD_PCI),
        KFD_DENIED,
    )
    cases["kfd denied, groups unknown"] = _with_rocminfo(
        _no_groups(snap(None, torch=snapshot.rocm_pytorch(gpus=0), accessible=False)),
        KFD_DENIED.replace("maculele is member of render group\n", ""),
    )
    cases["kfd invalid argument"] = _with_rocminfo(
        snap(None, torch=snapshot.rocm_pytorch(gpus=0)), KFD_INVALID
    )
    data = snap(None, torch=snapshot.rocm_pytorch(gpus=0))
    data["smi"] = {"source": "amd-smi static --partition", "text": CPX_NPS4, "error": None}
    cases["partitioned MI300X, no rocminfo"] = data
    return cases


CASES = _cases()


def _text(data: dict) -> tuple[doctor.DoctorReport, str]:
    rep = doctor.check_system(snapshot.from_dict(json.loads(json.dumps(data)), "case.json"))
    return rep, rep.to_text(wrap=1000)


def _usermod_premise(rep: doctor.DoctorReport) -> bool:
    """Observed that this user is outside the group: this session's groups were read
    (and the account's do not hold it), or rocminfo said "is not member of"."""
    host = rep.system.host
    member = rep.system.rocminfo.group_membership
    if member is not None:
        return member[1] is False
    if host is None or host.groups is None or "render" in host.groups:
        return False
    return host.account_groups is None or "render" not in host.account_groups


@pytest.mark.parametrize("name", list(CASES))
def test_no_line_states_an_unknown_as_a_fact(name):
    rep, text = _text(CASES[name])
    for line in text.splitlines():
        assert not re.search(r"\bNone\b", line), line
        assert not re.search(r"(?<![\d.])0 (physical )?GPU\(s\)", line), line
        assert "groups: none" not in line, line
        assert "(None" not in line and "mode None" not in line, line
    if "usermod" in text:
        assert _usermod_premise(rep), text
    assert "unsupported by the KFD driver" not in text  # no data says any GPU here is
    assert not rep.verdict.startswith("Ready") or doctor.diagnose.workload_passed(rep.system)


@pytest.mark.parametrize(
    "name, cid, words",
    [
        ("devices null", "device-access", "not collected"),
        ("devices absent", "device-access", "not collected"),
        ("kfd owner, mode and access null", "device-access", "was not collected"),
        ("render node access null", "device-access", "was not collected"),
        ("torch gpu_available null", "pytorch", "was not collected"),
        ("torch probe did not run", "pytorch", "not checked"),
        ("wsl, nothing read", "wsl", "was not collected"),
        ("wsl, nothing read", "device-access", "/dev/dxg (the GPU's device under WSL) exists"),
        ("kernel driver and rocm not read", "kernel-driver", "not collected"),
        ("kernel driver and rocm not read", "rocm", "not collected"),
        ("workload empty", "gpu-workload", "no kernel was run"),
        ("workload ok, no kernel recorded", "gpu-workload", "records no operation"),
        ("smi, nothing recognised", "partitions", "nothing in the smi output was recognised"),
    ],
)
def test_an_unknown_is_marked_unknown(name, cid, words):
    rep, text = _text(CASES[name])
    found = [c for c in rep.checks if c.id == cid]
    assert len(found) == 1 and found[0].status == rules.UNKNOWN, found
    assert words in found[0].message
    name = found[0].name  # the report does not repeat the name at the message's start
    line = f"[??]   {name}: {report._without_name(name, found[0].message)}"
    folded = [s for s in text.splitlines() if s.startswith("  [??]   Not collected here: ")]
    assert line in text or (found[0].uncollected and name in folded[0]), text


def test_no_ready_verdict_without_a_kernel_that_ran():
    for name in ("workload empty", "workload ok, no kernel recorded", "devices null"):
        rep, _ = _text(CASES[name])
        assert rep.verdict.startswith("Not ready"), (name, rep.verdict)
        assert "run doctor on the machine itself" in rep.verdict
    rep, _ = _text(snap("radeon", workload=[snapshot.workload_result()]))
    assert rep.verdict.startswith("Ready")  # a kernel ran and agreed with the CPU


@pytest.mark.parametrize(
    "name, evidence",
    [
        ("kfd denied, already in render", "the PCI bus shows an AMD display device"),
        ("kfd denied, groups unknown", "/dev/kfd exists"),
        ("kfd invalid argument", "/dev/kfd exists"),
        ("partitioned MI300X, no rocminfo", "the smi output lists 64 GPU devices"),
    ],
)
def test_a_gpu_that_is_there_is_never_told_to_get_a_supported_gpu(name, evidence):
    rep, _ = _text(CASES[name])
    assert "need a supported" not in rep.verdict and not rep.verdict.startswith("No usable GPU")
    assert evidence in rep.verdict


def test_usermod_only_where_the_user_is_seen_outside_the_group():
    rep, _ = _text(CASES["kfd denied, already in render"])
    access = next(c for c in rep.checks if c.id == "device-access")
    assert "usermod" not in access.fix and "in render already" in access.fix
    for name in ("groups null, kfd denied", "groups absent, kfd denied"):
        rep, _ = _text(CASES[name])
        access = next(c for c in rep.checks if c.id == "device-access")
        assert access.status == rules.FAIL and "(groups were not collected)" in access.message
        assert "usermod" not in access.fix and "id -nG" in access.fix
    seen = snap("radeon", accessible=False, groups=("users",))  # observed: not in render
    assert any("usermod -a -G render,video" in c.fix for c in _text(seen)[0].checks)


def test_rocminfos_kfd_error_does_not_call_the_gpu_unsupported():
    from rocm_dl_guide.doctor import rocminfo

    error = rocminfo.parse(KFD_INVALID).error
    assert "not a permission problem" in error and "dmesg" in error
    assert "unsupported" not in error


def test_old_snapshots_without_devices_or_groups_load_as_unknown(tmp_path):
    data = snap("radeon")
    del data["host"]["devices"], data["host"]["groups"]
    data["format_version"] = 3
    migrated = snapshot.migrate(data)
    assert migrated["host"]["devices"] is None and migrated["host"]["groups"] is None
    assert "devices" not in data["host"]  # the input is left as it was
    empty = snap("radeon", groups=())
    empty["format_version"] = 3  # a version-3 collector wrote [] where it read nothing
    assert snapshot.migrate(empty)["host"]["groups"] is None
    path = tmp_path / "v3.json"
    path.write_text(json.dumps(data))
    host = snapshot.load(path).host
    assert host.devices is None and host.groups is None and host.kfd is None
    # version 4 keeps an explicit unknown apart from "there is no /dev/kfd"
    none = snapshot.from_dict(snap("radeon", kfd=False, renders=0), "n.json").host
    assert none.devices and none.kfd.exists is False
    again = snapshot.load(snapshot.write(tmp_path / "v4.json", snapshot.load(path)))
    assert again.host.devices is None and again.host.groups is None


def test_a_device_node_that_cannot_be_looked_at_is_unknown(tmp_path, monkeypatch):
    from pathlib import Path

    real = Path.stat

    def stat(self, *args, **kwargs):
        if self.name == "kfd":
            raise PermissionError(13, "Permission denied")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "stat", stat)
    assert hostfacts.device_node(tmp_path / "kfd").exists is None
    assert hostfacts.device_node(tmp_path / "absent").exists is False


def test_doctor_snapshot_replays_unknowns_from_a_file(tmp_path):
    path = tmp_path / "unknowns.json"
    path.write_text(json.dumps(CASES["groups null, kfd denied"]))
    proc = doctor_cli("--snapshot", str(path))
    assert proc.returncode == 0, proc.stderr
    assert "groups were not collected" in proc.stdout
    assert not re.search(r"\bNone\b", proc.stdout) and "usermod" not in proc.stdout
