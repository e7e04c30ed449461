"""Tests for the sourced compatibility data and the verdicts built on it."""

from __future__ import annotations

import json
import re
from importlib import resources
from pathlib import Path

import pytest

from rocm_dl_guide.doctor import compat, compat_data

FRAMEWORKS = ("pytorch", "tensorflow", "onnxruntime", "migraphx")
_REPO = Path(__file__).resolve().parents[1]


# ------------------------------------------------------------------- the data file


def test_json_is_valid_and_has_the_expected_shape():
    raw = resources.files("rocm_dl_guide").joinpath("data/compatibility.json").read_text("utf-8")
    doc = json.loads(raw)
    assert doc["schema_version"] == 2
    for key in ("sources", "releases", "kernel_driver", "gpus"):
        assert doc[key], f"{key} is empty"
    assert compat_data.data() == doc


def test_every_source_has_title_https_url_publisher_version():
    srcs = compat_data.sources()
    assert srcs
    for sid, rec in srcs.items():
        assert re.fullmatch(r"[A-Za-z][A-Za-z0-9-]*", sid), sid
        assert rec["title"].strip()
        assert rec["url"].startswith("https://"), sid
        assert rec["publisher"].strip()
        assert rec["version"].strip()


def _all_entries():
    doc = compat_data.data()
    yield from doc["releases"]
    yield from doc["kernel_driver"]
    yield from doc["gpus"]
    yield doc["kernel_driver_policy"]
    yield doc["known_latest"]
    yield from doc["streams"].values()


def test_every_entry_names_an_existing_source():
    srcs = compat_data.sources()
    used = set()
    for entry in _all_entries():
        assert entry["source"] in srcs, entry
        assert srcs[entry["source"]]["url"].startswith("https://")
        used.add(entry["source"])
    # field and stream sources
    used |= {sid for _, sid in compat_data.source_refs(compat_data.data())}
    assert used == set(srcs), f"unused sources: {set(srcs) - used}"


def test_release_fields_are_well_formed():
    seen = set()
    for rel in compat_data.data()["releases"]:
        assert re.fullmatch(r"\d+\.\d+\.(\d+|x)", rel["rocm"]), rel["rocm"]
        assert rel["rocm"] not in seen
        seen.add(rel["rocm"])
        for fw in ("pytorch", "tensorflow", "onnxruntime"):
            if fw in rel:
                assert rel[fw] and all(compat_data.normalize_version(v) == v for v in rel[fw])
        if "migraphx" in rel:
            assert compat_data.normalize_version(rel["migraphx"]) == rel["migraphx"]
        assert all(re.fullmatch(r"gfx[0-9a-f]+", g) for g in rel.get("gfx", []))


def test_rocm_releases_newest_first():
    rels = compat_data.rocm_releases()
    big = compat_data.LINE_KEY  # a line (5.7.x) sorts above its patch releases
    keys = [tuple(big if p == "x" else int(p) for p in r.split(".")) for r in rels]
    assert keys == sorted(keys, reverse=True)
    assert rels.index("5.7.x") < rels.index("5.7.1") < rels.index("5.7.0")
    assert len(rels) == len(compat_data.data()["releases"])


# ---------------------------------------------------------------- normalize_version


@pytest.mark.parametrize(
    "raw, expected",
    [
        ("2.6.0+rocm6.4", "2.6.0"),
        ("6.4.1-120", "6.4.1"),
        ("v2.19.1", "2.19.1"),
        ("rocm-7.2.4", "7.2.4"),
        ("2.14.0.600", "2.14.0"),
        ("  7.1 ", "7.1"),
        ("garbage", ""),
        ("", ""),
        (None, ""),
        (object(), ""),
    ],
)
def test_normalize_version(raw, expected):
    assert compat_data.normalize_version(raw) == expected


def test_find_release_rule():
    newest = compat_data.rocm_releases()[0]
    assert compat_data.find_release(newest)["rocm"] == newest
    assert compat_data.find_release(newest + "-53")["rocm"] == newest
    assert compat_data.find_release("6.4")["rocm"] == "6.4.0"  # missing patch counts as 0
    assert compat_data.find_release("1.0.0") is None
    assert compat_data.find_release("junk") is None
    assert compat_data.find_release(None) is None


