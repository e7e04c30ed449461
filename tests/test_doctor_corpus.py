"""Issue 46, item 7: a corpus of real public outputs that keeps doctor honest.

``tests/data/doctor/corpus/`` holds one file per case, each quoted exactly from the
public thread its ``cases.json`` entry names (error texts, ``AMD_LOG_LEVEL`` lines,
``rocminfo``, ``rocm-smi``/``amd-smi``, ``collect_env``, ``clinfo``, pasted
``groups``/``id`` output), with what the thread concluded, the findings doctor must
give (``expected``: ``id:RULE`` for a finding of the error-text reader, otherwise
words of the report) and the advice it must not give (``forbidden``).

Each text is fed to doctor the way a user would: ``doctor --log FILE`` on a machine
doctor knows nothing else about (every fact of the snapshot unknown), and tool
outputs also in their own sections (``rocminfo``, ``--smi``). The report is read
as text, with :func:`logs.read`'s finding ids beside it.

``python tests/test_doctor_corpus.py`` prints the share of expected findings met,
per class (:func:`shares`).
"""

from __future__ import annotations

import json
import re
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from rocm_dl_guide import doctor
from rocm_dl_guide.doctor import snapshot

CORPUS = Path(__file__).parent / "data" / "doctor" / "corpus"


def load_cases(folder: Path) -> list[dict]:
    """The cases of the corpus in ``folder`` (its ``cases.json``), each with the folder
    it lives in."""
    cases = json.loads((folder / "cases.json").read_text(encoding="utf-8"))["cases"]
    return [{**case, "folder": str(folder)} for case in cases]


CASES: list[dict] = load_cases(CORPUS)
CLASSES = ("overrides", "error-text", "partitions", "groups", "WSL", "fixes")
CLASSES += ("containers", "unsupported")
KINDS = ("error-text", "rocminfo", "smi", "smi-error", "collect_env", "clinfo", "groups")
KINDS += ("amd-log", "dmesg")

KNOWN_GAPS: dict[str, str] = {}
"""Case file -> why an expected finding is not met yet (the item of issue 46 that
covers it); the test of that case is an expected failure until then."""


_QUOTE = re.compile(r"^\s+(line \d+: |related: )")
"""Lines of the report that quote the reader's own text (which may say None)."""


def unknown_machine() -> dict:
    """A snapshot in which nothing about the machine was collected: no rocminfo run,
    no PyTorch probe, no host facts, kernel driver and ROCm unknown."""
    data = snapshot.compose(None, torch={"name": "pytorch", "installed": False, "details": {}})
    data["host"] = None
    data["kernel_driver"] = {"loaded": None, "note": None}
    data["rocm"] = {"path": None}
    data["rocminfo"].update(error="not collected (doctor --log on another machine)")
    data["rocminfo"]["source"] = "rocminfo"
    return data


def report_for(case: dict, text: str | None = None) -> tuple[doctor.DoctorReport, str]:
    """doctor's report on ``case``: its text (or ``text``, a copy of it) as ``--log``,
    and a tool's output also where doctor reads that tool (rocminfo, amd-smi/rocm-smi)."""
    if text is None:
        text = (Path(case.get("folder", CORPUS)) / case["file"]).read_text(encoding="utf-8")
    data = unknown_machine()
    data["log"] = {"source": case["file"], "text": text}
    if case["kind"] == "rocminfo":
        data["rocminfo"].update(text=text, returncode=None, source=case["file"])
    if case["kind"] == "smi":
        data["smi"] = {"source": case["file"], "text": text, "error": None}
    rep = doctor.check_system(snapshot.from_dict(data, case["file"]))
    return rep, rep.to_text(wrap=1000)


def _said(item: str, rep: doctor.DoctorReport, text: str) -> bool:
    """Whether the report gives ``item``: a finding's id, or words of the report
    outside the lines that only quote the reader's text back."""
    if item.startswith("id:"):
        return item[3:] in {f.rule.id for f in rep.log_findings or ()}
    own = "\n".join(ln for ln in text.splitlines() if not _QUOTE.match(ln))
    return item.lower() in own.lower()


