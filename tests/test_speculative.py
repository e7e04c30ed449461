"""Speculative decoding: the target's own greedy tokens, rounds counted exactly,
one clear error for a draft with another tokenizer, the formula, the command,
the draft's cache, ``bench llm``'s rows, the selfcheck, and the engines' flags."""

from __future__ import annotations

import copy
import json
import re
import shutil

import pytest
import torch

from conftest import ROOT
from rocm_dl_guide.cli import main
from rocm_dl_guide.core import profiles
from rocm_dl_guide.lm import benchmark, corpus, lora, pretrain, speculative
from rocm_dl_guide.lm import model as models

SMOKE = profiles.current("smoke")
PAGE = ROOT / "book" / "language-models" / "speculative.md"


@pytest.fixture(scope="module")
def target(tiny_lm_weights):
    """tiny-lm pretrained for one epoch (its greedy choices are not near-ties),
    its tokenizer and a prompt."""
    lm, tokenizer, _ = lora.base_model(SMOKE, tiny_lm_weights)
    hf = lm.model.eval()
    return hf, tokenizer, torch.tensor([tokenizer.encode(corpus.PROMPT).ids])


def small_draft(vocab: int, seed: int = 1):
    """An untrained one-layer draft: its guesses are mostly wrong, which the
    target must catch."""
    size = models.ModelSize(layers=1, width=32, heads=2, ffn=64, context=64)
    return models.build(size, vocab, 0, seed=seed).model.eval()


def test_every_method_writes_the_targets_greedy_tokens(target):
    hf, tokenizer, prompt = target
    draft = small_draft(tokenizer.get_vocab_size())
    greedy, rounds, _ = speculative.run(hf, prompt, 20)
    assert len(greedy) == 20 and rounds.kept == [1] * 20 and rounds.proposed == 0
    for method in ("draft model", "prompt lookup"):
        for gamma in (1, 3):
            tokens, counted, _ = speculative.run(hf, prompt, 20, method, gamma, draft)
            assert torch.equal(tokens, greedy), (method, gamma)
            assert sum(counted.kept) == 20 and 0 <= counted.accepted <= counted.proposed


