"""The two ROCm release streams: the data's consistency, and finding ROCm on each layout.

Legacy ROCm (up to 7.2.x) lives in ``/opt/rocm`` with ``.info/version``; the
ROCm Core SDK (7.14.0 and 10.0.0, built with TheRock) lives in
``/opt/rocm/core`` or ``/opt/rocm/core-N.N``, or comes as pip wheels (the
``rocm`` distribution). Each layout is built as a fake tree in ``tmp_path``.
"""

from __future__ import annotations

import copy
import sys

import pytest

from rocm_dl_guide import doctor
from rocm_dl_guide.doctor import compat, compat_data, installed, rocminfo, samples, system
from rocm_dl_guide.optimization import backends

# ------------------------------------------------------------------ data consistency


def test_data_is_consistent():
    assert compat_data.consistency_problems() == []


def test_every_release_has_a_valid_stream_and_known_latest_is_newest():
    doc = compat_data.data()
    assert {r["stream"] for r in doc["releases"]} == {"legacy", "core-sdk"}
    assert doc["known_latest"]["rocm"] == compat_data.rocm_releases()[0]
    assert compat_data.find_release("10.0.0")["stream"] == "core-sdk"
    assert compat_data.find_release("7.2.4")["stream"] == "legacy"


def test_every_source_has_short_checks():
    for sid, rec in compat_data.sources().items():
        assert isinstance(rec["checks"], list), sid
        assert len(rec["checks"]) <= compat_data.MAX_CHECKS, sid
        assert all(isinstance(c, str) and 0 < len(c) <= 60 for c in rec["checks"]), sid


def _broken(change):
    doc = copy.deepcopy(compat_data.data())
    change(doc)
    return compat_data.consistency_problems(doc)


def _drop_gpu(doc, gfx):
    doc["gpus"] = [g for g in doc["gpus"] if g["gfx"] != gfx]


def _drop_release(doc, version):
    doc["releases"] = [r for r in doc["releases"] if r["rocm"] != version]


@pytest.mark.parametrize(
    "change, expected",
    [
        (lambda d: _drop_release(d, "7.14.0"), "ROCm 7.14.x is not a release"),
        (lambda d: d["releases"][0].update(stream="preview"), "stream 'preview'"),
        (lambda d: d["releases"][0].update(source="nowhere"), "unknown source 'nowhere'"),
        (lambda d: d["releases"].reverse(), "not sorted newest first"),
        (lambda d: _drop_gpu(d, "gfx1151"), "gfx1151 has no entry in 'gpus'"),
        (lambda d: d["known_latest"].update(rocm="7.2.4"), "not the newest release"),
        (lambda d: d["releases"][2]["amdgpu"].append("99.1.x"), "not in the driver table"),
        (lambda d: d["sources"]["amdgpu-driver-compat-matrix"].update(checks="x"), "'checks'"),
        (lambda d: d["gpus"][0].update(gfx="gfx999"), "gfx999: in no release"),
        (lambda d: d["streams"]["core-sdk"].update(pip_source="gone"), "unknown source 'gone'"),
    ],
    ids=[
        "driver-names-missing-release",
        "bad-stream",
        "missing-source",
        "unsorted",
        "gfx-without-gpu-entry",
        "stale-known-latest",
        "driver-not-in-table",
        "checks-not-list",
        "orphan-gpu",
        "stream-source",
    ],
)
def test_consistency_check_fails_on_a_broken_copy(change, expected):
    problems = _broken(change)
    assert any(expected in p for p in problems), problems


def test_stream_of():
    assert compat_data.stream_of("10.0") == "core-sdk"
    assert compat_data.stream_of("7.14.0-12") == "core-sdk"
    assert compat_data.stream_of("6.4.1") == "legacy"
    assert compat_data.stream_of("7.11.0") is None  # a technology preview: neither stream
    assert compat_data.stream_of("junk") is None


def test_core_sdk_apu_and_migraphx():
    v = compat.check_gpu("gfx1151", "7.14.0")
    assert v.status == "supported" and "Ryzen AI MAX+ PRO 495" in v.message
    assert compat.check_gpu("gfx942", "7.14.0").status == "unknown"  # only additions listed
    assert "gfx1151" in [a["gfx"] for a in compat_data.apus("core-sdk")]
    assert all(a["gfx"] not in compat_data.find_release("7.2.4")["gfx"] for a in compat_data.apus())
    mgx = compat.check_framework("migraphx", "2.16.0", "7.14.0")
    assert mgx.status == "supported"
    assert mgx.sources == ("rocm-ai-ecosystem-migraphx-install",)
    table = compat.gpu_table()
    assert table[table["gfx target"] == "gfx1151"].iloc[0]["APU"] == "yes"