def expected_met(case: dict) -> list[tuple[str, bool]]:
    """Each expected finding of ``case`` and whether the report gives it."""
    rep, text = report_for(case)
    return [(item, _said(item, rep, text)) for item in case["expected"]]


def forbidden_given(case: dict) -> list[str]:
    """The forbidden advice the report gives on ``case`` (none, to pass)."""
    rep, text = report_for(case)
    return [item for item in case["forbidden"] if _said(item, rep, text)]


def shares(cases: list[dict] = CASES) -> dict[str, tuple[int, int]]:
    """Class -> (expected findings met, expected findings) over ``cases``."""
    out: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for case in cases:
        for _, met in expected_met(case):
            out[case["class"]][0] += met
            out[case["class"]][1] += 1
    return {c: tuple(out[c]) for c in CLASSES if c in out}


def shares_text(cases: list[dict] = CASES, per_case: bool = False) -> str:
    """The shares per class, all of them, and the cases that got forbidden advice;
    with ``per_case``, each case's missed and forbidden items too."""
    rows = shares(cases)
    lines = [f"{len(cases)} cases"]
    for c, (met, total) in rows.items():
        lines.append(f"  {c:<11} {met:>3}/{total:<3} {100 * met / total:5.1f}%")
    met = sum(m for m, _ in rows.values())
    total = sum(t for _, t in rows.values())
    lines.append(f"  {'all':<11} {met:>3}/{total:<3} {100 * met / total:5.1f}%")
    wrong = {c["file"]: forbidden_given(c) for c in cases}
    lines.append(f"  wrong advice: {sum(1 for w in wrong.values() if w)} cases")
    if per_case:
        for case in cases:
            missed = [item for item, ok in expected_met(case) if not ok]
            if missed or wrong[case["file"]]:
                lines.append(f"  {case['file']}: missed {missed}, forbidden {wrong[case['file']]}")
    return "\n".join(lines)


# --------------------------------------------------------------------------- the corpus


def test_the_corpus_is_whole():
    files = sorted(p.name for p in CORPUS.glob("*.txt"))
    assert len(CASES) >= 40 and sorted(c["file"] for c in CASES) == files
    for case in CASES:
        assert case["class"] in CLASSES and case["kind"] in KINDS, case
        assert case["source"].startswith("https://github.com/"), case
        assert case["concluded"] and case["expected"] and case["quoted"], case
        assert (CORPUS / case["file"]).read_text(encoding="utf-8").strip(), case
    assert {c["class"] for c in CASES} == set(CLASSES[:6])  # the blind corpus adds two


@pytest.mark.parametrize("case", CASES, ids=[c["file"] for c in CASES])
def test_each_case_gets_its_findings_and_no_forbidden_advice(case):
    if case["file"] in KNOWN_GAPS:
        pytest.xfail(KNOWN_GAPS[case["file"]])
    missing = [item for item, met in expected_met(case) if not met]
    assert not missing, (missing, report_for(case)[1])
    assert not forbidden_given(case), report_for(case)[1]


@pytest.mark.parametrize("case", CASES, ids=[c["file"] for c in CASES])
def test_no_report_prints_an_unknown_as_a_fact(case):
    rep, text = report_for(case)
    for line in text.splitlines():
        if _QUOTE.match(line):
            continue
        assert not re.search(r"\bNone\b", line), line
        assert not re.search(r"(?<![\d.])0 (physical )?GPU\(s\)", line), line
        assert "groups: none" not in line and "mode None" not in line, line
        assert "(None" not in line, line
    assert not rep.verdict.startswith("Ready"), rep.verdict  # no kernel ran anywhere here


def test_no_verdict_denies_a_gpu_nobody_looked_for():
    said = [c["file"] for c in CASES if report_for(c)[0].verdict.startswith("No usable GPU")]
    assert not said, said


if __name__ == "__main__":  # the share of expected findings met, per class
    # python tests/test_doctor_corpus.py [FOLDER] [-v]: another corpus (the blind one)
    args = [a for a in sys.argv[1:] if a != "-v"]
    chosen = load_cases(Path(args[0])) if args else CASES
    sys.exit(print(shares_text(chosen, per_case="-v" in sys.argv)))
