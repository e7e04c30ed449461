"""``check-sources`` (rocm_dl_guide.doctor.freshness) against recorded pages, offline.

tests/data/freshness holds small copies of the pages the check reads, laid
out by URL path: AMD's documentation (a compatibility matrix page, the
release notes, the release history), a raw GitHub file, Docker Hub's tag-list
JSON, PyTorch's torch wheel listing, and a small compatibility.json in the
real data's schema. Each test copies that tree, changes what it needs
(removes a fact, adds a release, makes a page move ...), serves it with
http.server on 127.0.0.1 on a free port, and points every real URL prefix at
it through the ``rewrite`` map (the ``$ROCM_DL_GUIDE_SOURCES_BASE`` variable
for the command line). Nothing contacts a real site.
"""

from __future__ import annotations

import copy
import functools
import http.server
import json
import shutil
import socket
import threading
from pathlib import Path

import pytest

from rocm_dl_guide import cli
from rocm_dl_guide.doctor import compat_data, freshness

DATA_DIR = Path(__file__).parent / "data" / "freshness"
TIMEOUT = 5.0

# The real prefixes the recorded data uses -> directories of the recorded tree.
PREFIXES = {
    "https://rocm.docs.amd.com": "/rocm-docs",
    "https://instinct.docs.amd.com": "/instinct",
    "https://raw.githubusercontent.com": "/raw",
    "https://hub.docker.com": "/hub",
    "https://download.pytorch.org": "/pytorch",
}
MATRIX = "rocm-docs/en/docs-7.2.4/compatibility/compatibility-matrix.html"
RELEASE_NOTES = "rocm-docs/en/latest/about/release-notes.html"
HISTORY = "rocm-docs/en/latest/release/versions.html"
TAGS = "hub/v2/repositories/rocm/pytorch/tags"
WHEELS = "pytorch/whl/torch/index.html"


class _Handler(http.server.SimpleHTTPRequestHandler):
    """Serves the tree; ``redirects`` maps a path to (status, Location)."""

    redirects: dict[str, tuple[int, str]] = {}

    def do_GET(self):  # noqa: N802 - http.server's naming
        path = self.path.split("?", 1)[0]
        if path in self.redirects:
            status, location = self.redirects[path]
            self.send_response(status)
            self.send_header("Location", location)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        super().do_GET()

    def log_message(self, format, *args):  # noqa: A002 - quiet test output
        pass


class Site:
    """A copy of the recorded tree served on 127.0.0.1 until the test ends."""

    def __init__(self, root: Path):
        self.root = root
        self.redirects: dict[str, tuple[int, str]] = {}
        handler = type("Handler", (_Handler,), {"redirects": self.redirects})
        self.server = http.server.ThreadingHTTPServer(
            ("127.0.0.1", 0), functools.partial(handler, directory=str(root))
        )
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(
            target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self.thread.start()
        self.data = json.loads((root / "compatibility.json").read_text(encoding="utf-8"))

    @property
    def rewrite(self) -> dict[str, str]:
        return {prefix: self.base + path for prefix, path in PREFIXES.items()}

    def edit(self, relpath: str, old: str, new: str) -> None:
        path = self.root / relpath
        text = path.read_text(encoding="utf-8")
        assert old in text, (relpath, old)
        path.write_text(text.replace(old, new), encoding="utf-8")

    def check(self, **kwargs) -> freshness.Report:
        return freshness.check_sources(self.data, rewrite=self.rewrite, timeout=TIMEOUT, **kwargs)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=TIMEOUT)


@pytest.fixture
def site(tmp_path):
    root = tmp_path / "site"
    shutil.copytree(DATA_DIR, root)
    served = Site(root)
    yield served
    served.close()


def _kinds(report: freshness.Report) -> list[tuple[str, str]]:
    return [(f.kind, f.key) for f in report.stale]


def _closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch):
    # A proxy configured in the environment must not see the local server.
    for var in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")


