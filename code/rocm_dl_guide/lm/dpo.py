"""The ``dpo`` case study: preference tuning with TRL's ``DPOTrainer``.

Direct preference optimisation (Rafailov et al., 2023) trains a policy on pairs
of answers to the same prompt, one preferred (*chosen*) and one not
(*rejected*), against a frozen reference model. Its loss is a logistic loss on
the difference of the two answers' log-probability ratios to the reference,
scaled by β; no reward model is trained and nothing is sampled.

The pairs come from the LoRA page's topic task (:mod:`~rocm_dl_guide.lm.topic_task`):
for a passage, the chosen answer names its topic and the rejected one names
another, the wrong topic the starting model finds likeliest (:func:`pairs`).
The run starts from the LoRA fine-tuned model
(:func:`~rocm_dl_guide.lm.posttrain.start_folder`), which is also the
reference, and measures on held-out passages, before and after: the preference
accuracy (the chosen answer more likely than the rejected one), the
log-probability margin between them, and the task's exact match.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from rocm_dl_guide.core import profiles
from rocm_dl_guide.lm import posttrain, topic_task

RECIPE = {
    "trainer": "TRL DPOTrainer",
    "loss": "DPO's (sigmoid) + SFT on the chosen answer",
    "beta": 0.05,
    "reference": "the starting model, frozen",
    "optimizer": "AdamW",
    "lr": 6e-4,
    "schedule": "linear decay to 0",
    "batch_size": 8,
    "epochs": 2,
    "pairs": "one per training passage",
}
"""DPO's settings, the same on every profile. The whole model is trained (TRL
refuses a LoRA adapter on the output layer, which this small model needs; see
the LoRA page). DPO's loss alone raised the preference accuracy from every
start tried, but it can lower the chosen answer's probability too, only less
than the rejected one's: from a LoRA model at 63% exact match it left 16% (β
0.05) to 58% (β 2). The supervised loss on the chosen answer (:data:`LOSSES`,
as RPO adds it) keeps the answer likely.

Chosen on two CPU cores (AMD EPYC with AVX-512) from two LoRA models of the
LoRA page's recipe (27 and 29 of the 43 held-out passages right), two seeds
each: two passes over every pair raised the held-out preference accuracy by 5
to 11 passages and exact match by 4 to 9. One pass over every other pair, the
earlier recipe, moved the preference accuracy by -1 to +5 passages in four
runs. The page asserts that the preference accuracy and the margin rise and
words exact match from its figures."""
LOSSES = ("sigmoid", "sft")
"""TRL's ``loss_type`` of the main run: DPO's loss and the negative log-likelihood
of the chosen answer, weighted equally."""
SWEEP_LOSSES = ("sigmoid",)
"""The β sweep's: DPO's loss alone, so that only β changes what the policy may do."""
PAIR_STRIDE = 1
"""The main run pairs every :data:`PAIR_STRIDE`-th training passage: all of them."""
SWEEP_PAIR_STRIDE = 2
SWEEP_EPOCHS = 1
"""The β sweep's three runs take every other pair, once: the training passages
slide over the text 8 words at a time, so neighbours share 24 of their 32
words, and the sweep compares β values, not how far training goes."""
SWEEP_BETAS = (0.05, 0.5, 2.0)
"""The β values :func:`beta_sweep` compares."""


@dataclass
class PairScores:
    """A model's preference for the chosen answer over the rejected one, per pair."""

    chosen: torch.Tensor
    rejected: torch.Tensor
    """Log-probabilities of the chosen and the rejected answer words."""

    @property
    def margin(self) -> torch.Tensor:
        return self.chosen - self.rejected

    @property
    def accuracy(self) -> float:
        """Share of pairs whose chosen answer is the likelier."""
        return (self.margin > 0).float().mean().item()


def pairs(
    lm: Any, tokenizer: Any, items: list[topic_task.Example]
) -> tuple[list[dict[str, str]], list[str]]:
    """Preference pairs for ``items`` as TRL reads them (``prompt``, ``chosen``,
    ``rejected``), and each pair's rejected word: the wrong topic that ``lm``
    finds likeliest for that passage, the model's own most tempting mistake."""
    scores = posttrain.answer_scores(lm, tokenizer, items)
    answers = posttrain.words()
    rows, rejected = [], []
    for ex, row in zip(items, scores, strict=True):
        wrong = max((w for w in answers if w != ex.answer), key=lambda w: row[answers.index(w)])
        rejected.append(wrong)
        rows.append(
            {
                "prompt": topic_task.PROMPT.format(passage=ex.passage),
                "chosen": " " + ex.answer,
                "rejected": " " + wrong,
            }
        )
    return rows, rejected


def pair_scores(
    lm: Any, tokenizer: Any, items: list[topic_task.Example], rejected: list[str]
) -> PairScores:
    """``lm``'s log-probabilities of each item's answer and of its ``rejected`` word."""
    scores = posttrain.answer_scores(lm, tokenizer, items)
    answers = posttrain.words()
    chosen = torch.tensor([scores[i, answers.index(ex.answer)] for i, ex in enumerate(items)])
    wrong = torch.tensor([scores[i, answers.index(w)] for i, w in enumerate(rejected)])
    return PairScores(chosen, wrong)