# ----------------------------------------------------------------------- verdicts


def _newest_with(field: str) -> str:
    """The newest release whose source gives ``field`` (Core SDK entries may not)."""
    return next(r for r in compat_data.rocm_releases() if compat_data.find_release(r).get(field))


def test_supported_framework_from_newest_release():
    newest = _newest_with("pytorch")
    rel = compat_data.find_release(newest)
    torch = rel["pytorch"][0]
    v = compat.check_framework("pytorch", torch + "+rocm" + newest, newest)
    assert v.status == "supported"
    assert v.sources == (compat_data.field_source(rel, "pytorch"),)
    assert newest in v.message


def test_pytorch_compares_major_minor():
    newest = _newest_with("pytorch")
    major_minor = ".".join(compat_data.find_release(newest)["pytorch"][0].split(".")[:2])
    assert compat.check_framework("PyTorch", major_minor + ".99", newest).status == "supported"


def test_unsupported_framework_version():
    newest = _newest_with("pytorch")
    v = compat.check_framework("pytorch", "1.0", newest)
    assert v.status == "unsupported"
    assert v.sources
    assert "1.0" in v.message


def test_tensorflow_compares_patch_as_listed():
    rel = compat_data.find_release("7.0.0")
    assert rel["tensorflow"] == ["2.19.1", "2.18.1"]
    assert compat.check_framework("tensorflow", "2.19.1", "7.0.0").status == "supported"
    assert compat.check_framework("tensorflow", "2.19.0", "7.0.0").status == "unsupported"


def test_every_listed_version_checks_supported():
    for rocm in compat_data.rocm_releases():
        rel = compat_data.find_release(rocm)
        for fw in FRAMEWORKS:
            for listed in compat_data.listed_values(rel, fw):
                assert compat.check_framework(fw, listed, rocm).status == "supported"


def test_unknown_rocm_version_gives_unknown():
    v = compat.check_framework("pytorch", "2.6", "1.2.3")
    assert v.status == "unknown"
    assert "no sourced" in v.message
    assert compat.check_gpu("gfx942", "99.0").status == "unknown"


def test_field_missing_from_source_gives_unknown():
    # The 6.4.2 column of the source has no usable ONNX Runtime version.
    assert "onnxruntime" not in compat_data.find_release("6.4.2")
    assert compat.check_framework("onnxruntime", "1.20.0", "6.4.2").status == "unknown"


@pytest.mark.parametrize("name", ["keras", "", None, "cuda"])
def test_unknown_framework_raises(name):
    with pytest.raises(ValueError, match="unknown framework"):
        compat.check_framework(name, "1.0", compat_data.rocm_releases()[0])
    with pytest.raises(ValueError):
        compat.framework_table(name)


@pytest.mark.parametrize("bad", [None, "", "garbage", "?.?", "gfx", [1, 2]])
def test_bad_inputs_never_raise(bad):
    newest = compat_data.rocm_releases()[0]
    assert compat.check_framework("pytorch", bad, newest).status == "unknown"
    assert compat.check_framework("pytorch", "2.6", bad).status == "unknown"
    assert compat.check_gpu(bad, newest).status == "unknown"
    assert compat.check_gpu("gfx942", bad).status == "unknown"
    assert compat.check_kernel_driver(bad, "30.30.1").status == "unknown"
    assert compat.check_kernel_driver(newest, bad).status == "unknown"
    assert compat_data.marketing_names(bad) == []


def test_non_string_inputs_do_not_raise():
    newest = compat_data.rocm_releases()[0]
    statuses = {"supported", "unsupported", "unknown"}
    for value in (42, 6.4, b"6.4.1", {"v": 1}):
        assert compat.check_framework("pytorch", value, newest).status in statuses
        assert compat.check_gpu(value, value).status in statuses
        assert compat.check_kernel_driver(value, value).status in statuses


