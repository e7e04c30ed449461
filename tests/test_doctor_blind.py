"""Issue 58: doctor on blind corpora of real reports it was not built from.

Each corpus holds real outputs from threads of other trackers than the first
corpus (ollama, llama.cpp, ComfyUI, vLLM, TheRock ...), quoted exactly, with
expectations written from each thread's conclusion by someone who had not read
doctor's code or its output on them (each ``cases.json``'s ``about``).

- ``tests/data/doctor/blind/``: 28 cases. First score, on doctor before any change
  for issue 58 (commit 44e8e75): 34 of 55 expected findings (61.8%), no case given
  forbidden advice.
- ``tests/data/doctor/blind2/``: 26 cases from 20 trackers, collected after the
  first corpus's fixes. First score, on doctor at 23b7ab5 (before any change for
  them): 30 of 43 (69.8%), no case given forbidden advice.
- ``tests/data/doctor/blind3/``: 27 cases from 23 trackers, collected after the
  second corpus's fixes. First score, on doctor at fee241a (before any change for
  them): 28 of 40 (70.0%), no case given forbidden advice.
- ``tests/data/doctor/blind4/``: 25 cases from 19 trackers, collected after the
  third corpus's fixes. First score, on doctor at 268f9e3: 23 of 32 (71.9%); two
  cases "given" their forbidden word, the bare HSA_OVERRIDE_GFX_VERSION, which the
  report then printed as a check's name ("not collected"), not as advice; reports
  on another machine's text now name the checks not collected on one line.
- ``tests/data/doctor/blind5/``: 25 cases from 20 trackers, collected after the
  fourth corpus's fixes. First score, on doctor at 860553e: 32 of 39 (82.1%), no
  case given forbidden advice.
- ``tests/data/doctor/blind6/``: 26 cases from 21 trackers, collected after the
  fifth corpus's fixes. First score, on doctor at 9b6138c: 26 of 37 (70.3%), no
  case given forbidden advice.

- ``tests/data/doctor/blind7/``: 25 cases from 18 trackers, collected after the
  sixth corpus's fixes, each from a search excerpt of its thread (the helper could
  not read any thread whole; see ``cases.json``). First score, on doctor at c9e6305:
  25 of 28 (89.3%), no case given forbidden advice.
- ``tests/data/doctor/blind8/``: 27 cases from 23 trackers, collected after the
  seventh corpus's fixes in two parts. First scores: cases 1-15 on doctor at 54cfce4,
  17 of 20 (85.0%); cases 16-27 on doctor at 99389a8, 13 of 14 (92.9%); together 30
  of 34 (88.2%), no case given forbidden advice.
- ``tests/data/doctor/blind9/``: 25 cases from 22 trackers, mostly libraries and
  frameworks (ONNX Runtime, bitsandbytes, unsloth, Ray, pip), collected after the
  eighth corpus's fixes. First score, on doctor at faa27d6 with the one fix that
  stopped it raising on a long onnxruntime line (c3d34b5): 18 of 30 (60.0%), no case
  given forbidden advice.
- ``tests/data/doctor/blind10/``: 10 cases from 8 trackers on the ROCm stack itself
  (kernel module, tools, visibility variables); the helper found no more unused
  threads whose conclusion it could see. First score, on doctor at 93f5fa1: 7 of 10
  (70.0%), no case given forbidden advice.
- ``tests/data/doctor/blind11/``: 20 cases from 16 trackers and sites, sought outside the
  big trackers (GROMACS's GitLab, Gentoo's Bugzilla, a Proxmox kernel commit, CMake's
  GitLab, smaller projects). First score, on doctor at a3d96ad: 17 of 22 (77.3%), no
  case given forbidden advice.

Each case is scored as the first corpus is (:mod:`test_doctor_corpus`); run
``python tests/test_doctor_corpus.py tests/data/doctor/blind2 -v`` for the shares.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import ROOT
from test_doctor_corpus import CLASSES, KINDS, expected_met, forbidden_given, load_cases, shares

DATA = Path(__file__).parent / "data" / "doctor"
BLIND = DATA / "blind"
NAMES = ("blind", "blind2", "blind3", "blind4", "blind5", "blind6", "blind7", "blind8")
NAMES += ("blind9", "blind10", "blind11")
CORPORA = {name: load_cases(DATA / name) for name in NAMES}
CASES = CORPORA["blind"]
EVERY = [case for cases in CORPORA.values() for case in cases]

FLOOR = 0.9
"""The share of expected findings doctor must meet on each blind corpus (issue 58's
target for held-out sets is 75%)."""
MIN_CASES = {"blind10": 10, "blind11": 20}
"""Corpora smaller than issue 58's 25 cases, with the reason: their helpers found no
more unused threads whose conclusion they could see (blind10 on the ROCm stack itself,
blind11 outside the big trackers)."""
FLOORS: dict[str, float] = {}
"""Lower floors for a corpus, with the reason (none now)."""


@pytest.mark.parametrize("name", CORPORA)
def test_the_blind_corpus_is_whole(name):
    cases = CORPORA[name]
    files = sorted(p.name for p in (DATA / name).glob("*.txt"))
    assert len(cases) >= MIN_CASES.get(name, 25) and sorted(c["file"] for c in cases) == files
    for case in cases:
        assert case["class"] in CLASSES and case["kind"] in KINDS, case
        assert case["source"].startswith("https://"), case
        assert case["concluded"] and case["expected"] and case["quoted"], case


def test_the_blind_corpora_share_no_thread():
    threads = [_thread(c["source"]) for c in EVERY]
    assert len(threads) == len(set(threads))


def _thread(url: str) -> str:
    """A thread's key: ROCm/ROCm's issues moved to ROCm/legacy-rocm-build, same numbers."""
    return re.sub(r"github\.com/ROCm/ROCm/", "github.com/ROCm/legacy-rocm-build/", url.rstrip("/"))


def test_doctor_cites_no_thread_of_a_blind_corpus():
    """A blind case measures doctor on a thread it was not built from: no source that
    doctor's code or data cites may be one of them."""
    blind = {_thread(c["source"]) for c in EVERY}
    cited = set()
    for path in [*(ROOT / "code/rocm_dl_guide/doctor").glob("*.py"),
                 *(ROOT / "code/rocm_dl_guide/data").glob("*.json")]:  # fmt: skip
        for url in re.findall(r"https://github\.com/[\w.-]+/[\w.-]+/(?:issues|pull)/\d+",
                              path.read_text(encoding="utf-8")):  # fmt: skip
            cited.add(_thread(url))
    # pytorch#132570 was a doctor source before the first blind corpus was collected
    assert blind & cited <= {"https://github.com/pytorch/pytorch/issues/132570"}