@dataclass
class Measures:
    """What is measured on the held-out passages, before or after."""

    exact_match: float
    preference_accuracy: float
    margin: float
    """The mean log-probability margin, chosen minus rejected (nats)."""


@dataclass
class DPORun:
    """What :func:`train` returns."""

    model: Any
    tokenizer: Any
    before: Measures
    after: Measures
    reward_margin: float
    """The mean DPO reward margin on held-out pairs after training:
    β times the change of the log-probability margin from the reference's."""
    beta: float
    losses: tuple[str, ...]
    history: list[dict[str, Any]]
    """The trainer's log, one dict per step (TRL's ``rewards/margins`` and the rest)."""
    train_size: int
    test_size: int
    start: Path
    resumed_from_step: int = 0
    device: str = "cpu"
    profile: str = "smoke"
    epochs: int = 0
    seconds: float = 0.0
    result: Any = field(default=None, repr=False)

    @property
    def test_accuracy(self) -> float:
        return self.after.exact_match

    def record_fields(self) -> dict[str, Any]:
        """The DPO facts of the ``--json`` record."""
        return {
            "epochs_completed": self.epochs,
            "resumed_from_step": self.resumed_from_step or None,
            "beta": self.beta,
            "losses": list(self.losses),
            "exact_match_before": self.before.exact_match,
            "exact_match_after": self.after.exact_match,
            "preference_accuracy_before": self.before.preference_accuracy,
            "preference_accuracy_after": self.after.preference_accuracy,
            "margin_before": self.before.margin,
            "margin_after": self.after.margin,
            "reward_margin_after": self.reward_margin,
            "train_pairs": self.train_size,
            "train_seconds": self.seconds,
        }

    def summary(self) -> str:
        return (
            f"DPO ({' + '.join(self.losses)} loss, beta {self.beta:g}, {self.profile} profile, "
            f"{self.device}) on "
            f"{self.test_size} held-out passages: preference accuracy "
            f"{self.before.preference_accuracy:.0%} -> {self.after.preference_accuracy:.0%}, "
            f"exact match {self.before.exact_match:.0%} -> {self.after.exact_match:.0%}"
        )


def measure(lm: Any, tokenizer: Any, items: list[topic_task.Example], rejected: list[str]):
    """:class:`Measures` of ``lm`` on ``items`` with their ``rejected`` words, and the
    pair scores they came from."""
    scores = pair_scores(lm, tokenizer, items, rejected)
    return (
        Measures(
            exact_match=topic_task.exact_match(lm, tokenizer, items),
            preference_accuracy=scores.accuracy,
            margin=scores.margin.mean().item(),
        ),
        scores,
    )


@dataclass
class Prepared:
    """What every run from one starting model shares: the model folder, its
    tokenizer, the training pairs, and the held-out passages with their rejected
    words and the starting model's measures on them."""

    start: Path
    tokenizer: Any
    train_rows: list[dict[str, str]]
    test_items: list[topic_task.Example]
    test_rejected: list[str]
    before: Measures
    reference: PairScores
    """The starting model's (the reference's) scores of the held-out pairs."""


def prepare(
    profile: profiles.Profile,
    base: str | Path | None = None,
    train_items: list[topic_task.Example] | None = None,
) -> Prepared:
    """The pairs and the starting model's measures, once for any number of runs
    (:func:`posttrain.start_folder` of ``base``; ``train_items``: every
    :data:`PAIR_STRIDE`-th training passage of the topic task unless given)."""
    from rocm_dl_guide.core import device as devices

    start = posttrain.start_folder(profile, base)
    reference, tokenizer = posttrain.load(start, devices.pick())
    all_train, test_items = topic_task.examples()
    items = all_train[::PAIR_STRIDE] if train_items is None else train_items
    train_rows, _ = pairs(reference, tokenizer, items)
    _, test_rejected = pairs(reference, tokenizer, test_items)
    before, scores = measure(reference, tokenizer, test_items, test_rejected)
    return Prepared(start, tokenizer, train_rows, test_items, test_rejected, before, scores)