def test_check_gpu():
    newest = _newest_with("gfx")
    ok = compat.check_gpu("gfx942", newest)
    assert ok.status == "supported"
    assert "MI300X" in ok.message
    # rocminfo-style names with feature flags are accepted.
    assert compat.check_gpu("gfx90a:sramecc+:xnack-", newest).status == "supported"
    no = compat.check_gpu("gfx803", newest)
    assert no.status == "unsupported"
    # gfx950 (MI350 Series) arrives with ROCm 7.0.0, not 6.4.x.
    assert compat.check_gpu("gfx950", "7.0.0").status == "supported"
    assert compat.check_gpu("gfx950", "6.4.3").status == "unsupported"


def test_marketing_names():
    assert "AMD Instinct MI300X" in compat_data.marketing_names("gfx942")
    assert "AMD Radeon RX 7900 XTX" in compat_data.marketing_names("GFX1100")
    assert compat_data.marketing_names("gfx803") == []


def test_check_kernel_driver():
    assert compat.check_kernel_driver("7.2.4", "30.30.3").status == "supported"
    assert compat.check_kernel_driver("6.4.1", "30.10.2").status == "supported"
    # A driver series from the table, with a ROCm release outside its window.
    v = compat.check_kernel_driver("6.0.2", "30.30.1")
    assert v.status == "unsupported"
    assert v.sources
    # A version the sources do not list (e.g. a distribution's kernel module).
    assert compat.check_kernel_driver("7.2.4", "6.12.12").status == "unknown"


# ------------------------------------------------------------------------ tables


@pytest.mark.parametrize("fw", FRAMEWORKS)
def test_framework_table_one_row_per_release(fw):
    table = compat.framework_table(fw)
    assert list(table["ROCm"]) == compat_data.rocm_releases()
    assert list(table.columns) == ["ROCm", "Stream", compat_data.FRAMEWORKS[fw], "Source"]
    assert set(table["Stream"]) <= set(compat_data.streams())
    assert set(table["Source"]) <= set(compat_data.sources())


def test_gpu_and_driver_tables():
    gpus = compat.gpu_table()
    assert len(gpus) == len(compat_data.data()["gpus"])
    row = gpus[gpus["gfx target"] == "gfx942"].iloc[0]
    assert _newest_with("gfx") in row["ROCm releases"]
    kd = compat.kernel_driver_table()
    assert len(kd) == len(compat_data.data()["kernel_driver"])
    assert set(kd["Source"]) <= set(compat_data.sources())


# ---------------------------------------------------------------- bibliography


def test_bib_has_one_entry_per_source():
    bib = (_REPO / "book" / "compatibility.bib").read_text(encoding="utf-8")
    keys = re.findall(r"@misc\{([^,\s]+),", bib)
    assert sorted(keys) == sorted(compat_data.sources())
    for sid, rec in compat_data.sources().items():
        assert rec["url"] in bib, sid


def test_rendered_tables_link_every_source():
    from rocm_dl_guide.core import tables

    html = tables.show(compat.framework_table("pytorch"), links=compat.source_links()).to_html()
    for key in set(compat.framework_table("pytorch")["Source"]):
        url = compat_data.sources()[key]["url"]
        assert f'<a href="{url}">{key}</a>' in html
    assert "nan" not in html.lower().replace("nano", "")


def test_the_pages_show_sources_by_short_linked_names():
    """The Source column holds short names (``requirements 7.0.0``), one per
    source, each a link to its document, not the page slug that wrapped over
    six lines at 1280 px."""
    labels = {key: compat.source_label(key) for key in compat_data.sources()}
    assert len(set(labels.values())) == len(labels)
    assert max(map(len, labels.values())) <= 20, max(labels.values(), key=len)
    assert labels["rocm-linux-system-requirements-7-0-0"] == "requirements 7.0.0"
    assert labels["rocm-compat-matrix-historical-6-3-3"] == "past matrix 6.3.3"
    table = compat.framework_table("pytorch")
    html = compat.show(table).to_html()
    for key in set(table["Source"]):
        url = compat_data.sources()[key]["url"]
        assert f'<a href="{url}">{labels[key]}</a>' in html
    assert "rocm-compat-matrix" not in html


