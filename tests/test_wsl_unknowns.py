"""Issue 46, item 6: WSL read from rocminfo's own line, and an unknown /dev/dxg is unknown."""

from __future__ import annotations

from types import SimpleNamespace

from rocm_dl_guide import doctor
from rocm_dl_guide.doctor import rules, snapshot, wsl
from rocm_dl_guide.doctor.hostfacts import WslFacts
from rocm_dl_guide.doctor.samples import load_sample


def _rocminfo_only(text: str) -> doctor.DoctorReport:
    """A snapshot with rocminfo's output and nothing else collected (no host facts)."""
    data = snapshot.compose(None, torch={"name": "pytorch", "installed": False, "details": {}})
    data["host"] = None
    data["rocminfo"].update(text=text, returncode=None, source="rocminfo.txt", error=None)
    return doctor.check_system(snapshot.from_dict(data, "rocminfo.txt"))


def test_rocminfos_wsl_line_gives_the_wsl_check_with_dxg_unknown():
    text = load_sample("cpu-only")  # WSL 2, ROCm 6.3.4: "WSL environment detected."
    assert wsl.WSL_LINE in text
    rep = _rocminfo_only(text)
    found = [c for c in rep.checks if c.id == "wsl"]
    assert len(found) == 1 and found[0].status == rules.UNKNOWN, found
    assert "not collected" in found[0].message
    assert "no Linux kernel driver belongs inside WSL" in found[0].message
    assert "there is no /dev/dxg" not in rep.to_text(wrap=1000)


def test_no_wsl_line_no_wsl_check():
    rep = _rocminfo_only(load_sample("radeon"))
    assert not [c for c in rep.checks if c.id == "wsl"]


def test_the_device_line_names_dxg_only_where_it_was_seen():
    host = SimpleNamespace(wsl=WslFacts(kernel_release="5.15.167.4-microsoft-standard-WSL2"))
    assert "not collected" in wsl.device_line(host)
    assert "the GPU is /dev/dxg" not in wsl.device_line(host)
    host.wsl.dxg = True
    assert "the GPU is /dev/dxg here" in wsl.device_line(host)
    host.wsl.dxg = False
    assert "there is no /dev/dxg" in wsl.device_line(host)
    assert wsl.device_line(SimpleNamespace(wsl=None)) is None
