"""The LoRA chapter's task: name the topic of a passage, and how well a model does.

The task has a right answer: name the topic of a passage of the Python
documentation, one of four, with one word (``... Topic: exceptions``). The
passages come from Python's own ``pydoc_data`` (offline); some are held out
(:func:`spans`). Exact match is measured on held-out passages before and after
fine-tuning (:func:`exact_match`): the greedy continuation must be the whole
answer word. The loss counts only the answer's tokens (the prompt's labels are
``-100``, which PyTorch's cross-entropy ignores; :class:`TopicPrompts`), so the
model learns to answer, not to re-predict the passage.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch.utils.data import Dataset

from rocm_dl_guide.lm import corpus as corpora
from rocm_dl_guide.lm import model as models

TOPICS = {
    "formatstrings": "format",
    "typesmapping": "dictionaries",
    "import": "import",
    "try": "exceptions",
}
"""Documentation topic -> the answer word the model must give (one token in
tiny-lm's vocabulary; SmolLM2's may split a word into several)."""
WORDS_PER_PASSAGE = 32
BLOCKS_PER_TOPIC = 48
"""Each topic's text is cut into blocks of 32 words; the first 48 count."""
TEST_EVERY = 4
"""Every fourth block of a topic is held out for the exact-match test."""
STRIDE = 8
"""Training passages slide over the other blocks 8 words at a time (four per
block), never reaching into a held-out block."""
PROMPT = "{passage}\nTopic:"


@dataclass(frozen=True)
class Example:
    passage: str
    answer: str


def spans(words: int) -> tuple[list[int], list[int]]:
    """Start offsets (in words) of the training and the held-out passages of a topic
    of ``words`` words: held-out passages are whole blocks; training passages slide
    over the other blocks and never reach into a held-out one."""
    n = WORDS_PER_PASSAGE
    blocks = min(BLOCKS_PER_TOPIC, words // n)
    held_out = [b * n for b in range(blocks) if b % TEST_EVERY == TEST_EVERY - 1]
    train = [
        start
        for b in range(blocks)
        if b % TEST_EVERY != TEST_EVERY - 1
        for start in range(b * n, (b + 1) * n, STRIDE)
        if (start + n - 1) // n < blocks and ((start + n - 1) // n) % TEST_EVERY != TEST_EVERY - 1
    ]
    return train, held_out


def examples() -> tuple[list[Example], list[Example]]:
    """(train, test) passages of the four topics, with their answers (see :func:`spans`)."""
    from pydoc_data.topics import topics

    train, test = [], []
    for topic, answer in TOPICS.items():
        words = topics[topic].split()
        starts, held_out = spans(len(words))
        n = WORDS_PER_PASSAGE
        train += [Example(" ".join(words[s : s + n]), answer) for s in starts]
        test += [Example(" ".join(words[s : s + n]), answer) for s in held_out]
    return train, test


class TopicPrompts(Dataset):
    """Prompt + answer tokens, padded to ``length`` (by default the longest prompt's
    and answer's): ``(inputs, labels)`` where only the positions that predict the
    answer's tokens have labels; the others are the loop's ignored label."""

    def __init__(self, items: list[Example], tokenizer: Any, length: int | None = None) -> None:
        from rocm_dl_guide.training.metrics import IGNORE_INDEX

        prompts = [tokenizer.encode(PROMPT.format(passage=ex.passage)).ids for ex in items]
        answers = [answer_ids(tokenizer, ex.answer) for ex in items]
        length = length or max(len(p) for p in prompts) + max(len(a) for a in answers)
        pad = tokenizer.token_to_id(corpora.END_OF_TEXT) or 0  # never labelled, never attended
        self.rows = []
        for prompt, answer in zip(prompts, answers, strict=True):
            prompt = prompt[-(length - len(answer)) :]
            ids = prompt + answer + [pad] * (length - len(prompt) - len(answer))
            y = torch.full((length,), IGNORE_INDEX)
            start = len(prompt) - 1  # the position that predicts the answer's first token
            y[start : start + len(answer)] = torch.tensor(answer)
            self.rows.append((torch.tensor(ids), y))

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.rows[i]

    @property
    def mean_tokens(self) -> float:
        """Prompt and answer tokens per example, padding not counted."""
        from rocm_dl_guide.training.metrics import IGNORE_INDEX

        ends = [int((y != IGNORE_INDEX).nonzero().max()) + 2 for _, y in self.rows]
        return sum(ends) / len(ends)

    @staticmethod
    def collate(batch: list[tuple[torch.Tensor, torch.Tensor]]) -> tuple[torch.Tensor, ...]:
        """Stack a batch and cut the padding no row of it needs (dynamic padding): the
        inputs end at the last labelled position, since later positions predict
        nothing and, the attention being causal, change nothing before them."""
        from rocm_dl_guide.training.metrics import IGNORE_INDEX

        x, y = torch.stack([r[0] for r in batch]), torch.stack([r[1] for r in batch])
        end = int((y != IGNORE_INDEX).any(dim=0).nonzero().max()) + 1
        return x[:, :end], y[:, :end]


def answer_ids(tokenizer: Any, word: str) -> list[int]:
    """The tokens of the answer ``word`` as it follows ``Topic:`` (with its space)."""
    return tokenizer.encode(" " + word, add_special_tokens=False).ids


def exact_match(model: models.CausalLM, tokenizer: Any, items: list[Example]) -> float:
    """Share of ``items`` whose greedy continuation of the prompt is the whole answer."""
    device = next(model.parameters()).device
    hits = 0
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            for ex in items:
                ids = torch.tensor([tokenizer.encode(PROMPT.format(passage=ex.passage)).ids])
                ids = ids.to(device)
                for want in answer_ids(tokenizer, ex.answer):
                    guess = model(ids)[0, :, -1].argmax()
                    if guess.item() != want:
                        break
                    ids = torch.cat([ids, guess.view(1, 1)], dim=1)
                else:
                    hits += 1
    finally:
        model.train(was_training)
    return hits / len(items)


def majority(items: list[Example]) -> float:
    """The share of the most common answer: what always giving it would score."""
    answers = [ex.answer for ex in items]
    return max(answers.count(a) for a in set(answers)) / len(answers)