def test_tables_of_prose_wrap_at_spaces_and_tables_of_figures_keep_their_columns():
    """A table with long text in its cells (the GPU names) is marked as prose;
    one of short figures is not. Their cells wrap at spaces only: a command
    such as HSA_OVERRIDE_GFX_VERSION stays whole (_static/guide.css), and a
    table too wide for the column scrolls with the cue."""
    from rocm_dl_guide.core import tables

    assert 'class="guide-prose-table"' in tables.show(compat.gpu_table()).to_html()
    figures = [{"batch": 1, "ms": 12.5, "backend": "ONNX Runtime"}]
    assert "guide-prose-table" not in tables.show(figures).to_html()
    css = (Path(__file__).parents[1] / "_static" / "guide.css").read_text()
    assert "anywhere" not in css and "break-all" not in css
    cells = css.split(".cell_output table td a {", 1)[1].split("}", 1)[0]
    assert "overflow-wrap: normal" in cells and "word-break: normal" in cells
    assert "white-space: nowrap" in css.split(".cell_output table td code", 1)[1].split("}")[0]
    assert ".pst-scrollable-table-container" in css and "gradient" in css


def test_the_kernel_driver_policy_is_shown_from_the_data_with_its_source():
    policy = compat_data.kernel_driver_policy()
    assert "+/- 2 releases" in policy["text"] and "a year apart" in policy["text"]
    assert policy["source"] in compat_data.sources()


def test_the_guides_framework_rule_is_counted_per_release():
    assert "most recent and two prior releases" in compat.GUIDE_FRAMEWORK_RULE
    table = compat.framework_window_table("PyTorch")
    row = table.set_index("ROCm").loc[compat_data.rocm_releases()[0]]
    listed = row["PyTorch releases listed"].split(", ")
    assert row["newest and consecutive prior"] == len(listed) >= 3
    assert row["AMD's rule (newest + two prior)"] == "yes"
    # a release that lists fewer is reported as an exception, not hidden
    tf = compat.framework_window_table("TensorFlow").set_index("ROCm")
    short = tf[tf["newest and consecutive prior"] < 3]
    assert (short["AMD's rule (newest + two prior)"] == "no").all()


def test_a_gap_in_the_versions_ends_the_run():
    table = compat.framework_window_table("PyTorch").set_index("ROCm")
    # ROCm 6.3.2 lists 2.4, 2.3, 2.2 and 1.13: three consecutive, then a gap
    assert table.loc["6.3.2", "newest and consecutive prior"] == 3


def test_major_minor_is_one_rule_for_every_version_string():
    assert compat_data.major_minor("2.6.0+rocm6.4") == "2.6"
    assert compat_data.major_minor("6.4.1-120") == "6.4"
    assert compat_data.major_minor("7") is None and compat_data.major_minor(None) is None
    assert compat_data.major_minor("not a version") is None


# ------------------------------------------------- ROCm 5.x and 6.0-6.2, and lines


def test_a_5x_release_and_a_pytorch_version_its_source_lists_is_supported():
    # 3rd Party Support Matrix at rocm-5.7.1: "| 5.7.x | 1.12.1, 1.13, 2.0 | 2.12, 2.13 |"
    v = compat.check_framework("pytorch", "2.0.1+rocm5.7", "5.7.1")
    assert v.status == "supported"
    assert v.sources == ("rocm-third-party-support-matrix-5-7-1",)
    assert "not listed by itself for PyTorch" in v.message and "5.7 line" in v.message


@pytest.mark.parametrize(
    ("framework", "version", "rocm", "status"),
    [
        # 3rd Party Support Matrix at rocm-5.7.1
        ("tensorflow", "2.13.0", "5.7.1", "supported"),
        ("pytorch", "2.1", "5.7.1", "unsupported"),
        # rows AMD gives for one patch release
        ("pytorch", "1.10.2", "5.0.2", "supported"),
        ("tensorflow", "2.9.1", "5.1.3", "supported"),
        ("pytorch", "1.12", "5.1.3", "unsupported"),
        # 6.0 to 6.2: the historical matrix at 6.3.3
        ("pytorch", "2.3.0", "6.2.1", "supported"),
        ("tensorflow", "2.16.1", "6.2.4", "supported"),
        ("tensorflow", "2.16.2", "6.2.4", "unsupported"),
        ("onnxruntime", "1.14.1", "6.0.2", "supported"),
        ("onnxruntime", "1.14.1", "6.1.0", "unsupported"),
        ("migraphx", "2.9.0", "6.1.2", "supported"),
    ],
)
def test_older_releases_answer_from_their_sources(framework, version, rocm, status):
    assert compat.check_framework(framework, version, rocm).status == status