def test_core_sdk_10_0_0_fields_name_their_sources():
    rel = compat_data.find_release("10.0.0")
    v = compat.check_framework("pytorch", "2.13.0+rocm10.0.0", "10.0.0")
    assert v.status == "supported" and v.sources == ("ai-ecosystem-pytorch-pip-10-0-0",)
    assert compat.check_framework("tensorflow", "2.21.0", "10.0.0").status == "supported"
    mgx = compat.check_framework("migraphx", "2.17.0", "10.0.0")
    assert mgx.sources == ("ai-ecosystem-migraphx-pip-10-0-0",)
    # The page names the EP plugin's version, not ONNX Runtime's: left out, so unknown.
    assert "onnxruntime" not in rel
    assert compat.check_framework("onnxruntime", "1.0.0", "10.0.0").status == "unknown"
    gpu = compat.check_gpu("gfx1150", "10.0.0")
    assert gpu.status == "supported" and gpu.sources[0] == "rocm-docs-gpus-data"
    tags = compat_data.data()["known_latest"]["container_tags"]["rocm/pytorch"]
    assert "rocm10.0_ubuntu24.04_py3.12_pytorch_release_2.13.0" in tags


def test_apu_table_and_cli(capsys):
    from rocm_dl_guide import cli

    table = compat.apu_table()
    assert list(table["gfx target"]) == [a["gfx"] for a in compat_data.apus()]
    assert cli.main(["compat", "apus"]) == 0
    assert "gfx1151" in capsys.readouterr().out


def test_cli_compat_lists_field_sources(capsys):
    from rocm_dl_guide import cli

    assert cli.main(["compat", "migraphx"]) == 0
    out = capsys.readouterr().out.split("Sources:")[1]
    assert "rocm-ai-ecosystem-migraphx-install" in out  # 7.14.0's field source
    assert "rocm-release-notes-7-14-0" not in out  # backs no MIGraphX cell


def test_disagreeing_sources_are_both_shown(monkeypatch):
    doc = copy.deepcopy(compat_data.data())
    rel = next(r for r in doc["releases"] if r["rocm"] == "7.0.0")
    rel["onnxruntime_alternatives"] = [{"value": "1.21.0", "source": "amdgpu-driver-compat-matrix"}]
    monkeypatch.setattr(compat_data, "_load", lambda: doc)
    table = compat.framework_table("onnxruntime")
    cell = table[table["ROCm"] == "7.0.0"].iloc[0]["ONNX Runtime"]
    assert "1.22.0 (rocm-compat-matrix-7-0-0)" in cell and "1.21.0 (amdgpu-driver" in cell
    v = compat.check_framework("onnxruntime", "1.21.0", "7.0.0")
    assert v.status == "supported" and "1.22.0" in v.message
    assert compat_data.consistency_problems(doc) == []


# -------------------------------------------------------------------- the layouts


def _legacy_tree(opt, version="7.2.4"):
    info = opt / "rocm" / ".info"
    info.mkdir(parents=True)
    (info / "version").write_text(f"{version}-53\n")


def _core_tree(opt, name="core-10.0", version_file=None):
    root = opt / "rocm" / name
    (root / "lib").mkdir(parents=True)
    if version_file:
        (root / ".info").mkdir()
        (root / ".info" / "version").write_text(version_file)
    return root


def _pip_site(tmp_path, version="10.0.0"):
    site = tmp_path / "site-packages"
    dist = site / f"rocm-{version}.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: rocm\nVersion: {version}\n")
    (site / "rocm_sdk").mkdir()
    return site


def test_legacy_layout(tmp_path):
    _legacy_tree(tmp_path)
    info = installed.rocm_version(env={}, opt_root=tmp_path, site_dirs=[])
    assert (info.version, info.layout, info.stream) == ("7.2.4", "/opt/rocm", None)


def test_core_sdk_layout_versioned_dir(tmp_path):
    _legacy_tree(tmp_path)  # the Core SDK links into /opt/rocm; its own dir wins
    _core_tree(tmp_path, "core-7.14")
    _core_tree(tmp_path, "core-10.0")
    info = installed.rocm_version(env={}, opt_root=tmp_path, site_dirs=[])
    assert info.path.endswith("core-10.0")
    assert (info.version, info.layout, info.stream) == ("10.0", "core-sdk", "core-sdk")
    assert compat_data.find_release(info.version)["rocm"] == "10.0.0"


def test_core_sdk_layout_with_version_file(tmp_path):
    _core_tree(tmp_path, "core", version_file="7.14.0-20\n")
    info = installed.rocm_version(env={}, opt_root=tmp_path, site_dirs=[])
    assert (info.version, info.stream) == ("7.14.0", "core-sdk")


