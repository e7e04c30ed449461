"""Checks on the sourced per-release ROCm-on-WSL data (``data/wsl-releases.json``).

The file is read by the doctor to give each ROCm release its own WSL recipe: the
``amdgpu-install --usecase=wsl`` path (ROCr WSL runtime) up to 7.2.0, and the
ROCDXG library (``librocdxg`` with ``HSA_ENABLE_DXG_DETECTION=1``) from 7.2.1.
These tests keep it well formed, deterministic and honest: every fact cites a
source that exists, quotes are non-empty text from the cited sources, gfx targets
look like gfx targets, releases are in version order, and the librocdxg recipe
appears only in releases whose own sources speak of librocdxg / ROCDXG.
"""

from __future__ import annotations

import json
import re
from importlib import resources
from pathlib import Path

import pytest

_REPO = Path(__file__).resolve().parents[1]
_PATH = _REPO / "code" / "rocm_dl_guide" / "data" / "wsl-releases.json"

GFX = re.compile(r"^gfx[0-9a-f]+$")
VERSION = re.compile(r"^\d+\.\d+(\.\d+){0,2}$")
THROUGH = re.compile(r"^\d+\.\d+(\.\d+)?\.x$|^\d+\.\d+\.x$")
LIBROCDXG_WORDS = re.compile(r"librocdxg|rocdxg|HSA_ENABLE_DXG_DETECTION", re.IGNORECASE)
RELEASE_KEYS = {
    "rocm",
    "through",
    "recipe_kind",
    "status",
    "recipe",
    "env",
    "env_needed_before",
    "windows_driver",
    "windows",
    "ubuntu",
    "runtime_package",
    "gpus",
    "limitations",
    "notes",
    "unsourced",
    "cites",
    "quotes",
}
# Fields a release may leave out; a missing one must be named in "unsourced".
OPTIONAL_FACTS = {"windows_driver", "ubuntu", "gpus", "limitations"}


def version(text: str) -> tuple[int, ...]:
    assert VERSION.match(text), text
    return tuple(int(part) for part in text.split("."))


@pytest.fixture(scope="module")
def raw() -> str:
    return _PATH.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def doc(raw: str) -> dict:
    return json.loads(raw)


def all_quote_maps(doc: dict):
    """(where, quotes, allowed source keys) for every place that carries quotes."""
    for rel in doc["releases"]:
        yield f"release {rel['rocm']}", rel["quotes"], set(rel["quotes"])
    for rel in doc["non_wsl_releases"]:
        yield f"non-WSL release {rel['rocm']}", rel["quotes"], set(rel["sources"])
    for msg in doc["messages"]:
        yield f"message {msg['text']!r}", msg["quotes"], set(msg["sources"])


# ------------------------------------------------------------------ shape, determinism


def test_file_is_packaged_json_with_the_expected_top_level(doc: dict):
    packaged = resources.files("rocm_dl_guide").joinpath("data/wsl-releases.json")
    assert json.loads(packaged.read_text("utf-8")) == doc
    assert doc["schema_version"] == 1
    for key in ("about", "source_kinds", "sources", "releases", "non_wsl_releases", "messages"):
        assert doc[key], f"{key} is empty"


def test_file_is_written_canonically(raw: str, doc: dict):
    """Deterministic: 2-space indent, UTF-8 as is, sources sorted by key, final newline."""
    assert raw == json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
    assert list(doc["sources"]) == sorted(doc["sources"])


def test_every_source_has_an_https_url_a_title_and_a_known_kind(doc: dict):
    kinds = set(doc["source_kinds"])
    for key, src in doc["sources"].items():
        assert re.fullmatch(r"[a-z0-9][a-z0-9.\-]*", key), key
        assert src["url"].startswith("https://"), key
        assert src["title"].strip(), key
        assert src["kind"] in kinds, (key, src["kind"])
        if "commit" in src:
            assert re.fullmatch(r"[0-9a-f]{40}", src["commit"]), key
            assert src["commit"] in src["url"], f"{key}: pinned commit not in its URL"