def test_a_5x_release_and_a_gfx_its_source_does_not_list_is_unsupported():
    # gpu_os_support.md at rocm-5.7.1: gfx90a, gfx908, gfx906, gfx1030 supported;
    # MI25 (gfx900) marked unsupported
    ok = compat.check_gpu("gfx906", "5.7.1")
    assert ok.status == "supported" and "rocm-gpu-os-support-5-7-1" in ok.sources
    for gfx in ("gfx1100", "gfx942", "gfx900"):
        v = compat.check_gpu(gfx, "5.7.1")
        assert v.status == "unsupported", gfx
        assert "gfx90a, gfx908, gfx906, gfx1030" in v.message


@pytest.mark.parametrize(
    ("gfx", "rocm", "status"),
    [
        ("gfx1031", "5.5.1", "supported"),  # Radeon RX 6600: only on the 5.5.1 page
        ("gfx1031", "5.6.0", "unsupported"),
        ("gfx906", "6.0.0", "unsupported"),  # gone from the 6.0 list
        ("gfx942", "6.0.0", "supported"),  # arrives with 6.0
    ],
)
def test_a_gpu_comes_and_goes_with_its_releases(gfx, rocm, status):
    assert compat.check_gpu(gfx, rocm).status == status


def test_6_0_to_6_2_come_from_the_historical_matrix():
    assert compat_data.find_release("6.2.1")["source"] == "rocm-compat-matrix-historical-6-3-3"
    v = compat.check_framework("pytorch", "2.3.0", "6.2.1")
    assert v.status == "supported" and "by itself" not in v.message


def test_a_patch_release_not_listed_resolves_to_its_line():
    # 6.2.3 is no column of the source; 6.2.0, 6.2.1, 6.2.2 and 6.2.4 agree.
    assert compat_data.find_release("6.2.3") is None
    v = compat.check_framework("pytorch", "2.3", "6.2.3")
    assert v.status == "supported"
    assert v.message.startswith("ROCm 6.2.3 is not listed by itself; AMD's data for the 6.2 line")
    assert "6.2.x" in v.message
    assert compat.check_framework("pytorch", "2.4", "6.2.3").status == "unsupported"
    g = compat.check_gpu("gfx942", "6.1.5")
    assert g.status == "supported" and "6.1 line (6.1.2, 6.1.1, 6.1.0)" in g.message
    # a line AMD publishes only as a whole: 5.4.x
    v = compat.check_framework("pytorch", "1.13.1", "5.4.2")
    assert v.status == "supported"
    assert "ROCm 5.4.2 is not listed by itself; AMD's data for the 5.4 line says" in v.message
    assert v.sources == ("rocm-third-party-support-matrix-5-7-1",)
    # a line entry without GPUs, but listed 5.7 releases that agree on them
    assert compat.check_gpu("gfx90a", "5.7.2").status == "supported"
    # nothing is known about 5.4 GPUs
    assert compat.check_gpu("gfx90a", "5.4.3").status == "unknown"


def test_a_line_whose_releases_disagree_gives_unknown():
    # 6.3.0 lists PyTorch 2.1 and 2.0, 6.3.1 to 6.3.3 do not; TensorFlow agrees.
    v = compat.check_framework("pytorch", "2.4", "6.3.9")
    assert v.status == "unknown" and "do not all give the same PyTorch" in v.message
    assert compat.check_framework("tensorflow", "2.17.0", "6.3.9").status == "supported"
    # the listed release itself is never answered from its line
    assert compat.check_framework("onnxruntime", "1.20.0", "6.4.2").status == "unknown"


