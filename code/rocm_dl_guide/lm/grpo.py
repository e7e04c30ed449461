"""The ``grpo`` case study: reinforcement learning with a verifiable reward (TRL's ``GRPOTrainer``).

Group relative policy optimisation (Shao et al., 2024, DeepSeekMath) samples a
group of completions for each prompt, scores each with a reward, and uses each
completion's reward relative to its group's (minus the group's mean, over its
standard deviation) as its advantage: no value network is trained. A KL term
keeps the policy near a frozen reference.

Here the reward is computed by code, not by a model: 1 when the completion's
first word is the passage's topic (:func:`correct_topic`), plus 0.2 when it is
one of the four topic words at all (:func:`names_a_topic`, a small format
reward). The run starts from the LoRA fine-tuned model
(:func:`~rocm_dl_guide.lm.posttrain.start_folder`), which is also the reference,
and measures held-out exact match every few steps (:class:`HeldOut`).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rocm_dl_guide.core import profiles
from rocm_dl_guide.lm import posttrain, topic_task

RECIPE = {
    "trainer": "TRL GRPOTrainer",
    "rewards": "correct topic 1.0, names a topic 0.2",
    "group_size": 4,
    "prompts_per_step": 8,
    "completion_tokens": "the longest answer's",
    "temperature": 1.0,
    "kl_beta": 0.005,
    "optimizer": "AdamW",
    "lr": 5e-4,
    "schedule": "linear decay to 0",
    "steps": 96,
}
"""GRPO's settings, the same on every profile: groups of 4 completions for 8
prompts a step (32 completions), sampled at temperature 1, 96 steps. A
completion has as many tokens as the longest answer word (:func:`answer_tokens`;
one in tiny-lm's vocabulary): tokens after the answer earn the answer's
advantage but decide nothing, and with three of them held-out exact match fell
on one seed of three.

Chosen on two CPU cores (AMD EPYC with AVX-512) from four LoRA models with 27
to 29 of the 43 held-out passages right: two of the LoRA page's recipe (two
seeds) and two of an older one (four epochs instead of six). Ten runs of 96
steps, two or three GRPO seeds from each, gained 2 to 9 passages. 128 steps
gained 3 to 8 in six runs, but the page would take over a minute. From weaker
LoRA models of the older recipe (17 and 18 right) 96 steps gained 3 to 10
passages in seven runs of eight, but one start that never named two of the
topics lost one passage. At 2e-4 and 80 steps runs gained 0 to 5; at 1e-3
exact match first fell and one run ended 5 passages lower. Groups of 8 or 16
for fewer prompts, warm-up, unscaled advantages, a lower temperature and a
smaller format reward did not help the weakest start. The KL coefficient is
below DeepSeekMath's 0.04, which gained less from the better LoRA models; the
KL term still keeps the policy near the reference and is logged at every step."""
SELECTION_GAINS = (2, 9)
"""The fewest and the most held-out passages (of 43) that the runs which chose
:data:`RECIPE` gained, from LoRA models with 27 to 29 right."""
GAIN_FLOOR = 1
"""Held-out passages a run must gain at least: what the page asserts, below the
fewest that any run gained when :data:`RECIPE` was chosen."""
SCHEDULE = "linear"
"""The learning-rate schedule (``transformers``' name)."""
FORMAT_REWARD = 0.2
EVAL_EVERY = 32
"""Steps between held-out exact-match measurements."""


class RewardError(RuntimeError):
    """A reward function failed; the message names the prompt."""


def first_word(completion: str) -> str:
    words = completion.split()
    return words[0] if words else ""


def correct_topic(completions: list[str], answer: list[str], **_: Any) -> list[float]:
    """1.0 where the completion's first word is the passage's topic, else 0.0."""
    return [float(first_word(c) == a) for c, a in zip(completions, answer, strict=True)]


def names_a_topic(completions: list[str], **_: Any) -> list[float]:
    """:data:`FORMAT_REWARD` where the completion's first word is one of the topic
    words (right or wrong): an answer in the expected form."""
    topics = set(topic_task.TOPICS.values())
    return [FORMAT_REWARD * (first_word(c) in topics) for c in completions]


def naming_failures(reward: Callable[..., list[float]]) -> Callable[..., list[float]]:
    """``reward`` that, when it raises, raises :class:`RewardError` naming the
    first prompt it fails on (found by scoring the batch's completions one by one)."""

    @functools.wraps(reward)
    def checked(prompts: list[str], completions: list[str], **kwargs: Any) -> list[float]:
        try:
            return reward(prompts=prompts, completions=completions, **kwargs)
        except Exception as batch_error:
            for i, prompt in enumerate(prompts):
                one = {k: v[i : i + 1] if isinstance(v, list) else v for k, v in kwargs.items()}
                try:
                    reward(prompts=[prompt], completions=completions[i : i + 1], **one)
                except Exception as exc:
                    raise RewardError(
                        f"reward {reward.__name__} failed on the prompt "
                        f"{_shorten(prompt)!r} (completion {completions[i]!r}): "
                        f"{type(exc).__name__}: {exc}"
                    ) from exc
            raise RewardError(
                f"reward {reward.__name__} failed on a batch of {len(prompts)} prompts, "
                f"none alone: {type(batch_error).__name__}: {batch_error}"
            ) from batch_error

    return checked


def _shorten(text: str, n: int = 80) -> str:
    return text if len(text) <= n else text[: n - 3] + "..."


REWARDS = (correct_topic, names_a_topic)


@dataclass
class GRPORun:
    """What :func:`train` returns."""

    model: Any
    tokenizer: Any
    exact_match_before: float
    exact_match_after: float
    curve: list[dict[str, float]]
    """Per logged step: ``step``, ``reward`` (mean over the step's completions),
    ``kl`` (to the reference) and, every :data:`EVAL_EVERY` steps, the held-out
    ``exact_match``."""
    steps: int
    test_size: int
    start: Path
    resumed_from_step: int = 0
    device: str = "cpu"
    profile: str = "smoke"
    seconds: float = 0.0
    result: Any = field(default=None, repr=False)

    @property
    def test_accuracy(self) -> float:
        return self.exact_match_after

    def _logged(self, key: str) -> list[float]:
        return [row[key] for row in self.curve if key in row]

    @property
    def reward_first(self) -> float:
        return self._logged("reward")[0]

    @property
    def reward_last(self) -> float:
        return self._logged("reward")[-1]

    @property
    def kl_last(self) -> float:
        return self._logged("kl")[-1]

    def window(self, key: str, first: bool, n: int = 10) -> float:
        """The mean of ``key`` over the first or the last ``n`` logged steps (one
        step's reward is the mean of only 32 completions)."""
        values = self._logged(key)
        part = values[:n] if first else values[-n:]
        return sum(part) / len(part)

    def record_fields(self) -> dict[str, Any]:
        """The GRPO facts of the ``--json`` record."""
        return {
            "epochs_completed": 0,
            "steps": self.steps,
            "resumed_from_step": self.resumed_from_step or None,
            "exact_match_before": self.exact_match_before,
            "exact_match_after": self.exact_match_after,
            "reward_first": self.reward_first,
            "reward_last": self.reward_last,
            "kl_last": self.kl_last,
            "train_seconds": self.seconds,
        }

    def summary(self) -> str:
        return (
            f"GRPO ({self.steps} steps, {self.profile} profile, {self.device}): held-out exact "
            f"match {self.exact_match_before:.0%} -> {self.exact_match_after:.0%} on "
            f"{self.test_size} passages; mean reward {self.window('reward', True):.2f} over the "
            f"first 10 steps, {self.window('reward', False):.2f} over the last 10; "
            f"KL {self.kl_last:.3f}"
        )


def held_out_callback(tokenizer: Any, items: list[topic_task.Example], every: int = EVAL_EVERY):
    """A ``transformers`` callback that measures held-out exact match every
    ``every`` steps; its ``scores`` maps step -> exact match."""
    from transformers import TrainerCallback

    class HeldOut(TrainerCallback):
        def __init__(self) -> None:
            self.scores: dict[int, float] = {}

        def on_step_end(self, args, state, control, model=None, **kwargs):
            if state.global_step % every == 0 or state.global_step == state.max_steps:
                lm = posttrain.causal_lm(model)
                self.scores[state.global_step] = topic_task.exact_match(lm, tokenizer, items)
            return control

    return HeldOut()


def dataset(items: list[topic_task.Example]):
    """The prompts as TRL reads them, with each passage's ``answer`` for the rewards."""
    from datasets import Dataset

    return Dataset.from_list(
        [
            {"prompt": topic_task.PROMPT.format(passage=ex.passage), "answer": ex.answer}
            for ex in items
        ]
    )


def train(
    profile: profiles.Profile,
    epochs: int | None = None,
    checkpoint_dir: Path | None = None,
    resume: bool = False,
    checkpoint_every: int | None = None,
    progress: bool = True,
    steps: int | None = None,
    base: str | Path | None = None,
    seed: int = 0,
    rewards: tuple[Callable[..., list[float]], ...] = REWARDS,
) -> GRPORun:
    """GRPO from :func:`~rocm_dl_guide.lm.posttrain.start_folder` (``base``, else the
    LoRA model) on the topic task's training prompts, for ``steps`` optimizer
    steps (:data:`RECIPE`'s by default) times ``epochs`` (1 unless given: GRPO
    counts steps, and one "epoch" here is one run of them). With
    ``checkpoint_dir`` the trainer checkpoints in its ``trainer`` folder and
    ``resume`` continues from the last checkpoint there."""
    from rocm_dl_guide.core import device as devices

    steps = (steps or RECIPE["steps"]) * profile.epochs(1, epochs, example="grpo")
    dev = devices.pick()
    start = posttrain.start_folder(profile, base)
    policy, tokenizer = posttrain.load(start, dev)
    train_items, test_items = topic_task.examples()
    before = topic_task.exact_match(policy, tokenizer, test_items)
    del policy
    held_out = held_out_callback(tokenizer, test_items)
    with posttrain.output_folder(checkpoint_dir) as output:
        settings = posttrain.trainer_settings(dev, output, seed, checkpoint_every, checkpoint_dir)
        with posttrain.quiet(), posttrain.completion_positions_only():
            trainer = grpo_trainer(start, train_items, rewards, steps, settings, [held_out])
            began = time.perf_counter()
            resumed = posttrain.fit(trainer, checkpoint_dir, resume, progress)
            seconds = time.perf_counter() - began
    final = posttrain.causal_lm(trainer.model).eval()
    after = topic_task.exact_match(final, tokenizer, test_items)
    return GRPORun(
        model=final,
        tokenizer=tokenizer,
        exact_match_before=before,
        exact_match_after=after,
        curve=_curve(trainer.state.log_history, {0: before, **held_out.scores, steps: after}),
        steps=trainer.state.global_step,
        test_size=len(test_items),
        start=start,
        resumed_from_step=resumed,
        device=str(devices.describe()),
        profile=profile.name,
        seconds=seconds,
    )


def grpo_trainer(start: Path, items: list[topic_task.Example], rewards: tuple, steps: int,
                 settings: dict[str, Any], callbacks: list):  # fmt: skip
    """TRL's ``GRPOTrainer`` on the prompts of ``items``, from the model folder
    ``start``, which is also the frozen reference of the KL term. Each reward
    function is wrapped so that a failure names its prompt (:func:`naming_failures`).
    ``settings``: :func:`posttrain.trainer_settings`."""
    from trl import GRPOConfig, GRPOTrainer

    tokenizer = posttrain.trl_tokenizer(start)
    group = RECIPE["group_size"]
    config = GRPOConfig(
        **settings,
        learning_rate=RECIPE["lr"],
        lr_scheduler_type=SCHEDULE,
        beta=RECIPE["kl_beta"],
        num_generations=group,
        per_device_train_batch_size=group * RECIPE["prompts_per_step"],
        max_completion_length=answer_tokens(tokenizer),
        temperature=RECIPE["temperature"],
        max_steps=steps,
    )
    return GRPOTrainer(
        model=str(start),
        reward_funcs=[naming_failures(r) for r in rewards],
        args=config,
        train_dataset=dataset(items),
        processing_class=tokenizer,
        callbacks=callbacks,
    )


def answer_tokens(tokenizer: Any) -> int:
    """Tokens of the longest answer word as it follows ``Topic:`` (a ``transformers``
    tokenizer): how long a completion needs to be."""
    words = set(topic_task.TOPICS.values())
    return max(len(tokenizer(" " + w, add_special_tokens=False).input_ids) for w in words)


def _curve(log: list[dict[str, Any]], exact: dict[int, float]) -> list[dict[str, float]]:
    """One row per step: the trainer's reward and KL, and the exact match where measured."""
    rows: dict[int, dict[str, float]] = {s: {"step": s} for s in exact}
    for entry in log:
        if "reward" in entry and "step" in entry:
            row = rows.setdefault(entry["step"], {"step": entry["step"]})
            row["reward"] = float(entry["reward"])
            if "kl" in entry:
                row["kl"] = float(entry["kl"])
    for step, value in exact.items():
        rows[step]["exact_match"] = value
    return [rows[s] for s in sorted(rows)]


def plot(run: GRPORun):
    """Mean reward, KL and held-out exact match by step, one panel each."""
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(11, 3.2), constrained_layout=True)
    panels = (
        ("reward", "mean reward (of 1.2)", "C0"),
        ("kl", "KL to the reference", "C1"),
        ("exact_match", "held-out exact match", "C2"),
    )
    for ax, (key, label, color) in zip(axes, panels, strict=True):
        points = [(r["step"], r[key]) for r in run.curve if key in r]
        ax.plot(*zip(*points, strict=True), color=color, marker="o" if len(points) < 20 else None)
        ax.set_xlabel("step")
        ax.set_title(label)
        ax.grid(alpha=0.3)
    axes[2].yaxis.set_major_formatter(plt.FuncFormatter(lambda v, _: f"{v:.0%}"))
    return fig