# --------------------------------------------------------------------------- the checker


def test_all_current(site):
    report = site.check()
    assert report.current, report.stale
    assert report.sources == 3
    # The source without checks is noted, not failed.
    notes = [(f.key, f.detail) for f in report.notes]
    assert notes == [("amdgpu-driver-compat-matrix", "no checks recorded")]


def test_a_removed_fact_is_reported(site):
    site.edit(MATRIX, "MIGraphX</a> 2.15.0", "MIGraphX</a> 2.16.0")
    # The GitHub blob source is read from its raw form: drop a fact there too.
    site.edit(
        "raw/ROCm/legacy-rocm-build/fff7efb/docs/compatibility/compatibility-matrix.rst",
        ",gfx950,gfx950,gfx950",
        ",gfx942,gfx942,gfx942",
    )
    report = site.check()
    missing = {(f.key, f.detail) for f in report.stale if f.kind == "missing"}
    assert missing == {
        ("rocm-compat-matrix-docs-7-2-4", "no longer contains 'MIGraphX 2.15.0'"),
        ("rocm-compat-matrix-7-2-4", "no longer contains 'gfx950'"),
    }
    assert len(report.stale) == 2


def test_a_new_release_in_the_release_notes_is_reported(site):
    # The page's title and heading name the new release.
    site.edit(
        RELEASE_NOTES, "ROCm Core SDK 10.0.0 release notes", "ROCm Core SDK 10.1.0 release notes"
    )
    report = site.check()
    assert _kinds(report) == [("new-release", "rocm-releases")]
    (finding,) = report.stale
    assert "ROCm 10.1.0" in finding.detail and "10.0.x" in finding.detail
    assert finding.url.endswith("/about/release-notes.html")


def test_a_legacy_patch_release_in_the_history_is_reported(site):
    # 7.2.5 is below 10.0.x but newer than everything known in the 7.2 line.
    site.edit(
        HISTORY,
        '<tr><td><p><a class="reference external" href="https://rocm.docs.amd.com/en/docs-7.2.4/">',
        '<tr><td><p><a class="reference external" href="https://rocm.docs.amd.com/en/docs-7.2.5/">'
        "7.2.5</a></p></td><td><p>November 20, 2026</p></td></tr>\n"
        '<tr><td><p><a class="reference external" href="https://rocm.docs.amd.com/en/docs-7.2.4/">',
    )
    report = site.check()
    assert [f.detail.split(";")[0] for f in report.stale] == ["ROCm 7.2.5 is released"]


@pytest.mark.parametrize("status", [301, 308])
def test_a_page_that_moved_is_reported(site, status):
    new_path = "rocm-docs/en/latest/compatibility/compatibility-matrix.html"
    (site.root / new_path).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(site.root / MATRIX, site.root / new_path)
    site.redirects["/" + MATRIX] = (status, "/" + new_path)
    report = site.check()
    assert _kinds(report) == [("moved", "rocm-compat-matrix-docs-7-2-4")]
    assert report.stale[0].detail.endswith("/" + new_path)


def test_a_temporary_redirect_is_followed_silently(site):
    new_path = "rocm-docs/en/docs-7.2.4/compatibility/matrix-copy.html"
    shutil.copy(site.root / MATRIX, site.root / new_path)
    site.redirects["/" + MATRIX] = (302, "/" + new_path)
    assert site.check().current


@pytest.mark.parametrize("status", [404, 410])
def test_a_page_that_is_gone_is_reported(site, status):
    if status == 404:
        (site.root / MATRIX).unlink()
    else:
        site.redirects["/" + MATRIX] = (410, "/")
    report = site.check()
    assert _kinds(report) == [("gone", "rocm-compat-matrix-docs-7-2-4")]
    assert f"HTTP {status}" in report.stale[0].detail


