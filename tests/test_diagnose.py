"""doctor's rules for real setup failures, on snapshots of the situations readers report.

Each snapshot is built from real outputs where there are some: the rocminfo
samples under code/rocm_dl_guide/samples/rocminfo/ (an APU whose integrated GPU
ROCm lists next to an RX 7900 GRE, an RX 6600 XT, a Radeon RX 7900 XTX, MI300X),
and the GPU targets of a PyTorch ROCm 6.2 wheel as its users listed them
(gfx900, gfx906, gfx908, gfx90a, gfx942, gfx1030, gfx1100; pytorch/pytorch#132570).
The snapshots are composed by :func:`snapshot.compose` (as the Verify page's
examples are) and go through :func:`snapshot.from_dict`, so every case also
tests the replay path of ``doctor --snapshot``.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from conftest import doctor_cli
from rocm_dl_guide import doctor
from rocm_dl_guide.doctor import diagnose, gpu_targets, hostfacts, rules, samples, snapshot, system

TIMEOUT = 300
snap = snapshot.compose


def rocm_torch(gpu: bool = True) -> dict:
    return snapshot.rocm_pytorch(gpus=1 if gpu else 0)


cuda_torch = snapshot.cuda_pytorch


def report(data: dict) -> doctor.DoctorReport:
    return doctor.check_system(snapshot.from_dict(data, "case.json"))


def check(data: dict, cid: str) -> rules.Check:
    found = [c for c in report(data).checks if c.id == cid]
    assert len(found) == 1, [c.id for c in report(data).checks]
    return found[0]


# --------------------------------------------------------------------------- the rules


def test_a_supported_card_with_the_right_wheel_is_ready():
    rep = report(snap("radeon", workload=[snapshot.workload_result()]))
    by_id = {c.id: c for c in rep.checks}
    assert by_id["arch-mismatch"].status == rules.OK and "gfx1100" in by_id["arch-mismatch"].message
    assert by_id["hsa-override"].status == rules.OK
    assert by_id["device-access"].status == rules.OK
    assert by_id["torch-sees-gpu"].status == rules.OK
    assert by_id["gpu-workload"].status == rules.OK
    assert rep.verdict.startswith("Ready")


# --------------------------------------------------------------------------- the real workload


def test_never_ready_when_the_gpu_workload_fails():
    """PyTorch sees the GPU (is_available() is true) but the first kernel fails with
    PyTorch's own HIP error text: not Ready, and the cause names the GPU's target
    that the build lacks."""
    failed = snapshot.workload_result(
        name="AMD Radeon RX 6600 XT",
        failure="HIP error: invalid device function (RuntimeError)",
        stderr=snapshot.HIP_INVALID_DEVICE_FUNCTION,
    )
    rep = report(snap("rx6600xt", torch=rocm_torch(gpu=True), workload=[failed]))
    assert rep.verdict.startswith("Not ready") and "workload on it failed" in rep.verdict
    work = [c for c in rep.checks if c.id == "gpu-workload"][0]
    assert work.status == rules.FAIL and "GPU 0 (AMD Radeon RX 6600 XT)" in work.message
    assert "no kernels for gfx1032" in work.message and "gfx1030" in work.message
    assert "PyTorch build for gfx1032" in work.fix
    assert any("pytorch/issues/132570" in s for s in work.sources)


@pytest.mark.parametrize(
    "failure, expected",
    [
        ("the process died with SIGSEGV while running matmul on cuda:0", "GPU runtime failed"),
        ("did not finish within 180 s (a hang in the GPU runtime)", "GPU runtime failed"),
        ("wrong result: matmul off by 0.5 (relative; tolerance 0.01)", "wrong answers"),
    ],
)
def test_a_crash_a_hang_or_a_wrong_answer_is_never_ready(failure, expected):
    data = snap("radeon", workload=[snapshot.workload_result(failure=failure)])
    rep = report(data)
    work = [c for c in rep.checks if c.id == "gpu-workload"][0]
    assert work.status == rules.FAIL and expected in work.message
    assert not rep.verdict.startswith("Ready")


def test_an_override_that_runs_wrong_kernels_is_named():
    data = snap(
        "radeon",
        env={"HSA_OVERRIDE_GFX_VERSION": "10.3.0"},
        workload=[snapshot.workload_result(failure="wrong result: conv2d off by 3 (relative)")],
    )
    work = [c for c in report(data).checks if c.id == "gpu-workload"][0]
    assert "runs it as gfx1030" in work.message and "unset HSA_OVERRIDE_GFX_VERSION" in work.fix


def test_a_snapshot_without_the_workload_still_replays_but_is_not_ready(tmp_path):
    data = snap("radeon")
    data.pop("gpu_workload")  # written before the check existed: format version 1
    data["format_version"] = 1
    path = tmp_path / "old.json"
    path.write_text(json.dumps(data))
    rep = doctor.from_snapshot(path)
    work = [c for c in rep.checks if c.id == "gpu-workload"][0]
    assert work.status == rules.UNKNOWN and "no kernel was run" in work.message
    assert rep.verdict.startswith("Not ready") and "run doctor on the machine itself" in rep.verdict


SNAPSHOTS = Path(__file__).parent / "data" / "doctor"
"""Snapshots written by earlier versions of the guide, kept as they were written:
``h200-v1.json`` by ``doctor --collect`` on an H200 machine lent to the project
(format version 1, commit 0e0a7db), ``cpu-v1-before-workload-check.json`` on a
CPU-only machine by the code of commit 70ea0bd (version 1 before the GPU workload
check, ``--log``, the account's groups and WSL detection existed)."""


def test_version_1_snapshots_replay_after_migration():
    h200 = doctor.from_snapshot(SNAPSHOTS / "h200-v1.json")
    work = [c for c in h200.checks if c.id == "gpu-workload"][0]
    assert work.status == rules.OK and "on the GPU agree with the CPU" in work.message
    assert h200.verdict.startswith("Ready")
    old = json.loads((SNAPSHOTS / "cpu-v1-before-workload-check.json").read_text())
    assert old["format_version"] == 1 and "gpu_workload" not in old
    assert "account_groups" not in old["host"] and "wsl" not in old["host"]
    migrated = snapshot.migrate(old)
    assert migrated["format_version"] == snapshot.FORMAT_VERSION
    assert migrated["gpu_workload"] is None and migrated["log"] is None
    assert migrated["host"]["account_groups"] is None and migrated["host"]["wsl"] is None
    assert "gpu_workload" not in old  # the input is left as it was
    cpu = doctor.from_snapshot(SNAPSHOTS / "cpu-v1-before-workload-check.json")
    assert cpu.verdict.startswith("No usable GPU found")
    assert (
        cpu.to_dict()["checks"]
        and snapshot.load(SNAPSHOTS / "cpu-v1-before-workload-check.json").host.account_groups
        is None
    )  # unknown, not "in no group"


def test_a_gpu_snapshot_from_before_the_workload_check_is_not_ready():
    data = json.loads((SNAPSHOTS / "h200-v1.json").read_text())
    del data["gpu_workload"], data["log"]  # what version 1 wrote before those existed
    rep = doctor.check_system(snapshot.from_dict(data, "h200-old.json"))
    work = [c for c in rep.checks if c.id == "gpu-workload"][0]
    assert work.status == rules.UNKNOWN and "no kernel was run" in work.message
    assert rep.verdict.startswith("Not ready")


def test_a_snapshot_written_today_replays_after_the_schema_grows(tmp_path, monkeypatch):
    path = snapshot.write(tmp_path / "today.json", snapshot.from_dict(snap("radeon"), "c.json"))
    before = doctor.from_snapshot(path)

    now = snapshot.FORMAT_VERSION

    def to_next(data):  # a future version: a new section, unknown in older snapshots
        return {**data, "format_version": now + 1, "new_section": None}

    monkeypatch.setattr(snapshot, "FORMAT_VERSION", now + 1)
    monkeypatch.setitem(snapshot.MIGRATIONS, now, to_next)
    after = doctor.from_snapshot(path)
    assert [(c.id, c.status, c.message) for c in after.checks] == [
        (c.id, c.status, c.message) for c in before.checks
    ]
    assert after.verdict == before.verdict
    assert snapshot.migrate(json.loads(path.read_text()))["new_section"] is None
    monkeypatch.delitem(snapshot.MIGRATIONS, now)  # no way to the next: one clear error
    with pytest.raises(snapshot.SnapshotError, match=f"version {now}; this rocm_dl_guide reads"):
        doctor.from_snapshot(path)


def test_the_workload_round_trips_through_a_snapshot(tmp_path):
    results = [snapshot.workload_result(0), snapshot.workload_result(1, failure="boom")]
    sysrep = snapshot.from_dict(snap("radeon", workload=results), "case.json")
    path = snapshot.write(tmp_path / "s.json", sysrep)
    assert snapshot.load(path).gpu_workload == results
    bad = snap("radeon")
    bad["gpu_workload"] = {"ok": True}
    with pytest.raises(snapshot.SnapshotError, match="gpu_workload: expected a list"):
        snapshot.from_dict(bad, "bad.json")


def _fake_python(folder, body: str) -> str:
    folder.mkdir()
    script = folder / "python"
    script.write_text("#!/bin/sh\n" + body + "\n")
    script.chmod(0o755)
    return str(script)


def test_the_workload_child_reports_a_signal_an_error_and_a_hang(tmp_path):
    from rocm_dl_guide.doctor import workload

    crash = _fake_python(
        tmp_path / "a",
        'echo "running matmul on cuda:0" >&2; kill -SEGV $$',
    )
    got = workload.run_one(0, crash, timeout=60)
    assert not got["ok"] and "SIGSEGV while running matmul on cuda:0" in got["failure"]
    text = snapshot.HIP_INVALID_DEVICE_FUNCTION.replace("`", "")
    error = _fake_python(
        tmp_path / "b",
        f"cat >&2 <<'EOF'\n{text}\nEOF\nexit 1",
    )
    got = workload.run_one(0, error, timeout=60)
    assert got["failure"] == "HIP error: invalid device function (RuntimeError)"
    hang = _fake_python(tmp_path / "c", "exec sleep 30")
    got = workload.run_one(0, hang, timeout=1)
    assert "did not finish within 1 s" in got["failure"]


def test_the_real_workload_on_this_machine():
    """On a GPU the workload passes on every GPU; without one, PyTorch sees none
    and the doctor does not run it."""
    from rocm_dl_guide.doctor import workload

    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        got = workload.run_one(0, timeout=120)
        assert not got["ok"] and got["failure"]  # no GPU 0 to run on: a clear failure
        return
    results = workload.run_all(torch.cuda.device_count())
    assert all(r["ok"] for r in results), results


def test_a_gpu_target_missing_from_the_wheel_fails_with_the_error_readers_see():
    data = snap("rx6600xt", torch=rocm_torch(gpu=False))
    arch = check(data, "arch-mismatch")
    assert arch.status == rules.FAIL
    assert "gfx1032" in arch.message and "invalid device function" in arch.message
    assert "PYTORCH_ROCM_ARCH=gfx1032" in arch.fix
    assert "HSA_OVERRIDE_GFX_VERSION=10.3.0" in arch.fix  # gfx1030 is in the wheel
    assert any("pytorch/issues/132570" in s for s in arch.sources)
    hint = check(data, "hsa-override")
    assert hint.status == rules.INFO and "10.3.0" in hint.message
    seen = check(data, "torch-sees-gpu")
    assert seen.status == rules.FAIL and "GPU targets in PyTorch" in seen.message


def test_the_override_maps_a_consumer_card_onto_its_familys_target():
    data = snap("rx6600xt", env={"HSA_OVERRIDE_GFX_VERSION": "10.3.0"})
    assert check(data, "arch-mismatch").status == rules.OK
    override = check(data, "hsa-override")
    assert override.status == rules.WARN
    assert "gfx1030" in override.message and "not supported by AMD" in override.message


def test_an_override_on_a_supported_card_says_to_unset_it():
    override = check(snap("radeon", env={"HSA_OVERRIDE_GFX_VERSION": "10.3.0"}), "hsa-override")
    assert override.status == rules.WARN and override.fix.startswith("unset it")


@pytest.mark.parametrize("value", ["gfx1030", "10.3", "ten"])
def test_a_malformed_override_fails(value):
    override = check(snap("radeon", env={"HSA_OVERRIDE_GFX_VERSION": value}), "hsa-override")
    assert override.status == rules.FAIL and "MAJOR.MINOR.STEPPING" in override.message


def test_an_override_onto_a_target_the_build_lacks_fails():
    override = check(snap("rx6600xt", env={"HSA_OVERRIDE_GFX_VERSION": "10.3.1"}), "hsa-override")
    assert override.status == rules.FAIL and "gfx1031" in override.message


@pytest.mark.parametrize(
    ("value", "target"),
    [
        ("10.3.0", "gfx1030"),
        ("11.0.0", "gfx1100"),
        ("9.4.2", "gfx942"),
        ("9.0.10", "gfx90a"),
        ("x", None),
    ],
)
def test_override_target(value, target):
    assert gpu_targets.override_target(value) == target


def test_an_integrated_gpu_next_to_a_discrete_one_is_flagged_with_the_devices_to_keep():
    data = snap("apu-igpu")
    igpu = check(data, "igpu")
    assert igpu.status == rules.WARN
    assert "gfx1036" in igpu.message and "RX 7900 GRE" in igpu.message
    assert "HIP_VISIBLE_DEVICES=0" in igpu.fix and "BIOS" in igpu.fix
    # the iGPU's target is in no wheel: the arch check names it too
    assert check(data, "arch-mismatch").status == rules.FAIL


def test_hiding_the_integrated_gpu_clears_both_findings():
    data = snap("apu-igpu", env={"HIP_VISIBLE_DEVICES": "0"})
    assert check(data, "igpu").status == rules.OK
    assert check(data, "arch-mismatch").status == rules.OK


def test_no_igpu_check_without_an_integrated_gpu():
    assert "igpu" not in {c.id for c in report(snap("mi300x")).checks}


def test_a_container_started_without_the_gpu_devices():
    pci = [{"address": "0000:03:00.0", "vendor": "AMD", "device_id": "0x744c", "class": "0x030000"}]
    data = snap("driver-not-loaded", pci=pci, kfd=False, renders=0, container="docker")
    access = check(data, "device-access")
    assert access.status == rules.FAIL and "docker container" in access.message
    assert "--device=/dev/kfd" in access.fix and "--device=/dev/dri" in access.fix
    # the same container on a machine without an AMD GPU: only information
    quiet = check(snap(None, pci=[], kfd=False, renders=0, container="docker"), "device-access")
    assert quiet.status == rules.INFO


def test_a_user_outside_the_render_group():
    data = snap("radeon", accessible=False, groups=("users", "video"), torch=rocm_torch(gpu=False))
    access = check(data, "device-access")
    assert access.status == rules.FAIL
    assert "root:render" in access.message and "users, video" in access.message
    assert "Permission denied" in access.message and "usermod -a -G render,video" in access.fix
    seen = check(data, "torch-sees-gpu")
    assert seen.status == rules.FAIL and "Device access" in seen.message
    in_container = check(
        snap("radeon", accessible=False, groups=("root",), container="docker"), "device-access"
    )
    assert "--group-add render" in in_container.fix


def test_render_nodes_missing():
    access = check(snap("radeon", renders=0, container="docker"), "device-access")
    assert access.status == rules.FAIL and "--device=/dev/dri" in access.fix


def test_a_cuda_wheel_on_an_amd_machine():
    data = snap("radeon", torch=cuda_torch())
    build = check(data, "pytorch-build")
    assert build.status == rules.FAIL and "CUDA 12.4 build" in build.message
    assert "download.pytorch.org/whl/rocm6.2" in build.fix
    seen = check(data, "torch-sees-gpu")
    assert seen.status == rules.FAIL and "PyTorch build" in seen.message
    assert "arch-mismatch" not in {c.id for c in report(data).checks}  # not a ROCm build


def test_pytorch_built_for_a_far_older_rocm():
    window = check(snap("radeon", rocm="7.2.1"), "pytorch-hip-window")
    assert window.status == rules.WARN and "releases apart" in window.message
    assert diagnose.release_distance("6.2.4", "7.2.1") > 2
    near = check(snap("radeon", rocm="6.3.1"), "pytorch-hip-window")
    assert near.status == rules.INFO


def test_pip_rocm_next_to_a_system_rocm_of_another_release():
    mix = check(snap("radeon", pip={"rocm-sdk-core": "7.0.2"}), "rocm-pip-mix")
    assert mix.status == rules.WARN and "rocm-sdk-core 7.0.2" in mix.message
    assert "rocm-pip-mix" not in {
        c.id for c in report(snap("radeon", pip={"rocm": "6.2.2"})).checks
    }


def test_numa_balancing_and_the_open_file_limit():
    on = check(snap("mi300x", numa="1"), "numa-balancing")
    assert on.status == rules.WARN and "echo 0 > /proc/sys/kernel/numa_balancing" in on.fix
    assert check(snap("radeon", numa="1"), "numa-balancing").status == rules.INFO  # one GPU
    assert check(snap("mi300x", numa="0"), "numa-balancing").status == rules.OK
    low = check(snap("radeon", nofile=(1024, 4096)), "open-files")
    assert low.status == rules.INFO and "1048576" in low.fix
    assert check(snap("radeon"), "open-files").status == rules.OK


def test_hip_visible_devices_hiding_every_gpu():
    data = snap("radeon", env={"HIP_VISIBLE_DEVICES": ""}, torch=rocm_torch(gpu=False))
    seen = check(data, "torch-sees-gpu")
    assert seen.status == rules.FAIL and "hides them all" in seen.message


@pytest.mark.parametrize("name", sorted(snapshot.EXAMPLES))
def test_the_example_snapshots_show_what_they_are_about(name):
    rep = report(snapshot.example(name))
    failing = {c.id for c in rep.checks if c.status in (rules.FAIL, rules.WARN)}
    expected = {
        "apu-igpu": {"igpu", "arch-mismatch"},
        "rx6600xt": {"arch-mismatch", "torch-sees-gpu"},
        "cuda-wheel": {"pytorch-build", "device-access", "torch-sees-gpu"},
        "first-kernel": {"arch-mismatch", "gpu-workload"},
    }[name]
    assert expected <= failing, failing
    with pytest.raises(ValueError, match="unknown example"):
        snapshot.example("no-such-machine")


def test_every_error_message_on_the_troubleshooting_page_names_real_checks():
    ids = set()
    for data in (
        snap("apu-igpu"),
        snap("rx6600xt", torch=rocm_torch(gpu=False)),
        snap("radeon", torch=cuda_torch(), accessible=False),
    ):
        ids |= {c.id for c in report(data).checks}
    for message, explained_by in rules.ERROR_MESSAGES.items():
        assert set(explained_by) <= ids, message


def test_the_json_report_has_stable_unique_ids_gpus_and_a_verdict():
    data = json.loads(report(snap("apu-igpu")).to_json())
    ids = [c["id"] for c in data["checks"]]
    assert len(ids) == len(set(ids))
    assert {"gpus", "checks", "verdict"} <= set(data)
    assert all({"id", "status", "message", "fix", "sources"} <= set(c) for c in data["checks"])
    assert [g["gfx"] for g in data["gpus"]] == ["gfx1100", "gfx1036"]


# --------------------------------------------------------------------------- snapshots


def test_a_collected_snapshot_replays_to_the_same_report(tmp_path):
    live = system.collect()
    path = snapshot.write(tmp_path / "snap.json", live)
    replayed = doctor.check_system(snapshot.load(path))
    direct = doctor.check_system(live)

    def key(rep):  # rocminfo's source line says "from snapshot"; the rest must agree
        return [(c.id, c.status, c.message) for c in rep.checks if c.id != "rocminfo"]

    assert key(replayed) == key(direct)
    assert replayed.verdict == direct.verdict
    data = json.loads(path.read_text())
    assert data["format_version"] == snapshot.FORMAT_VERSION
    assert set(data["host"]["env"]) <= set(hostfacts.ENV_VARS)  # nothing else of the environment
    assert os.environ.get("HOME", "/nonexistent-home") not in path.read_text()


BAD_FILES = {
    "empty.json": ("", "the file is empty"),
    "text.json": ("hello", "is not valid JSON"),
    "truncated.json": ('{"format": "rocm-dl-guide-doctor-snapshot", "format_v', "truncated"),
    "list.json": ("[1, 2]", "not an object"),
    "foreign.json": ('{"hello": 1}', "not a doctor snapshot"),
    "newer.json": (
        '{"format": "rocm-dl-guide-doctor-snapshot", "format_version": 99}',
        "upgrade rocm_dl_guide",
    ),
    "older.json": (
        '{"format": "rocm-dl-guide-doctor-snapshot", "format_version": 0}',
        "collect it again",
    ),
    "partial.json": (
        '{"format": "rocm-dl-guide-doctor-snapshot", "format_version": 1, "rocminfo": {}}',
        "no 'rocm' section",
    ),
}


@pytest.mark.parametrize("name", sorted(BAD_FILES))
def test_bad_snapshot_files_get_one_clear_error(tmp_path, name):
    text, words = BAD_FILES[name]
    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(snapshot.SnapshotError, match=words):
        snapshot.load(path)


def test_binary_missing_and_wrongly_typed_snapshots(tmp_path):
    (tmp_path / "bin.json").write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(snapshot.SnapshotError, match="not a text file"):
        snapshot.load(tmp_path / "bin.json")
    with pytest.raises(snapshot.SnapshotError, match="no such file"):
        snapshot.load(tmp_path / "missing.json")
    data = snap("radeon")
    data["host"]["devices"] = "kfd"
    with pytest.raises(snapshot.SnapshotError, match="host.devices"):
        snapshot.from_dict(data, "typed.json")
    data = snap("radeon")
    data["rocm"] = {"version": "6.2"}  # no path
    with pytest.raises(snapshot.SnapshotError, match="rocm"):
        snapshot.from_dict(data, "typed.json")


def test_cli_collect_then_snapshot_json(tmp_path):
    path = tmp_path / "mine.json"
    first = doctor_cli("--collect", str(path), "--json")
    assert first.returncode == 0, first.stderr
    assert path.exists() and "snapshot written" in first.stderr
    replay = doctor_cli("--snapshot", str(path), "--json")
    assert replay.returncode == 0, replay.stderr
    live, again = json.loads(first.stdout), json.loads(replay.stdout)
    assert [c["id"] for c in live["checks"]] == [c["id"] for c in again["checks"]]
    assert live["verdict"] == again["verdict"]


def test_cli_saved_case_replays_the_finding(tmp_path):
    path = tmp_path / "apu.json"
    path.write_text(json.dumps(snap("apu-igpu")))
    out = doctor_cli("--snapshot", str(path))
    assert out.returncode == 0, out.stderr
    assert "Integrated GPU" in out.stdout and "HIP_VISIBLE_DEVICES=0" in out.stdout


def test_cli_bad_snapshot_is_one_line_and_exit_2(tmp_path):
    path = tmp_path / "cut.json"
    path.write_text('{"format": "rocm-dl-guide-doctor-snapshot", "form')
    out = doctor_cli("--snapshot", str(path))
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    assert out.stderr.strip().count("\n") == 0 and "truncated" in out.stderr


def test_hostfacts_reads_a_machine_tree(tmp_path):
    (tmp_path / "dev/dri").mkdir(parents=True)
    (tmp_path / "dev/kfd").write_text("")
    (tmp_path / "dev/dri/renderD128").write_text("")
    (tmp_path / "dev/dri/card0").write_text("")
    (tmp_path / "proc/sys/kernel").mkdir(parents=True)
    (tmp_path / "proc/sys/kernel/numa_balancing").write_text("1\n")
    (tmp_path / "proc/1").mkdir(parents=True)
    (tmp_path / "proc/1/cgroup").write_text("0::/system.slice/docker-abc123.scope\n")
    for n in (0, 1):
        (tmp_path / f"sys/devices/system/node/node{n}").mkdir(parents=True)
    env = {"HSA_OVERRIDE_GFX_VERSION": "10.3.0", "HOME": "/home/someone", "SECRET": "x"}
    facts = hostfacts.collect(tmp_path, env=env, site_dirs=[])
    assert facts.env == {"HSA_OVERRIDE_GFX_VERSION": "10.3.0"}
    assert [d.path.rsplit("/", 1)[-1] for d in facts.devices] == ["kfd", "renderD128"]
    assert facts.kfd.exists and not facts.kfd.char_device  # a plain file here, not a device
    assert facts.numa_balancing == "1" and facts.numa_nodes == 2
    assert facts.container == "docker" and "docker-abc123" in facts.container_hints[0]
    assert hostfacts.from_dict(json.loads(json.dumps(facts.to_dict()))) == facts


def test_pip_rocm_packages_are_found_by_name(tmp_path):
    for name, version in (("rocm_sdk_core", "7.0.2"), ("rocm_dl_guide", "0.1.0"), ("torch", "2.5")):
        meta = tmp_path / f"{name}-{version}.dist-info"
        meta.mkdir()
        (meta / "METADATA").write_text(f"Name: {name.replace('_', '-')}\nVersion: {version}\n")
    assert hostfacts.pip_rocm_packages([tmp_path]) == {"rocm-sdk-core": "7.0.2"}


def test_the_pages_citations_of_doctors_rules_are_the_rules_sources():
    """Every doctor-* entry of references.bib points at a URL the rules cite, so
    the page and the checks cannot cite different things."""
    import re

    from conftest import ROOT

    bib = (ROOT / "references.bib").read_text()
    entries = re.findall(r"@misc\{(doctor-[\w-]+),.*?\\url\{([^}]+)\}", bib, re.S)
    assert len(entries) >= 10
    cited = set(rules.SOURCES.values())
    for key, url in entries:
        assert url in cited, key


def test_the_rules_file_names_only_sources_it_has():
    """doctor-rules.json's tables refer to its sources by key: each key is there,
    and each source is cited by some rule or by the bibliography."""
    from conftest import ROOT

    for gfx, (known, index, keys) in rules.NO_OVERRIDE.items():
        assert known and set(keys) <= set(rules.SOURCES), gfx
        assert index is None or index.startswith("https://"), gfx
        fix = gpu_targets.native_build_fix(gfx)
        assert fix.startswith(f"install a PyTorch build that has {gfx}")
    assert rules.IGPU_TARGETS and all(g.startswith("gfx") for g in rules.IGPU_TARGETS)
    families = [g for targets in rules.OVERRIDE_FAMILIES.values() for g in targets]
    assert len(families) == len(set(families))  # one override value per target
    code = "".join(f.read_text() for f in (ROOT / "code" / "rocm_dl_guide" / "doctor").glob("*.py"))
    bib = (ROOT / "references.bib").read_text()
    rule_keys = {k for _, _, keys in rules.NO_OVERRIDE.values() for k in keys}
    rule_keys |= {k for _, keys in rules.OVERRIDE_CAVEATS.values() for k in keys}
    rule_keys |= {k for keys in rules.OVERRIDE_FAMILY_SOURCES.values() for k in keys}
    rule_keys |= set(rules.PROCESSOR_SOURCES)
    assert set(rules.OVERRIDE_FAMILY_SOURCES) == set(rules.OVERRIDE_FAMILIES)
    assert rule_keys <= set(rules.SOURCES)
    for key, url in rules.SOURCES.items():
        assert f'"{key}"' in code or key in rule_keys or url in bib, key


# --------------------------------------------------------------------------- groups, every source


def test_rocminfo_says_the_user_is_in_render_already():
    from rocm_dl_guide.doctor import rocminfo

    text = (
        "ROCk module is loaded\n"
        "Unable to open /dev/kfd read-write: Operation not permitted\n"
        "maculele is member of render group\n"
    )  # ROCm/legacy-rocm-build#1211
    report = rocminfo.parse(text)
    assert report.group_membership == ("render", True)
    assert "already" in report.error and "changes nothing" in report.error
    denied = rocminfo.parse("Unable to open /dev/kfd read-write: Permission denied\n")
    assert denied.group_membership is None and '"render"' in denied.error


def test_denied_although_this_session_is_in_render():
    data = snap("radeon", accessible=False, groups=("render", "video"))
    access = check(data, "device-access")
    assert access.status == rules.FAIL
    assert "in render already" in access.fix and "usermod" not in access.fix
    boxed = check(snap("radeon", accessible=False, container="docker"), "device-access")
    assert "--device=/dev/kfd" in boxed.fix and "usermod" not in boxed.fix


def test_added_to_render_after_this_session_began():
    data = snap(
        "radeon", accessible=False, groups=("users", "video"), account_groups=("render", "users")
    )
    access = check(data, "device-access")
    assert "log out and in again, or run newgrp render" in access.fix


def test_groups_unknown_keep_the_usual_advice():
    data = snap("radeon", accessible=False, groups=("users",), account_groups=None)
    assert "usermod -a -G render,video" in check(data, "device-access").fix
    data["host"]["account_groups"] = "render"
    with pytest.raises(snapshot.SnapshotError, match="account_groups: expected list or null"):
        snapshot.from_dict(data, "bad.json")


# --------------------------------------------------------------------------- WSL 2

WSL = {
    "kernel_release": "5.15.167.4-microsoft-standard-WSL2",
    "dxg": True,
    "librocdxg": "/opt/rocm/lib/librocdxg.so",
    "dxcore": True,
}


def wsl_snap(sample="radeon", wsl=None, env=None, torch=None):
    data = snap(
        sample,
        kfd=False,
        renders=0,
        wsl=WSL | (wsl or {}),
        env={"HSA_ENABLE_DXG_DETECTION": "1"} if env is None else env,
        torch=torch,
    )
    data["kernel_driver"] = {"loaded": False, "note": "the amdgpu kernel module is not loaded"}
    return data


def test_wsl_facts_are_read_from_the_machine(tmp_path):
    (tmp_path / "proc/sys/kernel").mkdir(parents=True)
    (tmp_path / "proc/sys/kernel/osrelease").write_text(WSL["kernel_release"] + "\n")
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev/dxg").write_text("")
    (tmp_path / "opt/rocm/lib").mkdir(parents=True)
    (tmp_path / "opt/rocm/lib/librocdxg.so").write_text("")
    facts = hostfacts.wsl_facts(tmp_path)
    assert facts.is_wsl and facts.dxg and facts.librocdxg.endswith("librocdxg.so")
    native = hostfacts.wsl_facts(tmp_path / "nothing-here")
    assert not native.is_wsl and native.librocdxg is None


@pytest.mark.parametrize(
    "wsl, env, status, words",
    [
        ({"dxg": False}, None, rules.FAIL, "wsl --update"),
        ({"librocdxg": None}, None, rules.FAIL, "build and install librocdxg"),
        ({}, {}, rules.WARN, "export HSA_ENABLE_DXG_DETECTION=1"),
        ({}, None, rules.OK, "HSA_ENABLE_DXG_DETECTION=1"),
    ],
)
def test_wsl_gets_wsls_own_advice(wsl, env, status, words):
    found = check(wsl_snap(wsl=wsl, env=env), "wsl")
    assert found.status == status
    assert words in (found.fix or found.message)
    assert any("librocdxg" in s for s in found.sources)


def test_a_gpu_outside_the_wsl_matrix():
    found = check(wsl_snap("rx6600xt"), "wsl")
    assert found.status == rules.INFO and "not in AMD's WSL support matrix" in found.message
    from rocm_dl_guide.doctor import wsl

    assert wsl.supported("Radeon RX 7900 XTX") and wsl.supported("AMD Radeon RX 6600 XT") is False


def test_never_a_kernel_driver_on_wsl():
    data = wsl_snap(wsl={"librocdxg": None}, torch=rocm_torch(gpu=False))
    rep = report(data)
    for c in rep.checks:
        assert "amdgpu-dkms" not in c.fix, (c.id, c.fix)
        if "amdgpu-dkms" in c.message:
            assert "never install amdgpu-dkms" in c.message, (c.id, c.message)
    by_id = {c.id: c for c in rep.checks}
    assert (
        by_id["device-access"].status == rules.INFO and "/dev/dxg" in by_id["device-access"].message
    )
    assert "Windows driver" in by_id["kernel-driver"].message


def test_not_wsl_no_wsl_check_and_the_facts_round_trip(tmp_path):
    assert not [c for c in report(snap("radeon")).checks if c.id == "wsl"]
    sysrep = snapshot.from_dict(wsl_snap(), "w.json")
    again = snapshot.load(snapshot.write(tmp_path / "w.json", sysrep))
    assert again.host.wsl == sysrep.host.wsl and again.host.wsl.is_wsl
    bad = wsl_snap()
    bad["host"]["wsl"] = "yes"
    with pytest.raises(snapshot.SnapshotError, match="host.wsl: expected an object"):
        snapshot.from_dict(bad, "bad.json")


# --------------------------------------------------------------------------- overrides, APUs


def apu_alone(gfx: str) -> dict:
    """The apu-igpu sample with its discrete GPU (agent 2) cut out and the integrated
    GPU's target set to ``gfx``: an APU machine such as Strix (Halo), whose only GPU is
    the integrated one. The real output's layout and memory pools are kept."""

    lines = samples.load_sample("apu-igpu").splitlines(keepends=True)
    start = next(i for i, ln in enumerate(lines) if ln.strip() == "Agent 2") - 1
    end = next(i for i, ln in enumerate(lines) if ln.strip() == "Agent 3") - 1
    text = "".join(lines[:start] + lines[end:]).replace("gfx1036", gfx)
    # the chip's own ID would name the real gfx1036 (doctor trusts the chip over the name)
    text = re.sub(r"(?m)^\s*Chip ID:.*\n", "", text)
    data = snap("apu-igpu")
    data["rocminfo"]["text"] = text
    return data


@pytest.mark.parametrize("gfx", ["gfx1150", "gfx1151", "gfx1152", "gfx1153", "gfx1200", "gfx1201"])
def test_no_override_is_suggested_where_the_sources_say_it_fails(gfx):
    data = apu_alone(gfx)  # the ROCm 6.2 wheel has gfx1100, but no gfx115x/gfx12xx
    hint = check(data, "hsa-override")
    assert hint.status == rules.WARN and "no value would help" in hint.message
    assert "HSA_OVERRIDE_GFX_VERSION=" not in hint.fix and f"build that has {gfx}" in hint.fix
    arch = check(data, "arch-mismatch")
    assert "HSA_OVERRIDE_GFX_VERSION=" not in arch.fix and "TheRock" in arch.fix
    assert set(rules.cite(*rules.NO_OVERRIDE[gfx][2])) <= set(hint.sources)


def test_an_override_set_on_strix_halo_fails_and_says_why():
    data = apu_alone("gfx1151")
    data["host"]["env"]["HSA_OVERRIDE_GFX_VERSION"] = "11.0.0"
    override = check(data, "hsa-override")
    assert override.status == rules.FAIL and "SIGSEGV" in override.message
    assert "index-url https://rocm.nightlies.amd.com/v2/gfx1151/" in override.fix
    assert any("legacy-rocm-build/issues/5853" in s for s in override.sources)


def test_an_override_still_suggested_for_a_phoenix_apu():
    hint = check(apu_alone("gfx1103"), "hsa-override")  # 780M: rocBLAS#1536
    assert hint.status == rules.INFO and "HSA_OVERRIDE_GFX_VERSION=11.0.0" in hint.fix


def test_with_several_gpus_the_override_names_its_gpu_and_hides_the_others():
    """The iGPU (gfx1036) lacks kernels and gfx1030 would suit it, but the variable would
    also run the RX 7900 GRE (gfx1100, supported) as gfx1030."""
    data = snap("apu-igpu")
    hint = check(data, "hsa-override")
    assert "GPU 1 (AMD Radeon Graphics, gfx1036)" in hint.message
    assert "applies to every GPU the process sees" in hint.message
    assert "GPU 0 (AMD Radeon RX 7900 GRE, gfx1100) as gfx1030" in hint.message
    assert "HIP_VISIBLE_DEVICES=1 HSA_OVERRIDE_GFX_VERSION=10.3.0" in hint.fix
    assert "leave it unset and export HIP_VISIBLE_DEVICES=0" in hint.fix
    arch = check(data, "arch-mismatch")
    assert "export HSA_OVERRIDE_GFX_VERSION" not in arch.fix
    assert "HIP_VISIBLE_DEVICES=1 HSA_OVERRIDE_GFX_VERSION=10.3.0" in arch.fix


def test_the_override_from_the_wheels_arch_list_alone():
    """No rocminfo: the GPU's target comes from what PyTorch sees (gcnArchName)."""
    torch = rocm_torch()
    torch["details"]["devices"] = [{"name": "AMD Radeon RX 6600 XT", "gfx": "gfx1032"}]
    data = snap(None, torch=torch)
    hint = check(data, "hsa-override")
    assert hint.status == rules.INFO and "HSA_OVERRIDE_GFX_VERSION=10.3.0" in hint.fix
    assert "RX 6600 XT, gfx1032" in hint.fix
    assert check(data, "arch-mismatch").status == rules.FAIL


def test_the_override_from_rocminfo_alone():
    """No PyTorch (TensorFlow only): ROCm 6.2's supported targets include gfx1030."""
    data = snap("rx6600xt")
    data["frameworks"] = {"pytorch": {"name": "pytorch", "installed": False, "details": {}}}
    hint = check(data, "hsa-override")
    assert hint.status == rules.INFO and "HSA_OVERRIDE_GFX_VERSION=10.3.0" in hint.fix
    assert "ROCm 6.2.2's supported targets" in hint.message


def test_an_apu_states_what_decides_what_fits():
    igpu = check(apu_alone("gfx1151"), "igpu")
    assert "UMA frame buffer" in igpu.message and "GTT" in igpu.message
    assert "half of system RAM" in igpu.message and "pages_limit" in igpu.message
    assert "30.0 GiB of system memory and 15.0 GiB for this GPU" in igpu.message
    assert any("docs.kernel.org" in s and "module-parameters" in s for s in igpu.sources)
    beside = check(snap("apu-igpu"), "igpu")  # next to a discrete GPU: the same facts
    assert "30.0 GiB of system memory" in beside.message


def test_global_pool_sizes_from_rocminfo():
    from rocm_dl_guide.doctor import rocminfo

    pools = rocminfo.global_pool_kib(samples.load_sample("apu-igpu"))
    assert pools == {1: 31406488, 2: 16760832, 3: 15703244}  # the iGPU gets half the RAM


def test_an_override_never_hides_the_chip_rocminfo_reports_as_its_target():
    """Issue 58: under HSA_OVERRIDE_GFX_VERSION=11.0.0 rocminfo prints gfx1100 for an RX
    7600 XT (PCI ID 0x7480, gfx1102), and doctor called it supported and said to unset
    the override. The real 7900 XTX output, with its Chip ID and name made an RX 7600
    XT's, is what such a machine prints: the check must speak of gfx1102."""
    data = snap("radeon")
    text = data["rocminfo"]["text"]
    text = text.replace("29772(0x744c)", "29824(0x7480)").replace(
        "Radeon RX 7900 XTX", "AMD Radeon RX 7600 XT"
    )
    data["rocminfo"]["text"] = text
    data["host"]["env"]["HSA_OVERRIDE_GFX_VERSION"] = "11.0.0"
    override = check(data, "hsa-override")
    assert "gfx1102" in override.message
    assert "supported as they are" not in (override.fix or "")
    assert gpu_targets.products.real_gfx(report(data).system.rocminfo.gpus[0]) == "gfx1102"
