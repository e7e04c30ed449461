"""Post-training with TRL: DPO's pairs and measures, GRPO's rewards, both trainers
on the smallest model, their records, resume after a signal and bad input."""

from __future__ import annotations

import json
import os
import signal
from unittest import mock

import pytest
import torch

from conftest import guide_cli
from rocm_dl_guide.core import preemption, profiles
from rocm_dl_guide.core.runs import run_record
from rocm_dl_guide.lm import dpo, grpo, posttrain, pretrain, topic_task

SMOKE = profiles.current("smoke")
TIMEOUT = 120


@pytest.fixture(scope="module")
def start(tiny_lm_run):
    """A model folder to start from: the shared tiny-lm (one epoch of pretraining)."""
    return tiny_lm_run / pretrain.MODEL_FOLDER


@pytest.fixture(scope="module")
def some_pairs():
    """Every sixth training passage: all four topics, a few steps of DPO."""
    train, _ = topic_task.examples()
    return train[::6]


def test_rewards_score_the_first_word_and_the_format():
    completions = [" exceptions The try", " import statement", "", " format", "exceptions"]
    answers = ["exceptions", "exceptions", "import", "format", "import"]
    assert grpo.correct_topic(completions, answers) == [1.0, 0.0, 0.0, 1.0, 0.0]
    named = grpo.names_a_topic(completions)
    assert named == [grpo.FORMAT_REWARD, grpo.FORMAT_REWARD, 0.0, grpo.FORMAT_REWARD,
                     grpo.FORMAT_REWARD]  # fmt: skip
    assert max(named) < min(r for r in grpo.correct_topic(completions, answers) if r)


def test_a_failing_reward_names_the_prompt_it_failed_on():
    def fussy(prompts, completions, **_):
        return [1.0 / (len(c) - 3) for c in completions]  # fails on a 3-character completion

    checked = grpo.naming_failures(fussy)
    assert checked(prompts=["a", "b"], completions=["long one", "longer"]) == [0.2, 1 / 3]
    with pytest.raises(grpo.RewardError) as failed:
        checked(
            prompts=["first passage\nTopic:", "second passage\nTopic:"],
            completions=["fine here", " ab"],
            answer=["import", "format"],
        )
    message = str(failed.value)
    assert "fussy" in message and "second passage" in message and "ZeroDivisionError" in message
    assert "first passage" not in message


def test_the_compact_lm_head_gives_the_same_log_probs_and_gradients(start):
    """TRL's fused LM head on the completion positions only (posttrain's switch on a
    CPU) scores as it does over every position: same values, same gradients. The
    pinned TRL has the switch and reads it at each call; without it the switch
    would do nothing, and steps would quietly be slow again."""
    from transformers import AutoModelForCausalLM
    from trl.trainer import utils as trl_utils
    from trl.trainer.utils import add_fused_lm_head

    model = AutoModelForCausalLM.from_pretrained(start).float()
    add_fused_lm_head(model, outputs=("log_probs", "entropy"))
    seeded = torch.Generator().manual_seed(0)
    ids = torch.randint(0, model.config.vocab_size, (3, 20), generator=seeded)
    labels = ids.masked_fill(torch.arange(20) < 18, -100)  # two completion tokens a row

    def scored():
        model.zero_grad()
        out = model(input_ids=ids, labels=labels, fused_lm_head=True)
        out.log_probs.sum().backward()
        return out.log_probs.detach(), model.lm_head.weight.grad.clone()

    with mock.patch.object(trl_utils, "_use_triton", return_value=False) as switch:
        every, every_grad = scored()
    # TRL reads the switch at each call, by its module's name: the one this patches
    assert switch.call_count >= 1
    with posttrain.completion_positions_only():
        compact, compact_grad = scored()
    assert every.shape == (3, 19)  # position t scores token t + 1
    assert every[:, 17:].abs().min() > 0 and (every[:, :17] == 0).all()
    torch.testing.assert_close(compact, every)
    torch.testing.assert_close(compact_grad, every_grad)


def test_dpo_pairs_reject_the_likeliest_wrong_topic(start):
    model, tokenizer = posttrain.load(start)
    _, test = topic_task.examples()
    items = test[:8]
    rows, rejected = dpo.pairs(model, tokenizer, items)
    scores = posttrain.answer_scores(model, tokenizer, items)
    words = posttrain.words()
    for row, wrong, ex, score in zip(rows, rejected, items, scores, strict=True):
        assert row["chosen"] == " " + ex.answer and row["rejected"] == " " + wrong != row["chosen"]
        others = [score[words.index(w)] for w in words if w != ex.answer]
        assert score[words.index(wrong)] == max(others)
        assert row["prompt"] == topic_task.PROMPT.format(passage=ex.passage)
    # the scores are the model's own log-probabilities of each word after the prompt
    ids = torch.tensor([tokenizer.encode(rows[0]["prompt"]).ids])
    with torch.no_grad():
        logp = model(ids)[0, :, -1].log_softmax(0)
    first = topic_task.answer_ids(tokenizer, words[0])[0]
    assert scores[0, 0].item() == pytest.approx(logp[first].item(), abs=1e-4)