def test_a_draft_equal_to_the_target_has_every_guess_accepted(target):
    """The counts are exact: a draft that is the target itself guesses right every
    time, so α is 1 and each round keeps γ + 1 tokens (the last one fewer); and
    γ is what ``configure`` set, not transformers' changing schedule."""
    hf, _, prompt = target
    same = copy.deepcopy(hf)
    for gamma in (1, 3):
        _, rounds, _ = speculative.run(hf, prompt, 16, "draft model", gamma, same)
        assert rounds.accepted == rounds.proposed > 0
        assert rounds.kept[:-1] == [gamma + 1] * (len(rounds.kept) - 1)
        assert len(rounds.kept) == -(-16 // (gamma + 1))


def test_compare_times_every_configuration_against_greedy(target):
    hf, tokenizer, prompt = target
    draft = small_draft(tokenizer.get_vocab_size())
    configs = [("draft model", 2), ("prompt lookup", 2)]
    rows = speculative.compare(hf, [prompt, prompt[:, :2]], 8, configs, draft, repeats=2)
    assert [(r.method, r.gamma) for r in rows] == [("greedy", 0), *configs]
    assert all(r.identical and r.new_tokens == 16 and r.tokens_per_s > 0 for r in rows)
    assert rows[0].speedup == 1.0 and rows[0].acceptance_rate is None
    assert rows[0].tokens_per_round == 1.0
    assert speculative.best(rows) in rows[1:]
    frame = speculative.table(rows)
    assert list(frame.columns) == list(speculative.COLUMNS.values())
    with pytest.raises(ValueError, match="unknown method"):
        speculative.run(hf, prompt, 4, "beam")
    with pytest.raises(ValueError, match="at least 1 token"):
        speculative.configure(draft, 0)


def test_a_draft_with_another_tokenizer_gets_one_error_that_says_why(target):
    from tokenizers import Tokenizer, models, trainers

    _, tokenizer, _ = target
    speculative.check_tokenizers(tokenizer, tokenizer)  # the same: no error
    other = Tokenizer(models.BPE())
    other.train_from_iterator(["a different corpus"] * 10, trainers.BpeTrainer(vocab_size=60))
    with pytest.raises(ValueError, match="must share one tokenizer") as caught:
        speculative.check_tokenizers(tokenizer, other)
    assert "is not the target's" in str(caught.value) and "\n" not in str(caught.value)


def test_the_formula_is_leviathan_et_als():
    assert speculative.expected_tokens(0.0, 4) == 1.0
    assert speculative.expected_tokens(1.0, 4) == 5.0
    assert speculative.expected_tokens(0.5, 2) == pytest.approx(1.75)
    assert speculative.expected_speedup(0.5, 2, 0.25) == pytest.approx(1.75 / 1.5)
    # c = 0 (prompt lookup): the speed-up is the tokens per round
    assert speculative.expected_speedup(0.8, 4, 0.0) == speculative.expected_tokens(0.8, 4)


def folder_with(tmp_path, name, tokenizer, vocab):
    """A transformers model folder of an untrained small decoder with ``tokenizer``."""
    lm = models.CausalLM(small_draft(vocab))
    pretrain.export(lm, tokenizer, tmp_path / name)
    return tmp_path / name


def test_generate_draft_prints_one_record_and_refuses_another_tokenizer(
    target, tiny_lm_run, tmp_path, capsys
):
    from tokenizers import Tokenizer, models, trainers

    _, tokenizer, _ = target
    model = tiny_lm_run / pretrain.MODEL_FOLDER
    argv = ["generate", "--prompt", corpus.PROMPT, "--max-new-tokens", "8", "--model", str(model)]
    draft = folder_with(tmp_path, "draft", tokenizer, tokenizer.get_vocab_size())
    assert main([*argv, "--draft", str(draft), "--draft-tokens", "2", "--json"]) == 0
    record = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert record["identical"] is True and record["method"] == "draft model"
    assert record["gamma"] == 2 and record["new_tokens"] == 8
    for key in ("speedup", "acceptance_rate", "tokens_per_s", "greedy_tokens_per_s"):
        assert record[key] >= 0, key
    assert main([*argv, "--prompt-lookup", "3", "--json"]) == 0
    record = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert record["identical"] is True and record["method"] == "prompt lookup"
    other = Tokenizer(models.BPE())
    other.train_from_iterator(["another corpus"] * 10, trainers.BpeTrainer(vocab_size=50))
    foreign = folder_with(tmp_path, "foreign", other, other.get_vocab_size())
    assert main([*argv, "--draft", str(foreign)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("generate: the draft's tokenizer is not the target's")
    assert len(err.splitlines()) == 1
    assert main([*argv, "--draft", str(draft), "--prompt-lookup", "2"]) == 1
    assert "not both" in capsys.readouterr().err


def test_the_draft_trains_once_and_is_loaded_after(target, tmp_path, monkeypatch):
    """The first call trains the draft into the runs folder (two epochs on two
    cores: seconds); the second loads it; bench llm's rows come from it. A runs
    folder of its own: the book's speculative page may be using the shared one."""
    monkeypatch.setenv("ROCM_DL_GUIDE_RUNS", str(tmp_path / "runs"))
    hf, tokenizer, prompt = target
    draft, draft_tokenizer, seconds = speculative.draft_model(SMOKE, "cpu", tokenizer)
    assert seconds > 0 and draft.config.num_hidden_layers == speculative.DRAFT_SIZE.layers
    speculative.check_tokenizers(tokenizer, draft_tokenizer)
    again, _, seconds = speculative.draft_model(SMOKE, "cpu", tokenizer)
    assert seconds == 0.0
    for a, b in zip(draft.parameters(), again.parameters(), strict=True):
        assert torch.equal(a, b)
    c = speculative.cost_ratio(hf, draft, prompt, 8, repeats=1)
    assert 0 < c < 1, "one layer of width 64 must cost less than tiny-lm's three of 192"


def test_bench_llm_has_speculative_rows(target, monkeypatch):
    hf, tokenizer, _ = target
    monkeypatch.setitem(speculative.NEW_TOKENS, "smoke", 6)
    monkeypatch.setitem(speculative.DRAFT_TOKENS, "draft model", (2,))
    monkeypatch.setitem(speculative.DRAFT_TOKENS, "prompt lookup", (2,))
    draft = small_draft(tokenizer.get_vocab_size())
    monkeypatch.setattr(
        "rocm_dl_guide.lm.generation.load", lambda profile, path=None: (hf, tokenizer, "x")
    )
    monkeypatch.setattr(speculative, "draft_model", lambda *a: (draft, tokenizer, 0.0))
    assert "speculative" in benchmark.PARTS
    rows = benchmark.MEASURE["speculative"](SMOKE)
    assert [(r["method"], r["gamma"]) for r in rows] == [
        ("greedy", 0),
        ("draft model", 2),
        ("prompt lookup", 2),
    ]
    assert all(r["identical"] for r in rows) and rows[1]["cost_ratio"] > 0
    assert rows[0]["cost_ratio"] is None


def test_the_selfcheck_records_speculative_decoding(tiny_lm_weights, tmp_path, monkeypatch):
    from rocm_dl_guide.selfcheck.runner import CHECK_NAMES, run

    assert "lm:speculative" in CHECK_NAMES
    monkeypatch.setitem(speculative.NEW_TOKENS, "smoke", 6)
    monkeypatch.setitem(speculative.DRAFT_TOKENS, "draft model", (2,))
    monkeypatch.setitem(speculative.DRAFT_TOKENS, "prompt lookup", (2,))
    monkeypatch.setattr(speculative, "train_draft", lambda profile, tok: (
        models.CausalLM(small_draft(tok.get_vocab_size())), tok))  # fmt: skip
    folder = tmp_path / "checkpoints" / "tiny-lm"
    folder.mkdir(parents=True)
    shutil.copy(tiny_lm_weights, folder / pretrain.WEIGHTS_NAME)
    monkeypatch.setenv("ROCM_DL_GUIDE_RUNS", str(tmp_path / "runs"))
    report = run(False, tmp_path, steps=1, only=["lm:speculative"], log=lambda _l: None)
    (outcome,) = report.checks
    assert outcome.status == "pass", outcome.detail
    for key in ("tokens_per_s", "acceptance_rate", "speedup", "cost_ratio"):
        assert key in outcome.figures


def test_the_engines_flags_are_the_documented_ones_and_the_page_states_them():
    """Every option in the vLLM and SGLang commands is one their documentation
    names (ENGINE_FLAGS, from the cited pages), each named one is used, and the
    page prints the commands and names the flags as the module spells them."""
    commands = speculative.ENGINE_COMMANDS
    vllm = " ".join(v for k, v in commands.items() if k.startswith("vLLM"))
    sglang = " ".join(v for k, v in commands.items() if k.startswith("SGLang"))
    assert set(re.findall(r"--[\w-]+", vllm)) == {"--speculative-config"}
    documented = {f for f in speculative.ENGINE_FLAGS["sglang"] if f.startswith("--")}
    assert set(re.findall(r"--[\w-]+", sglang)) == documented | {"--model-path"}
    for engine, text in (("vllm", vllm), ("sglang", sglang)):
        for flag in speculative.ENGINE_FLAGS[engine]:
            assert flag in text, (engine, flag)
    for command in commands.values():
        if "--speculative-config" in command:
            config = json.loads(command.split("--speculative-config ", 1)[1].strip("'"))
            assert config["method"] in ("draft_model", "ngram")
            assert config["num_speculative_tokens"] > 0
    page = PAGE.read_text()
    assert "speculative.ENGINE_COMMANDS.items()" in page
    stated_flags = (
        "`--speculative-config`",
        "`draft_model`",
        "`ngram`",
        "`--speculative-algorithm STANDALONE`",
        "`--speculative-eagle-topk 1`",
    )
    for stated in stated_flags:
        assert stated in page, stated
        assert stated.strip("`").split()[-1] in vllm + sglang, stated