def test_every_source_is_used(doc: dict):
    used = set()
    for rel in doc["releases"]:
        used |= set(rel["quotes"])
        for keys in rel["cites"].values():
            used |= set(keys)
    for item in doc["non_wsl_releases"] + doc["messages"]:
        used |= set(item["sources"])
    assert used == set(doc["sources"]), set(doc["sources"]) ^ used


# ---------------------------------------------------------------------- citations


def test_every_cited_and_quoted_source_exists(doc: dict):
    sources = set(doc["sources"])
    for rel in doc["releases"]:
        for field, keys in rel["cites"].items():
            assert keys, (rel["rocm"], field)
            assert set(keys) <= sources, (rel["rocm"], field, set(keys) - sources)
    for where, quotes, allowed in all_quote_maps(doc):
        assert set(quotes) <= sources, (where, set(quotes) - sources)
        assert set(quotes) <= allowed, where


def test_every_fact_is_cited_and_every_gap_is_named(doc: dict):
    for rel in doc["releases"]:
        assert set(rel) <= RELEASE_KEYS, (rel["rocm"], set(rel) - RELEASE_KEYS)
        facts = set(rel) - {"rocm", "through", "recipe_kind", "unsourced", "cites", "quotes"}
        # env {} for the amdgpu-install path is the absence of a variable, not a claim.
        if not rel["env"]:
            facts.discard("env")
        missing = facts - set(rel["cites"])
        assert not missing, (rel["rocm"], missing)
        assert set(rel["cites"]) <= facts | {"env"}, rel["rocm"]
        for field in OPTIONAL_FACTS:
            assert (field in rel) != (field in rel["unsourced"]), (rel["rocm"], field)


def test_every_cited_source_is_quoted_and_quotes_are_text(doc: dict):
    for rel in doc["releases"]:
        cited = {key for keys in rel["cites"].values() for key in keys}
        cited.discard("amd-gpu-arch-specs")  # the gfx join, described in the source's note
        assert cited <= set(rel["quotes"]), (rel["rocm"], cited - set(rel["quotes"]))
    for where, quotes, _allowed in all_quote_maps(doc):
        assert quotes, where
        for key, lines in quotes.items():
            assert isinstance(lines, list) and lines, (where, key)
            for line in lines:
                assert isinstance(line, str) and line.strip() == line and line, (where, key)


# --------------------------------------------------------------------- the releases


def test_releases_are_sorted_by_version_and_do_not_overlap_non_wsl_ones(doc: dict):
    wsl = [version(rel["rocm"]) for rel in doc["releases"]]
    assert wsl == sorted(wsl) and len(set(wsl)) == len(wsl)
    non = [version(rel["rocm"]) for rel in doc["non_wsl_releases"]]
    assert non == sorted(non) and not set(non) & set(wsl)
    for rel in doc["releases"]:
        if "through" in rel:
            assert THROUGH.match(rel["through"]), rel["through"]
            assert rel["through"].startswith(".".join(rel["rocm"].split(".")[:2]) + ".")


def test_every_gfx_looks_like_a_gfx_target(doc: dict):
    for rel in doc["releases"]:
        for gpu in rel.get("gpus", []):
            assert gpu["name"].startswith("AMD "), gpu
            if "gfx" in gpu:
                assert GFX.match(gpu["gfx"]), gpu
                assert "amd-gpu-arch-specs" in rel["cites"]["gpus"], rel["rocm"]
        names = [gpu["name"] for gpu in rel.get("gpus", [])]
        assert len(names) == len(set(names)), rel["rocm"]


def test_windows_driver_names_its_basis(doc: dict):
    for rel in doc["releases"]:
        drv = rel.get("windows_driver")
        if drv is None:
            continue
        assert VERSION.match(drv["version"]), drv
        assert drv["basis"] in doc["source_kinds"], drv
        kinds = {doc["sources"][key]["kind"] for key in rel["cites"]["windows_driver"]}
        assert drv["basis"] in kinds, (rel["rocm"], drv["basis"], kinds)
        # A quote of the cited sources carries the version number.
        text = " ".join(
            line for key in rel["cites"]["windows_driver"] for line in rel["quotes"].get(key, [])
        )
        assert drv["version"] in text, rel["rocm"]