def test_answers_of_several_tokens_are_scored_token_by_token(start, monkeypatch):
    """SmolLM2's vocabulary may split an answer word: its score is then the sum of
    its tokens' log-probabilities, each after the prompt and the tokens before it."""
    model, tokenizer = posttrain.load(start)
    _, test = topic_task.examples()
    one_token = posttrain.answer_scores(model, tokenizer, test[:3])
    original = topic_task.answer_ids
    split = {"format": [17, 42]}  # two arbitrary tokens for one of the words
    monkeypatch.setattr(
        topic_task, "answer_ids", lambda tok, word: split.get(word) or original(tok, word)
    )
    scores = posttrain.answer_scores(model, tokenizer, test[:3])
    words = posttrain.words()
    k = words.index("format")
    others = [i for i in range(len(words)) if i != k]
    assert torch.allclose(scores[:, others], one_token[:, others], atol=1e-4)
    for row, ex in enumerate(test[:3]):
        prompt = tokenizer.encode(topic_task.PROMPT.format(passage=ex.passage)).ids
        with torch.no_grad():
            logp = model(torch.tensor([prompt + [17]]))[0].log_softmax(0)
        expected = logp[17, len(prompt) - 1] + logp[42, len(prompt)]
        assert scores[row, k].item() == pytest.approx(expected.item(), abs=1e-4)