def test_a_new_container_tag_and_a_new_wheel_index_are_reported(site):
    tags = json.loads((site.root / TAGS).read_text(encoding="utf-8"))
    for name in (
        "rocm10.0_ubuntu24.04_py3.12_pytorch_release_2.14.0",  # newer PyTorch, same ROCm
        "rocm7.2.5_ubuntu24.04_py3.12_pytorch_release_2.9.1",  # legacy patch release
        "rocm7.2.4_ubuntu24.04_py3.12_pytorch_release_2.8.0",  # older: not new
        "latest-release",  # not a versioned tag: ignored
    ):
        tags["results"].append({"name": name, "last_updated": "2026-11-20T00:00:00Z"})
    (site.root / TAGS).write_text(json.dumps(tags), encoding="utf-8")
    site.edit(
        WHEELS,
        "  </body>",
        '    <a href="/whl/rocm7.2/torch-2.12.0%2Brocm7.2-cp312-cp312-manylinux_2_28_x86_64.whl'
        '#sha256=05">torch-2.12.0+rocm7.2-cp312-cp312-manylinux_2_28_x86_64.whl</a><br/>\n'
        '    <a href="/whl/nightly/rocm7.3/torch-2.13.0.dev20261120%2Brocm7.3-cp312-cp312-'
        'manylinux_2_28_x86_64.whl">nightly</a><br/>\n  </body>',
    )
    report = site.check()
    details = sorted(f.detail.split(" (")[0] for f in report.stale)
    assert details == [
        "rocm/pytorch:rocm10.0_ubuntu24.04_py3.12_pytorch_release_2.14.0",
        "rocm/pytorch:rocm7.2.5_ubuntu24.04_py3.12_pytorch_release_2.9.1",
        "wheel index rocm7.2 exists",
    ]
    assert {f.kind for f in report.stale} == {"new-tag", "new-index"}


def test_tag_list_pages_are_followed(site):
    page2 = {
        "count": 1,
        "next": None,
        "previous": None,
        "results": [{"name": "rocm10.1_ubuntu24.04_py3.12_pytorch_release_2.13.0"}],
    }
    (site.root / "hub/v2/repositories/rocm/pytorch/tags-page2").write_text(json.dumps(page2))
    tags = json.loads((site.root / TAGS).read_text(encoding="utf-8"))
    tags["next"] = "https://hub.docker.com/v2/repositories/rocm/pytorch/tags-page2?page=2"
    (site.root / TAGS).write_text(json.dumps(tags), encoding="utf-8")
    report = site.check()
    assert _kinds(report) == [("new-tag", "rocm/pytorch")]
    assert "rocm10.1_" in report.stale[0].detail


def test_absent_optional_fields_are_tolerated(site):
    data = copy.deepcopy(site.data)
    del data["known_latest"]
    for source in data["sources"].values():
        source.pop("checks", None)
    for release in data["releases"]:
        release.pop("stream", None)
    report = freshness.check_sources(data, rewrite=site.rewrite, timeout=TIMEOUT)
    assert report.current
    assert sorted(f.detail for f in report.notes) == [
        "no checks recorded",
        "no checks recorded",
        "no checks recorded",
        "no known_latest recorded: nothing to compare",
    ]


def test_an_unreachable_network_raises_one_clear_error(site):
    dead = {prefix: f"http://127.0.0.1:{_closed_port()}" for prefix in PREFIXES}
    with pytest.raises(freshness.NetworkUnavailable, match="cannot reach the network"):
        freshness.check_sources(site.data, rewrite=dead, timeout=TIMEOUT)


# --------------------------------------------------------------------------- helpers