def test_recipe_kind_matches_the_recipe(doc: dict):
    for rel in doc["releases"]:
        steps = " ".join(rel["recipe"])
        assert rel["recipe_kind"] in ("rocr4wsl", "librocdxg"), rel["rocm"]
        if rel["recipe_kind"] == "librocdxg":
            assert "librocdxg" in steps and "--usecase=wsl" not in steps, rel["rocm"]
            assert rel["env"] == {"HSA_ENABLE_DXG_DETECTION": "1"}, rel["rocm"]
        else:
            assert "--usecase=wsl,rocm" in steps, rel["rocm"]
            assert not LIBROCDXG_WORDS.search(steps), rel["rocm"]
            assert rel["env"] == {}, rel["rocm"]


def test_librocdxg_recipe_only_where_the_releases_sources_say_so(doc: dict):
    for rel in doc["releases"]:
        cited = {key for keys in rel["cites"].values() for key in keys}
        said = [
            line
            for key in cited
            for line in rel["quotes"].get(key, [])
            if LIBROCDXG_WORDS.search(line)
        ]
        recipe_sources = rel["cites"]["recipe"]
        recipe_said = [
            line
            for key in recipe_sources
            for line in rel["quotes"][key]
            if LIBROCDXG_WORDS.search(line)
        ]
        if rel["recipe_kind"] == "librocdxg":
            assert recipe_said, f"{rel['rocm']}: no recipe source quotes librocdxg"
            env_said = [
                line
                for key in rel["cites"]["env"]
                for line in rel["quotes"][key]
                if "HSA_ENABLE_DXG_DETECTION=1" in line
            ]
            assert env_said, rel["rocm"]
        else:
            # An amdgpu-install release may mention ROCDXG only as what later replaced it.
            assert not recipe_said or all("legacy" in line.lower() for line in recipe_said), (
                rel["rocm"],
                said,
            )


def test_first_librocdxg_release_is_7_2_1_and_earlier_ones_use_amdgpu_install(doc: dict):
    first = doc["first_librocdxg_release"]
    assert first == "7.2.1"
    for rel in doc["releases"]:
        expected = "librocdxg" if version(rel["rocm"]) >= version(first) else "rocr4wsl"
        assert rel["recipe_kind"] == expected, rel["rocm"]
    by_rocm = {rel["rocm"]: rel for rel in doc["releases"]}
    # The doctor's bug: ROCm 6.2 under WSL must not be told librocdxg / the DXG variable.
    assert by_rocm["6.2.3"]["recipe_kind"] == "rocr4wsl"
    assert "HSA_ENABLE_DXG_DETECTION" not in json.dumps(by_rocm["6.2.3"])


def test_unsupported_gpu_message_names_the_releases_it_was_seen_with(doc: dict):
    by_rocm = {rel["rocm"]: rel for rel in doc["releases"]}
    msg = next(m for m in doc["messages"] if m["text"] == "ROCR: unsupported GPU")
    assert any(
        "ROCR: unsupported GPU" in line for lines in msg["quotes"].values() for line in lines
    )
    for rocm in msg["seen_with"]:
        assert rocm in by_rocm, rocm


def test_no_fact_rests_on_a_thread_of_the_blind_corpus(doc: dict):
    """The blind corpus (tests/data/doctor/blind) measures doctor on threads it was not
    built from: no fact here may come from one of them."""
    blind = Path(__file__).parent / "data" / "doctor" / "blind" / "cases.json"
    threads = {c["source"].rstrip("/") for c in json.loads(blind.read_text())["cases"]}
    used = {s["url"].rstrip("/") for s in doc["sources"].values()}
    assert not used & threads