@pytest.mark.parametrize("version", ["4.5", "4.5.2", "3.10.0", "99.1.0"])
def test_a_version_in_no_line_stays_unknown(version):
    for v in (
        compat.check_framework("pytorch", "1.10", version),
        compat.check_gpu("gfx90a", version),
    ):
        assert v.status == "unknown"
        assert "no sourced compatibility data" in v.message
    assert compat_data.resolve(version, "pytorch") is None


def test_line_entries_are_found_by_name_only():
    assert compat_data.find_release("5.7.x")["source"] == "rocm-third-party-support-matrix-5-7-1"
    assert compat_data.find_release("5.7.0")["rocm"] == "5.7.0"
    assert compat_data.find_release("5.4.0") is None  # only the 5.4.x line is published
    assert compat_data.find_release("5.4") is None
    assert compat_data.is_line("5.7.x")
    assert not compat_data.is_line("5.7.1") and not compat_data.is_line(None)


def test_new_sources_are_pinned_and_have_checks():
    doc = compat_data.data()
    new = {
        r["source"]
        for r in doc["releases"]
        if compat_data.release_key(r["rocm"]) < (6, 3, 0) or r["rocm"] == "6.3.3"
    }
    assert new == {
        "rocm-compat-matrix-historical-6-3-3",
        "rocm-third-party-support-matrix-5-7-1",
        "rocm-gpu-os-support-5-5-1",
        "rocm-gpu-os-support-5-6-0",
        "rocm-gpu-os-support-5-6-1",
        "rocm-gpu-os-support-5-7-0",
        "rocm-gpu-os-support-5-7-1",
    }
    for sid in new:
        src = doc["sources"][sid]
        assert re.fullmatch(r"https://github\.com/ROCm/ROCm/blob/[0-9a-f]{40}/docs/\S+", src["url"])
        assert src["url"].split("/")[6] in src["version"]  # the commit is named
        assert 1 <= len(src["checks"]) <= compat_data.MAX_CHECKS
    # the check strings carry the values the entries hold
    checks = " ".join(doc["sources"]["rocm-third-party-support-matrix-5-7-1"]["checks"])
    assert "| 5.7.x | 1.12.1, 1.13, 2.0 | 2.12, 2.13 |" in checks
    assert compat_data.find_release("5.7.x")["pytorch"] == ["2.0", "1.13", "1.12.1"]


def test_consistency_catches_a_malformed_line_name():
    doc = compat_data.data()
    assert compat_data.consistency_problems(doc) == []
    doc["releases"][-1]["rocm"] = "5.0"
    assert any("not a release (N.N.N)" in p for p in compat_data.consistency_problems(doc))


def test_tables_still_render_with_lines():
    table = compat.framework_table("pytorch").set_index("ROCm")
    assert table.loc["5.7.x", "PyTorch"] == "2.0, 1.13, 1.12.1"
    assert table.loc["5.7.1", "PyTorch"] == "not listed"
    assert table.loc["6.0.0", "Source"] == "rocm-compat-matrix-historical-6-3-3"
    gpus = compat.gpu_table().set_index("gfx target")
    assert "5.5.1" in gpus.loc["gfx1031", "ROCm releases"]
    assert gpus.loc["gfx906", "ROCm releases"].startswith("5.5.1 to 5.7.1")
    window = compat.framework_window_table("PyTorch").set_index("ROCm")
    assert window.loc["5.2.x", "newest and consecutive prior"] == 3


def test_the_quick_table_gives_each_gpu_its_newest_release_and_frameworks():
    quick = compat.gpu_quick_table()
    assert list(quick["gfx target"]) == list(compat.gpu_table()["gfx target"])
    row = quick.set_index("gfx target").loc["gfx942"]
    newest = compat_data.rocm_releases()[0]
    assert row["Newest ROCm"] == newest and "MI300X" in row["Names"]
    listed = compat_data.listed_values(compat_data.find_release(newest), "pytorch")
    assert row["PyTorch"] == ", ".join(listed)
    old = quick.set_index("gfx target").loc["gfx906"]  # MI50: dropped after the 5.x line
    assert compat_data.release_key(old["Newest ROCm"]) < compat_data.release_key(newest)