@pytest.mark.timeout(TIMEOUT)
def test_dpo_widens_the_held_out_margin_and_records_it(start, some_pairs):
    run = dpo.train(
        SMOKE, 1, base=start, train_items=some_pairs, progress=False, losses=dpo.SWEEP_LOSSES
    )
    assert run.train_size == len(some_pairs) and run.test_size > 40
    assert run.after.margin > run.before.margin
    assert run.reward_margin > 0
    losses = [h["loss"] for h in run.history]
    assert len(losses) == -(-len(some_pairs) // dpo.RECIPE["batch_size"])
    assert losses[0] == pytest.approx(0.6931, abs=0.01)  # log 2: the policy starts as the reference
    record = run_record("dpo", run, "fixtures")
    for key in ("exact_match_before", "exact_match_after", "preference_accuracy_before",
                "preference_accuracy_after"):  # fmt: skip
        assert 0 <= record[key] <= 1, key
    assert record["epochs_completed"] == 1 and record["test_accuracy"] == run.after.exact_match


def _signal_at_step(monkeypatch, step: int) -> None:
    """SIGTERM to this process while the trainer runs optimizer step ``step``."""
    from transformers import Trainer

    original = Trainer.training_step
    calls = {"n": 0}

    def signalling(self, *args, **kwargs):
        calls["n"] += 1
        if calls["n"] == step:
            os.kill(os.getpid(), signal.SIGTERM)
        return original(self, *args, **kwargs)

    monkeypatch.setattr(Trainer, "training_step", signalling)


@pytest.mark.timeout(TIMEOUT)
def test_an_interrupted_dpo_run_resumes_exactly(start, some_pairs, tmp_path, monkeypatch):
    """SIGTERM during step 4 of 9: the run saves that step and stops; ``resume``
    ends with the weights of an uninterrupted run."""
    straight = dpo.train(
        SMOKE, base=start, train_items=some_pairs, checkpoint_dir=tmp_path / "a", progress=False
    )
    _signal_at_step(monkeypatch, 4)
    with pytest.raises(preemption.Preempted) as stopped:
        dpo.train(
            SMOKE, base=start, train_items=some_pairs, checkpoint_dir=tmp_path / "b", progress=False
        )
    assert stopped.value.step == 4 and "--resume" in str(stopped.value)
    assert posttrain.last_checkpoint(tmp_path / "b" / posttrain.TRAINER_FOLDER).name == (
        "checkpoint-4"
    )
    monkeypatch.undo()
    resumed = dpo.train(
        SMOKE,
        base=start,
        train_items=some_pairs,
        checkpoint_dir=tmp_path / "b",
        resume=True,
        progress=False,
    )
    assert resumed.resumed_from_step == 4
    a, b = dict(straight.model.named_parameters()), dict(resumed.model.named_parameters())
    assert a.keys() == b.keys()
    for name in a:
        assert torch.equal(a[name], b[name]), name
    assert resumed.after == straight.after


def test_last_checkpoint_skips_a_half_written_one(tmp_path, capsys):
    for step in (20, 40):
        (tmp_path / f"checkpoint-{step}").mkdir()
    (tmp_path / "checkpoint-20" / "trainer_state.json").write_text("{}")
    (tmp_path / "checkpoint-x").mkdir()
    assert posttrain.last_checkpoint(tmp_path) == tmp_path / "checkpoint-20"
    assert posttrain.last_checkpoint(tmp_path / "none") is None


@pytest.mark.timeout(TIMEOUT)
def test_grpo_logs_reward_and_kl_and_resumes_exactly(start, tmp_path, monkeypatch):
    """Four steps: a reward and a KL every step, held-out exact match at the start
    and the end; SIGTERM during step 2 and ``resume``: the weights of a straight run."""
    kwargs = {"base": start, "steps": 4, "checkpoint_every": 2, "progress": False}
    straight = grpo.train(SMOKE, checkpoint_dir=tmp_path / "a", **kwargs)
    assert straight.steps == 4
    logged = [row for row in straight.curve if "reward" in row]
    assert [row["step"] for row in logged] == [1, 2, 3, 4]
    assert all(0 <= row["reward"] <= 1 + grpo.FORMAT_REWARD for row in logged)
    assert all(row["kl"] >= 0 for row in logged) and logged[0]["kl"] == 0  # the first step: ref
    measured = {row["step"]: row["exact_match"] for row in straight.curve if "exact_match" in row}
    assert measured[0] == straight.exact_match_before and measured[4] == straight.exact_match_after
    record = run_record("grpo", straight, "fixtures")
    assert record["reward_first"] == logged[0]["reward"] and record["kl_last"] == logged[-1]["kl"]

    _signal_at_step(monkeypatch, 2)
    with pytest.raises(preemption.Preempted) as stopped:
        grpo.train(SMOKE, checkpoint_dir=tmp_path / "b", **kwargs)
    assert stopped.value.step == 2
    monkeypatch.undo()
    resumed = grpo.train(SMOKE, checkpoint_dir=tmp_path / "b", resume=True, **kwargs)
    assert resumed.resumed_from_step == 2 and resumed.steps == 4
    a, b = dict(straight.model.named_parameters()), dict(resumed.model.named_parameters())
    for name in a:
        assert torch.equal(a[name], b[name]), name


@pytest.mark.timeout(TIMEOUT)
def test_a_reward_that_raises_stops_grpo_with_the_prompt(start):
    def broken(prompts, completions, **_):
        raise KeyError("score")

    with pytest.raises(grpo.RewardError) as failed:
        grpo.train(SMOKE, base=start, steps=1, rewards=(broken,), progress=False)
    prompts = {topic_task.PROMPT.format(passage=e.passage)[:77] for e in topic_task.examples()[0]}
    message = str(failed.value)
    assert message.startswith("reward broken failed on the prompt '") and "KeyError" in message
    assert message.split("'")[1].removesuffix("...") in prompts


def test_a_start_that_is_not_a_model_folder_is_refused(tmp_path):
    with pytest.raises(FileNotFoundError, match="not a transformers model folder"):
        posttrain.start_folder(SMOKE, tmp_path)


@pytest.mark.timeout(TIMEOUT)
def test_train_dpo_json_from_a_model_folder(start, tmp_path):
    proc = guide_cli(
        "train", "dpo", "--json", "--epochs", "1", "--model", str(start),
        "--checkpoint-dir", str(tmp_path), timeout=TIMEOUT,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    record = json.loads(proc.stdout.strip().splitlines()[-1])
    assert record["example"] == "dpo" and record["epochs_completed"] == 1
    for key in ("exact_match_before", "exact_match_after", "preference_accuracy_before",
                "preference_accuracy_after"):  # fmt: skip
        assert 0 <= record[key] <= 1, key
    assert record["preference_accuracy_after"] > record["preference_accuracy_before"]
    assert (tmp_path / posttrain.TRAINER_FOLDER).is_dir()
    refused = guide_cli("train", "lora", "--model", str(start), timeout=30)
    assert refused.returncode == 2 and "lora does not support --model" in refused.stderr


@pytest.mark.timeout(TIMEOUT)
def test_bench_llm_measures_both_runs(start, monkeypatch):
    from rocm_dl_guide.lm import benchmark

    assert {"dpo", "grpo"} <= set(benchmark.PARTS)
    monkeypatch.setattr(posttrain, "start_folder", lambda profile, base=None: start)
    monkeypatch.setattr(dpo, "PAIR_STRIDE", 40)  # 10 pairs
    monkeypatch.setitem(dpo.RECIPE, "epochs", 1)
    monkeypatch.setitem(grpo.RECIPE, "steps", 2)
    (row,) = benchmark.MEASURE["dpo"](SMOKE)
    assert row["method"] == "DPO" and row["pairs"] == 10 and row["pairs_per_s"] > 0
    assert 0 <= row["exact_match_before"] <= 1 and 0 <= row["preference_accuracy_after"] <= 1
    (row,) = benchmark.MEASURE["grpo"](SMOKE)
    assert row["method"] == "GRPO" and row["steps"] == 2 and row["completions_per_s"] > 0
    assert row["kl_last"] >= 0 and 0 <= row["reward_last"] <= 1 + grpo.FORMAT_REWARD