def test_rocm_path_wins(tmp_path):
    root = _core_tree(tmp_path, "core-10.0")
    info = installed.rocm_version(env={"ROCM_PATH": str(root)}, opt_root=tmp_path / "x")
    assert (info.version, info.layout, info.stream) == ("10.0", "core-sdk", "core-sdk")
    assert info.path == str(root)


def test_pip_layout(tmp_path):
    site = _pip_site(tmp_path)
    info = installed.rocm_version(env={}, opt_root=tmp_path / "none", site_dirs=[site])
    assert (info.version, info.layout) == ("10.0.0", "pip")
    assert installed.pip_rocm([tmp_path / "missing"]) is None


def test_nothing_installed(tmp_path):
    info = installed.rocm_version(env={}, opt_root=tmp_path, site_dirs=[])
    assert info.version is None and "not installed" in info.error


def _report(rocm_info, driver_version=None):
    return system.SystemReport(
        rocm=rocm_info,
        kernel_driver=installed.KernelDriverInfo(loaded=True, version=driver_version),
        rocminfo_source="saved",
        rocminfo=rocminfo.parse(samples.load_sample("mi300x")),
        pci_gpus=[],
        frameworks={},
    )


@pytest.mark.parametrize(
    "build, expected_version, stream, words",
    [
        (lambda t: _legacy_tree(t), "7.2.4", "legacy", "legacy release stream"),
        (lambda t: _core_tree(t, "core-10.0"), "10.0", "core-sdk", "ROCm Core SDK stream"),
        (lambda t: _core_tree(t, "core", "7.14.0\n"), "7.14.0", "core-sdk", "Core SDK"),
    ],
    ids=["legacy", "core-10.0", "core-7.14"],
)
def test_doctor_on_each_layout(tmp_path, build, expected_version, stream, words):
    build(tmp_path)
    info = installed.rocm_version(env={}, opt_root=tmp_path, site_dirs=[])
    report = doctor.check_system(_report(info, driver_version="30.30.3"))
    checks = {c.name: c for c in report.checks}
    assert checks["ROCm"].status == doctor.OK, checks["ROCm"]
    assert expected_version in checks["ROCm"].message and words in checks["ROCm"].message
    assert doctor.rocm_stream(report.system) == stream
    assert checks["Driver and ROCm"].status == doctor.OK, checks["Driver and ROCm"]
    assert report.to_dict()["rocm_stream"] == stream
    # no PyTorch was probed (frameworks={}): the GPU is named, PyTorch's use of it is unknown
    assert "An AMD GPU is present (AMD Instinct MI300X)" in report.verdict
    assert "PyTorch cannot use it" not in report.verdict


def test_doctor_pip_layout(tmp_path):
    info = installed.rocm_version(env={}, opt_root=tmp_path, site_dirs=[_pip_site(tmp_path)])
    report = doctor.check_system(_report(info, driver_version="31.40.1"))
    rocm_check = report.checks[0]
    assert rocm_check.status == doctor.OK and "installed with pip" in rocm_check.message
    assert "ROCm Core SDK stream" in rocm_check.message


def test_doctor_unknown_release_is_not_ok(tmp_path):
    _core_tree(tmp_path, "core-99.0")
    info = installed.rocm_version(env={}, opt_root=tmp_path, site_dirs=[])
    check = doctor.check_system(_report(info)).checks[0]
    assert check.status == doctor.UNKNOWN and "no entry for this release" in check.message


def test_doctor_answers_a_patch_release_from_its_line(tmp_path):
    (tmp_path / "rocm").mkdir()
    info = installed.RocmInfo(path=str(tmp_path / "rocm"), version="5.4.2", layout="/opt/rocm")
    check = doctor.check_system(_report(info)).checks[0]
    assert check.status == doctor.OK, check.message
    assert "not listed by itself" in check.message and "5.4.x" in check.message
    assert check.sources  # the line's source


# ----------------------------------------------------------------- MIGraphX discovery


@pytest.mark.parametrize("layout", ["core-10.0", "legacy"])
def test_migraphx_found_in_the_rocm_tree(tmp_path, monkeypatch, layout):
    root = tmp_path / "rocm" / layout if layout != "legacy" else tmp_path / "rocm"
    (root / "lib").mkdir(parents=True)
    (root / "lib" / "migraphx.py").write_text("def parse_onnx(path):\n    return path\n")
    monkeypatch.delenv("ROCM_PATH", raising=False)
    monkeypatch.setattr(installed, "OPT_ROOT", tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.delitem(sys.modules, "migraphx", raising=False)
    try:
        status = backends.migraphx_status(refresh=True)
        assert status.available, status.how
        assert str(root / "lib") in status.how
    finally:
        sys.modules.pop("migraphx", None)
        backends.migraphx_status(refresh=True)