def train(
    profile: profiles.Profile,
    epochs: int | None = None,
    checkpoint_dir: Path | None = None,
    resume: bool = False,
    checkpoint_every: int | None = None,
    progress: bool = True,
    beta: float | None = None,
    base: str | Path | None = None,
    seed: int = 0,
    train_items: list[topic_task.Example] | None = None,
    prepared: Prepared | None = None,
    losses: tuple[str, ...] = LOSSES,
) -> DPORun:
    """DPO from :func:`~rocm_dl_guide.lm.posttrain.start_folder` (``base``, else the
    LoRA model) on the topic task's training pairs (``train_items``, by default
    every :data:`PAIR_STRIDE`-th), measured on the held-out ones before and after; ``prepared``
    (:func:`prepare`) instead of ``base`` and ``train_items`` skips scoring the
    pairs again. With ``checkpoint_dir`` the trainer checkpoints in its
    ``trainer`` folder and ``resume`` continues from the last checkpoint there."""
    import time

    from rocm_dl_guide.core import device as devices

    n_epochs = profile.epochs(RECIPE["epochs"], epochs, example="dpo")
    beta = RECIPE["beta"] if beta is None else beta
    dev = devices.pick()
    data = prepared or prepare(profile, base, train_items)
    with posttrain.output_folder(checkpoint_dir) as output:
        settings = posttrain.trainer_settings(dev, output, seed, checkpoint_every, checkpoint_dir)
        with posttrain.quiet(), posttrain.completion_positions_only():
            trainer = dpo_trainer(data.start, data.train_rows, beta, n_epochs, settings, losses)
            began = time.perf_counter()
            resumed = posttrain.fit(trainer, checkpoint_dir, resume, progress)
            seconds = time.perf_counter() - began
    policy = posttrain.causal_lm(trainer.model).eval()
    after, scores = measure(policy, data.tokenizer, data.test_items, data.test_rejected)
    return DPORun(
        model=policy,
        tokenizer=data.tokenizer,
        before=data.before,
        after=after,
        reward_margin=beta * (scores.margin - data.reference.margin).mean().item(),
        beta=beta,
        losses=tuple(losses),
        history=[h for h in trainer.state.log_history if "loss" in h],
        train_size=len(data.train_rows),
        test_size=len(data.test_items),
        start=data.start,
        resumed_from_step=resumed,
        device=str(devices.describe()),
        profile=profile.name,
        epochs=n_epochs,
        seconds=seconds,
    )


def dpo_trainer(start: Path, rows: list[dict[str, str]], beta: float, epochs: int,
                settings: dict[str, Any], losses: tuple[str, ...] = LOSSES):  # fmt: skip
    """TRL's ``DPOTrainer`` for the preference ``rows``, from the model folder
    ``start``; the reference is ``start`` too, frozen (its log-probabilities are
    computed once, before training). ``losses``: TRL's loss types, weighted
    equally (:data:`LOSSES`). ``settings``: :func:`posttrain.trainer_settings`."""
    from datasets import Dataset
    from trl import DPOConfig, DPOTrainer

    config = DPOConfig(
        **settings,
        beta=beta,
        learning_rate=RECIPE["lr"],
        lr_scheduler_type="linear",
        per_device_train_batch_size=RECIPE["batch_size"],
        num_train_epochs=epochs,
        max_length=256,
        precompute_ref_log_probs=True,
        precompute_ref_batch_size=64,
        loss_type=list(losses),
        loss_weights=[1.0] * len(losses),
    )
    return DPOTrainer(
        model=str(start),
        args=config,
        train_dataset=Dataset.from_list(rows),
        processing_class=posttrain.trl_tokenizer(start),
    )


def beta_sweep(
    profile: profiles.Profile, prepared: Prepared, betas: tuple[float, ...] = SWEEP_BETAS
) -> list[DPORun]:
    """One run per β from the same ``prepared`` start with DPO's loss alone
    (:data:`SWEEP_LOSSES`), on every :data:`SWEEP_PAIR_STRIDE`-th of its pairs for
    :data:`SWEEP_EPOCHS` epochs, the rest of the recipe unchanged."""
    fewer = replace(prepared, train_rows=prepared.train_rows[::SWEEP_PAIR_STRIDE])
    return [
        train(
            profile,
            epochs=SWEEP_EPOCHS,
            beta=b,
            prepared=fewer,
            progress=False,
            losses=SWEEP_LOSSES,
        )  # fmt: skip
        for b in betas
    ]


def sweep_table(runs: list[DPORun]):
    """The β sweep as a page shows it: one row per β."""
    import pandas as pd

    return pd.DataFrame(
        {
            "β": [r.beta for r in runs],
            "preference accuracy": [r.after.preference_accuracy for r in runs],
            "exact match": [r.after.exact_match for r in runs],
            "log-probability margin (nats)": [r.after.margin for r in runs],
            "change from the reference (nats)": [r.after.margin - r.before.margin for r in runs],
        }
    )


def plot(run: DPORun, window: int = 8):
    """On the training batches, by step: the mean implicit reward margin (β times
    the change of the chosen-minus-rejected log-ratio from the reference's) and the
    share of pairs whose chosen answer earns the larger implicit reward (thin: each
    step; thick: the mean of the last ``window`` steps)."""
    import matplotlib.pyplot as plt
    import pandas as pd

    log = pd.DataFrame(run.history).set_index("step")
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.2), constrained_layout=True)
    panels = (
        ("rewards/margins", "implicit reward margin"),
        ("rewards/accuracies", "chosen rewarded above rejected"),
    )
    for ax, (key, title) in zip(axes, panels, strict=True):
        ax.plot(log.index, log[key], color="C0", alpha=0.35, linewidth=1)
        ax.plot(log.index, log[key].rolling(window, min_periods=1).mean(), color="C0")
        ax.set_xlabel("step")
        ax.set_title(title)
        ax.grid(alpha=0.3)
    axes[0].axhline(0, color="grey", linestyle="--", linewidth=1)
    axes[1].yaxis.set_major_formatter(plt.FuncFormatter(lambda v, _: f"{v:.0%}"))
    return fig