@pytest.mark.parametrize(
    "case",
    EVERY,
    ids=[f"{c['folder'][-6:]}:{c['file']}" for c in EVERY],
)
def test_no_blind_case_gets_forbidden_advice(case):
    assert not forbidden_given(case)


@pytest.mark.parametrize("name", CORPORA)
def test_the_blind_share_met_is_above_the_floor(name):
    cases = CORPORA[name]
    rows = shares(cases)
    met = sum(m for m, _ in rows.values())
    total = sum(t for _, t in rows.values())
    missed = {c["file"]: [i for i, ok in expected_met(c) if not ok] for c in cases}
    assert met / total >= FLOORS.get(name, FLOOR), {k: v for k, v in missed.items() if v}


def _report(prefix: str) -> str:
    from test_doctor_corpus import report_for

    return report_for(next(c for c in CASES if c["file"].startswith(prefix)))[1]


def test_an_unsupported_target_gets_its_options_not_one_fix():
    text = _report("13-")  # real: an APU run as gfx900, which current ROCm dropped
    assert "gfx900" in text and "Vulkan backend" in text
    text = _report("07-")  # real: a 780M (gfx1103) in ollama's ROCm image
    assert "HSA_OVERRIDE_GFX_VERSION set to 11.0.0" in text and "fewer VGPRs" in text
    assert "https://github.com/ROCm/legacy-rocm-build/issues/4557" in text


def test_an_override_never_hides_the_chip():
    text = _report("26-")  # real: a Strix Halo shown as gfx1100 by a leftover override
    assert "AMD Radeon 8060S Graphics as gfx1100, but its chip is gfx1151" in text
    text = _report("02-")  # real: an MI210 beside an RX 6600, a stale override's fault
    assert "AMD Instinct MI210 is gfx90a" in text
    assert "export HSA_OVERRIDE_GFX_VERSION" not in text


def test_doctor_reads_every_blind_text_with_each_line_pushed_past_its_cut():
    """Each real line behind 400 characters of a log prefix (timestamps, a logger's
    fields): every rule's handler still finds what its pattern matched."""
    from rocm_dl_guide.doctor import logs

    for case in EVERY:
        text = (Path(case["folder"]) / case["file"]).read_text(encoding="utf-8")
        pushed = "\n".join("[worker] " * 45 + line for line in text.splitlines())
        assert isinstance(logs.read(pushed), list), case["file"]
