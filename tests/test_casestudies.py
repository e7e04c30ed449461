"""The one case-study registry: every consumer reads it, and every entry resolves.

Adding a case study means one :class:`rocm_dl_guide.core.casestudies.CaseStudy`
entry plus its module and page; these tests are what tell a contributor that an
entry is incomplete (a page that does not exist, a function that is not there,
a flag the training function does not take).
"""

from __future__ import annotations

import ast
import inspect
import re

import pytest

from conftest import ROOT
from rocm_dl_guide.casestudies import recipes
from rocm_dl_guide.cli import build_parser
from rocm_dl_guide.core import casestudies, profiles
from rocm_dl_guide.selfcheck import report, runner

PACKAGE_DIR = ROOT / "code" / "rocm_dl_guide"
STUDIES = list(casestudies.REGISTRY.values())


def _ids(cs):
    return cs.name


@pytest.mark.parametrize("study", STUDIES, ids=_ids)
def test_every_entry_resolves(study):
    """The train function exists and takes the keywords the CLI passes for the
    flags the entry claims; the page exists and is in the table of contents."""
    params = inspect.signature(study.train_function()).parameters
    assert {"profile", "epochs", "progress"} <= params.keys()
    if study.checkpoints:
        assert {"checkpoint_dir", "resume"} <= params.keys()
    for flag in ("amp", "channels_last", "fsdp"):
        assert (flag in params) == study.supports(flag), (study.name, flag)
    assert (ROOT / f"{study.page}.md").is_file()
    assert f"file: {study.page}\n" in (ROOT / "_toc.yml").read_text()
    if study.workload:
        assert callable(study.workload_function())
    if study.recipe_attr:
        assert study.recipe()["epochs"]


def test_the_command_line_offers_exactly_the_registry():
    train = build_parser()._subparsers._group_actions[0].choices["train"]
    example = next(a for a in train._actions if a.dest == "example")
    assert list(example.choices) == list(casestudies.REGISTRY)


def test_selfcheck_and_recipes_read_the_registry():
    # selfcheck trains every PyTorch case study but the language models, which have
    # checks of their own (lm:bf16, lm:mfu, lm:lora, ...); tiny-lm has a workload
    # for bench training and lm:mfu
    lms = {"tiny-lm", "lora", "dpo", "grpo"}
    assert set(report.EXAMPLES) == set(casestudies.names(framework="pytorch")) - lms
    assert set(report.EXAMPLES) == {cs.name for cs in STUDIES if cs.workload} - {"tiny-lm"}
    assert all(f"train:{name}" in runner.CHECK_NAMES for name in report.EXAMPLES)
    assert list(recipes.names()) == [cs.name for cs in STUDIES if cs.recipe_attr]


def test_one_name_everywhere_epoch_caps_included():
    """Every ``example=`` a module passes to ``Profile.epochs`` is a registry name,
    and each case study's train function passes its own."""
    for path in PACKAGE_DIR.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "epochs":
                for kw in node.keywords:
                    if kw.arg == "example" and isinstance(kw.value, ast.Constant):
                        casestudies.get(kw.value.value)  # raises for an unknown name
    for study in STUDIES:
        source = inspect.getsource(study.train_function())
        assert re.search(rf'example="{re.escape(study.name)}"', source), study.name
    smoke = profiles.get("smoke")
    assert smoke.epochs(90, example="inception-v3") == 2 < smoke.epochs(90, example="cifar10")


def test_a_bad_entry_is_refused_and_an_unknown_name_lists_the_choices():
    with pytest.raises(ValueError, match="unknown flag"):
        casestudies.CaseStudy(
            "x", "x", "pytorch", "mnist", "train_pytorch", "p", frozenset({"xla"})
        )
    with pytest.raises(ValueError, match="framework"):
        casestudies.CaseStudy("x", "x", "jax", "mnist", "train_pytorch", "p")
    with pytest.raises(casestudies.UnknownCaseStudyError, match="mnist-pytorch, mnist-tensorflow"):
        casestudies.get("mnist")
    assert casestudies.names(with_flag="fsdp") == (
        "mnist-pytorch",
        "inception-v3",
        "cifar10",
        "tiny-lm",
        "lora",
    )