def test_helpers():
    url = "https://github.com/ROCm/legacy-rocm-build/blob/fff7efb/docs/compatibility/m.rst"
    assert freshness.raw_github_url(url) == (
        "https://raw.githubusercontent.com/ROCm/legacy-rocm-build/fff7efb/docs/compatibility/m.rst"
    )
    assert freshness.raw_github_url("https://rocm.docs.amd.com/x") == "https://rocm.docs.amd.com/x"
    assert freshness.version_key("10.0.x") == (10, 0, freshness.WILDCARD)
    assert freshness.version_key("rocm7.1") == (7, 1, 0)
    known = [(7, 2, 4), (10, 0, freshness.WILDCARD)]
    assert freshness.is_newer((7, 2, 5), known)
    assert freshness.is_newer((10, 1, 0), known)
    assert not freshness.is_newer((10, 0, 3), known)
    assert not freshness.is_newer((7, 3, 0), known)  # an unknown line below the newest
    assert not freshness.is_newer((1, 0, 0), [])
    assert freshness.tag_key("rocm10.0_ubuntu24.04_py3.12_pytorch_release_2.13.0") == (
        10,
        0,
        0,
        2,
        13,
        0,
    )
    assert freshness.tag_key("latest") is None
    html = "<p>a<script>x()</script>\n b&nbsp;c</p><a href='/y'>"
    assert freshness.page_text(html, "text/html; charset=utf-8") == ("a b c", ["/y"])
    assert freshness.page_text("<!DOCTYPE html>" + html) == ("a b c", ["/y"])
    assert freshness.page_text("a <b>\n c") == ("a <b> c", [])  # not HTML: kept as it is
    assert freshness.missing_checks("PyTorch 2.9.1,\n 2.8.0", ["2.9.1, 2.8.0", "2.7"]) == ["2.7"]
    assert freshness.rewrites_from_env({}) == {}
    with pytest.raises(ValueError, match="ROCM_DL_GUIDE_SOURCES_BASE"):
        freshness.rewrites_from_env({freshness.ENV_VAR: "not json"})


# --------------------------------------------------------------------------- the command line


@pytest.fixture
def cli_site(site, monkeypatch):
    """The command line reads the package's data: point it at the recorded copy."""
    monkeypatch.setattr(compat_data, "data", lambda: copy.deepcopy(site.data))
    monkeypatch.setenv(freshness.ENV_VAR, json.dumps(site.rewrite))
    return site


def test_cli_all_current_exits_0(cli_site, capsys):
    assert cli.main(["check-sources", "--timeout", str(TIMEOUT)]) == 0
    out = capsys.readouterr().out
    assert "all 3 sources current" in out
    assert "note: amdgpu-driver-compat-matrix: no checks recorded" in out


def test_cli_stale_exits_1_with_a_list(cli_site, capsys):
    cli_site.edit(MATRIX, "MIGraphX</a> 2.15.0", "MIGraphX</a> 2.16.0")
    (cli_site.root / "instinct/compatibility/compatibility-matrix.html").unlink()
    assert cli.main(["check-sources", "--timeout", str(TIMEOUT)]) == 1
    out = capsys.readouterr().out
    assert "STALE: 2 problem(s)" in out
    assert "[missing] rocm-compat-matrix-docs-7-2-4" in out
    assert "no longer contains 'MIGraphX 2.15.0'" in out
    assert "[gone] amdgpu-driver-compat-matrix  https://instinct.docs.amd.com/" in out


def test_cli_network_unreachable_exits_3(cli_site, monkeypatch, capsys):
    dead = {prefix: f"http://127.0.0.1:{_closed_port()}" for prefix in PREFIXES}
    monkeypatch.setenv(freshness.ENV_VAR, json.dumps(dead))
    assert cli.main(["check-sources", "--timeout", str(TIMEOUT)]) == 3
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.strip().splitlines()[-1:]
    assert line.startswith("check-sources: cannot reach the network")


def test_cli_malformed_override_exits_2(cli_site, monkeypatch, capsys):
    monkeypatch.setenv(freshness.ENV_VAR, "[1, 2]")
    assert cli.main(["check-sources"]) == 2
    assert "must be a JSON object" in capsys.readouterr().err
