"""Speculative decoding: a cheap guesser proposes tokens, the target checks them at once.

Greedy decoding runs the target model once per new token. Speculative decoding
(Leviathan et al. 2023; Chen et al. 2023) lets something cheaper
guess the next ``gamma`` tokens, then runs the target once over all of them:
the target keeps the guesses up to the first one it would not have chosen
itself, and adds its own token after them. Greedy outputs are therefore the
target's own, token for token; only the number of target calls changes.

Two guessers, both ``transformers``' own (``generate``'s assisted generation):

- a **draft model** (``assistant_model=``): a small decoder that shares the
  target's tokenizer, here one layer of width 64 (:data:`DRAFT_SIZE`) trained
  on the chapter's corpus (:func:`draft_model`, cached in the runs folder);
- **prompt lookup** (``prompt_lookup_num_tokens=``): the guess is what
  followed the last few tokens where they last occurred in the text so far
  (prompt and output), a string search instead of a model.

:func:`run` generates once with either and counts, per verification round,
the tokens proposed and the tokens the target accepted (:class:`Rounds`);
:func:`compare` times plain greedy decoding and every configuration side by
side (warm-up first, interleaved repeats, medians); :func:`expected_speedup`
is Leviathan et al.'s formula for comparison.
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

from rocm_dl_guide.core import profiles
from rocm_dl_guide.core.messages import quiet_log_notice
from rocm_dl_guide.lm import corpus as corpora
from rocm_dl_guide.lm import model as models
from rocm_dl_guide.lm import pretrain

# Assisted generation calls the draft's own ``generate`` with the target's
# settings and length rules, and ``transformers`` then warns about its own
# internal call (the settings passed twice); nothing a reader can change.
for _notice in ("was also created in `.generate()`", "together with generation-related"):
    quiet_log_notice("transformers.generation.utils", _notice)

DRAFT_SIZE = models.ModelSize(layers=1, width=64, heads=2, ffn=172, context=128)
"""The draft: one layer of width 64 (0.3M parameters besides its 4,096 x 64
embedding table). At batch 1 on a CPU a decoding step costs mostly the fixed
work of running each layer's operators, so a step's cost follows the number of
layers: one layer is the cheapest draft there is.

Deeper targets do not make it pay within a page's time. Measured on two CPU
cores (AMD EPYC with AVX-512), with this draft: targets of 12 layers of width
64 and of 8 layers of width 96, trained like the draft (about 19 s each),
brought ``c`` down to 0.24 and 0.33, but the draft agreed with them less
(α 0.34 at γ = 1, against about 0.5 for the chapter's model), and assisted
decoding ran at 0.71 and 0.60 times greedy's speed. Each round of
``transformers``' assisted generation also calls the draft's ``generate`` anew,
a fixed cost the formula leaves out."""
DRAFT_RECIPE = {"epochs": 2, "batch": 8, "lr": 3e-3, "warmup_steps": 20, "seed": 0}
"""How the draft is trained: two passes over the corpus the target was
pretrained on, AdamW with warm-up and cosine decay (the pretraining page's
recipe at its peak learning rate). Two cores take about 5 s."""
DRAFT_FOLDER = "draft-{profile}"
"""The trained draft's ``transformers`` folder, under ``runs/speculative``."""
RECIPE_FILE = "rocm_dl_guide_draft.json"
"""Written into that folder: the size and recipe it was trained with (a folder
trained with another is trained again)."""
DRAFT_TOKENS = {"draft model": (1, 2, 4), "prompt lookup": (1, 2, 4, 8)}
"""The sweep over ``gamma``, the number of tokens guessed per round, per method.
The draft model stops at 4: at batch 1 on a CPU each guess costs it half a
target step, and 8 guesses a round took longer than the rest of its sweep."""
NEW_TOKENS = {"smoke": 48, "gpu": 128}
"""New tokens per generation, per profile (``full`` takes ``gpu``'s)."""
METHODS = ("greedy", "draft model", "prompt lookup")
PROMPTS = (corpora.PROMPT, pretrain.SAMPLE_PROMPTS[1])
"""The texts the page, ``bench llm`` and the selfcheck continue: the chapter's
prompt and one of the pretraining page's sample prompts."""


def prompt_ids(tokenizer: Any, device: Any = None) -> list[torch.Tensor]:
    """:data:`PROMPTS` as token ids, one ``(1, length)`` tensor each."""
    return [torch.tensor([tokenizer.encode(t).ids], device=device) for t in PROMPTS]


def check_tokenizers(target_tokenizer: Any, draft_tokenizer: Any) -> None:
    """Raise one :class:`ValueError` unless both ``tokenizers`` tokenizers map every
    text piece to the same id. Assisted generation hands the draft's token ids to
    the target as they are, so a draft with another vocabulary would propose
    tokens that mean something else to the target."""
    target, draft = target_tokenizer.get_vocab(), draft_tokenizer.get_vocab()
    if target == draft:
        return
    differ = sum(draft.get(piece) != i for piece, i in target.items())
    raise ValueError(
        f"the draft's tokenizer is not the target's ({len(draft):,} tokens against "
        f"{len(target):,}; {differ:,} of the target's tokens have another id or none): "
        "assisted generation passes the draft's token ids to the target unchanged, so "
        "the two must share one tokenizer. Train the draft on the target's tokenizer "
        "(`--draft smoke` trains one for the model's own tokenizer)"
    )


def configure(draft: Any, gamma: int) -> Any:
    """Make ``draft`` guess exactly ``gamma`` tokens per round. ``transformers``
    reads these from the draft's own generation configuration, not from the
    arguments of the target's ``generate``: the default schedule changes
    ``gamma`` as rounds succeed or fail, and the draft stops early where it is
    unsure (a confidence threshold); both are turned off here."""
    if gamma < 1:
        raise ValueError(f"the draft must guess at least 1 token a round, got {gamma}")
    config = draft.generation_config
    config.num_assistant_tokens = gamma
    config.num_assistant_tokens_schedule = "constant"
    config.assistant_confidence_threshold = 0.0
    return draft


class Rounds:
    """What one generation's verification rounds proposed and accepted.

    A forward pre-hook on the target notes how many positions each of its calls
    runs, and ``generate``'s streamer hook receives the tokens each round keeps.
    Round ``i`` runs the ``p_i`` guessed tokens plus the last kept one (the
    first round: the prompt and its guesses), and keeps ``k_i`` tokens: the
    ``k_i - 1`` guesses the target agreed with and its own next token. So
    ``accepted = sum(k_i - 1)`` and ``proposed = sum(p_i)``. Plain greedy
    decoding is rounds of one position and no guess.
    """

    def __init__(self, target: Any, prompt_length: int) -> None:
        self.prompt_length = prompt_length
        self.positions: list[int] = []
        self.kept: list[int] = []
        self._prompt_seen = False
        self._hook = target.register_forward_pre_hook(self._note, with_kwargs=True)

    def _note(self, module: Any, args: tuple, kwargs: dict) -> None:
        ids = kwargs.get("input_ids", args[0] if args else None)
        self.positions.append(int(ids.shape[-1]))

    def put(self, value: torch.Tensor) -> None:
        if not self._prompt_seen:
            self._prompt_seen = True
            return
        self.kept.append(int(value.shape[-1]))

    def end(self) -> None:
        """``generate``'s end-of-stream call; the hook comes off."""
        self._hook.remove()

    @property
    def proposed(self) -> int:
        if not self.positions:
            return 0
        return self.positions[0] - self.prompt_length + sum(p - 1 for p in self.positions[1:])

    @property
    def accepted(self) -> int:
        return sum(k - 1 for k in self.kept)


def run(
    target: Any,
    prompt: torch.Tensor,
    new_tokens: int,
    method: str = "greedy",
    gamma: int = 4,
    draft: Any = None,
) -> tuple[torch.Tensor, Rounds, float]:
    """One greedy generation of exactly ``new_tokens`` after ``prompt`` (1, length)
    by ``method``: ``greedy`` (the target alone), ``draft model`` (``draft``
    guesses ``gamma`` tokens a round) or ``prompt lookup`` (up to ``gamma``).
    Returns the new tokens, the :class:`Rounds` and the seconds it took."""
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}: one of {', '.join(METHODS)}")
    kwargs: dict[str, Any] = {}
    if method == "draft model":
        if draft is None:
            raise ValueError("the draft-model method needs a draft")
        kwargs["assistant_model"] = configure(draft, gamma)
    elif method == "prompt lookup":
        kwargs["prompt_lookup_num_tokens"] = gamma
    rounds = Rounds(target, prompt.shape[1])
    start = time.perf_counter()
    with torch.no_grad():
        out = target.generate(
            prompt,
            attention_mask=torch.ones_like(prompt),
            max_new_tokens=new_tokens,
            min_new_tokens=new_tokens,
            do_sample=False,
            pad_token_id=target.config.pad_token_id,
            streamer=rounds,
            **kwargs,
        )
    seconds = time.perf_counter() - start
    return out[0, prompt.shape[1] :], rounds, seconds


@dataclass
class SpecRow:
    """One configuration, over every prompt: medians of the repeats."""

    method: str
    gamma: int
    """Tokens guessed per round (0 for greedy)."""
    new_tokens: int
    """Over all prompts."""
    tokens_per_s: float
    ms: float
    """All prompts' generations, the median repeat."""
    speedup: float
    """Greedy's time over this one's."""
    acceptance_rate: float | None
    """Guesses the target accepted over guesses made (``None``: none made)."""
    tokens_per_round: float
    """New tokens per target call."""
    identical: bool
    """Every prompt's tokens equal greedy decoding's, in every repeat."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


COLUMNS = {
    "method": "method",
    "gamma": "draft tokens (γ)",
    "tokens_per_s": "tokens/s",
    "speedup": "speed-up",
    "acceptance_rate": "acceptance rate (α)",
    "tokens_per_round": "tokens per target call",
    "identical": "same tokens as greedy",
}
""":class:`SpecRow`'s fields with the headers a page shows them under."""
TABLE_FORMATS = {"tokens/s": "{:,.0f}", "speed-up": "{:.2f}x", "acceptance rate (α)": "{:.0%}",
                 "tokens per target call": "{:.2f}"}  # fmt: skip
"""How the page's table prints each figure column."""


def table(rows: list[SpecRow]):
    """``rows`` as a page shows them (a pandas DataFrame under :data:`COLUMNS`)."""
    import pandas as pd

    frame = pd.DataFrame([r.to_dict() for r in rows])[list(COLUMNS)]
    return frame.rename(columns=COLUMNS)


def compare(
    target: Any,
    prompts: list[torch.Tensor],
    new_tokens: int,
    configs: list[tuple[str, int]],
    draft: Any = None,
    repeats: int = 3,
) -> list[SpecRow]:
    """Time greedy decoding and every ``(method, gamma)`` of ``configs`` on every
    prompt, side by side: each configuration is first warmed up once, then the
    repeats take turns (greedy, each configuration, greedy again, ``repeats``
    times), so that a slow spell of the machine falls on all of them alike and no
    single greedy run sets the baseline. Each row holds the median repeat's time
    (greedy's over both of its runs per repeat) and the counts of the rounds;
    greedy comes first."""
    everything = [("greedy", 0), *configs]
    for method, gamma in everything:  # warm-up: the first calls allocate and load code
        run(target, prompts[0], min(new_tokens, 8), method, max(gamma, 1), draft)
    times: dict[tuple[str, int], list[float]] = {c: [] for c in everything}
    counts: dict[tuple[str, int], list[int]] = {}
    same = dict.fromkeys(everything, True)
    reference: list[list[int]] = []
    for _ in range(repeats):
        for config in [*everything, everything[0]]:  # greedy opens and closes each repeat
            method, gamma = config
            seconds, rounds, proposed, accepted = 0.0, 0, 0, 0
            for i, prompt in enumerate(prompts):
                tokens, counted, took = run(
                    target, prompt, new_tokens, method, max(gamma, 1), draft
                )
                if config == ("greedy", 0) and len(reference) < len(prompts):
                    reference.append(tokens.tolist())
                same[config] &= tokens.tolist() == reference[i]
                seconds += took
                rounds += len(counted.kept)
                proposed += counted.proposed
                accepted += counted.accepted
            times[config].append(seconds)
            counts[config] = [rounds, proposed, accepted]
    greedy = statistics.median(times[("greedy", 0)])
    rows = []
    total = new_tokens * len(prompts)
    for config in everything:
        median = statistics.median(times[config])
        rounds, proposed, accepted = counts[config]
        rows.append(
            SpecRow(
                method=config[0],
                gamma=config[1],
                new_tokens=total,
                tokens_per_s=total / median,
                ms=median * 1e3,
                speedup=greedy / median,
                acceptance_rate=accepted / proposed if proposed else None,
                tokens_per_round=total / rounds,
                identical=same[config],
            )
        )
    return rows


def sweep(draft: bool = True) -> list[tuple[str, int]]:
    """The configurations of :func:`compare`: each method at each ``gamma`` of
    :data:`DRAFT_TOKENS` (without ``draft``, prompt lookup only)."""
    methods = ("draft model", "prompt lookup") if draft else ("prompt lookup",)
    return [(method, gamma) for method in methods for gamma in DRAFT_TOKENS[method]]


def best(rows: list[SpecRow]) -> SpecRow:
    """The fastest configuration of ``rows`` other than greedy decoding."""
    return max((r for r in rows if r.method != "greedy"), key=lambda r: r.speedup)


def versus_greedy(
    target: Any,
    tokenizer: Any,
    prompt: str,
    new_tokens: int,
    method: str,
    gamma: int,
    draft: Any = None,
    repeats: int = 3,
) -> dict[str, Any]:
    """What ``generate --draft`` and ``--prompt-lookup`` print: ``prompt`` (text)
    continued by ``method`` with ``gamma`` guesses a round, timed against plain
    greedy decoding of the target (:func:`compare`), as one JSON-ready dict."""
    ids = tokenizer.encode(prompt).ids
    if not ids:
        raise ValueError("the prompt is empty: give some text to continue")
    prompt_ids = torch.tensor([ids], device=next(target.parameters()).device)
    greedy, row = compare(target, [prompt_ids], new_tokens, [(method, gamma)], draft, repeats)
    tokens, _, _ = run(target, prompt_ids, new_tokens, method, gamma, draft)
    return {
        "prompt": prompt,
        "text": tokenizer.decode(tokens.tolist()),
        **row.to_dict(),
        "greedy_tokens_per_s": greedy.tokens_per_s,
    }


def cost_ratio(
    target: Any, draft: Any, prompt: torch.Tensor, new_tokens: int, repeats: int = 3
) -> float:
    """``c``: the draft's time per token over the target's, each decoding greedily
    alone at batch 1 (:func:`run`), after a warm-up, taking turns, medians of
    ``repeats``."""
    times: dict[int, list[float]] = {0: [], 1: []}
    for model in (draft, target):
        run(model, prompt, min(new_tokens, 8))
    for _ in range(repeats):
        for i, model in enumerate((draft, target)):
            times[i].append(run(model, prompt, new_tokens)[2])
    return statistics.median(times[0]) / statistics.median(times[1])


def expected_tokens(alpha: float, gamma: int) -> float:
    """Leviathan et al.'s expected tokens per target call, ``(1 - α^(γ+1)) / (1 - α)``,
    where each guess is accepted with probability ``alpha``, independently."""
    if alpha >= 1:
        return gamma + 1.0
    return (1 - alpha ** (gamma + 1)) / (1 - alpha)


def expected_speedup(alpha: float, gamma: int, c: float) -> float:
    """Their expected improvement in wall time, ``(1 - α^(γ+1)) / ((1 - α)(γc + 1))``:
    a round costs ``gamma`` draft steps of ``c`` target steps each, plus one
    target call (assumed to cost one step however many tokens it checks)."""
    return expected_tokens(alpha, gamma) / (gamma * c + 1)


# --------------------------------------------------------------------------- the draft


def draft_folder(profile: profiles.Profile) -> Path:
    """Where the draft of ``profile`` is kept: ``runs/speculative/draft-PROFILE``."""
    from rocm_dl_guide.core.runs import runs_dir

    return runs_dir("speculative") / DRAFT_FOLDER.format(profile=profile.name)


def _recipe(tokenizer: Any) -> dict[str, Any]:
    vocabulary = json.dumps(tokenizer.get_vocab(), sort_keys=True).encode()
    digest = hashlib.sha256(vocabulary).hexdigest()[:16]
    return {"size": asdict(DRAFT_SIZE), **DRAFT_RECIPE, "vocabulary": digest}


def _current(folder: Path, tokenizer: Any) -> bool:
    marker = folder / RECIPE_FILE
    return marker.is_file() and json.loads(marker.read_text()) == _recipe(tokenizer)


def draft_model(profile: profiles.Profile, device: Any = None, tokenizer: Any = None):
    """The draft for a target with ``tokenizer`` (default: tiny-lm's, the corpus's
    own) and its tokenizer, ``(model, tokenizer, seconds)``: loaded from
    :func:`draft_folder`, or trained first on ``profile``'s corpus (``seconds``:
    the training time, 0 when it was loaded). One process trains at a time;
    others wait for it and load its folder."""
    from rocm_dl_guide.core import files
    from rocm_dl_guide.lm import lora

    folder = draft_folder(profile)
    tokenizer = tokenizer or pretrain.load(profile).tokenizer
    seconds = 0.0
    with files.build_lock(folder, what="the speculative-decoding draft"):
        if not _current(folder, tokenizer):
            start = time.perf_counter()
            lm, tokenizer = train_draft(profile, tokenizer)
            seconds = time.perf_counter() - start
            with files.staged_directory(folder, "export") as staged:
                pretrain.export(lm, tokenizer, staged)
                (staged / RECIPE_FILE).write_text(json.dumps(_recipe(tokenizer)))
        # loaded under the lock: what was checked is what is loaded, even if
        # another process retrains the folder for another tokenizer right after
        lm, tokenizer = lora.from_folder(folder)
    return _placed(lm.decoder(), device), tokenizer, seconds


def load_draft(path: str | os.PathLike, device: Any = None):
    """A draft from a ``transformers`` model folder: ``(model, tokenizer)``."""
    from rocm_dl_guide.lm import lora

    lm, tokenizer = lora.from_folder(Path(path))
    return _placed(lm.decoder(), device), tokenizer


def _placed(decoder: Any, device: Any) -> Any:
    from rocm_dl_guide.core import device as devices
    from rocm_dl_guide.lm import attention

    dev = torch.device(device) if device is not None else devices.pick()
    return decoder.to(dev, attention.default_dtype(dev)).eval()


def train_draft(profile: profiles.Profile, tokenizer: Any = None):
    """Train a decoder of :data:`DRAFT_SIZE` on ``profile``'s corpus, tokenized by
    the target's ``tokenizer`` (default: the corpus's own, tiny-lm's), with
    :data:`DRAFT_RECIPE`; returns ``(lm, tokenizer)``."""
    from torch.utils.data import DataLoader

    from rocm_dl_guide.core import device as devices

    data = pretrain.load(profile)
    tokenizer = tokenizer or data.tokenizer
    tokens = corpora.encode_documents(tokenizer, data.corpus.train)
    loader = DataLoader(
        pretrain.TokenBlocks(tokens, DRAFT_SIZE.context),
        batch_size=DRAFT_RECIPE["batch"],
        shuffle=True,
        generator=torch.Generator().manual_seed(DRAFT_RECIPE["seed"]),
    )
    vocab = tokenizer.get_vocab_size()
    eos = tokenizer.token_to_id(corpora.END_OF_TEXT) or 0
    dev = devices.pick()
    lm = models.build(DRAFT_SIZE, vocab, eos, seed=DRAFT_RECIPE["seed"]).to(dev)
    optimizer = models.optimizer(
        lm.parameters(),
        lr=DRAFT_RECIPE["lr"],
        betas=pretrain.RECIPE["betas"],
        weight_decay=pretrain.RECIPE["weight_decay"],
    )
    steps = DRAFT_RECIPE["epochs"] * len(loader)
    schedule = pretrain.cosine_schedule(optimizer, steps, DRAFT_RECIPE["warmup_steps"])
    lm.train()
    for _ in range(DRAFT_RECIPE["epochs"]):
        for inputs, targets in loader:
            loss = models.next_token_loss(lm(inputs.to(dev)), targets.to(dev))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            schedule.step()
    return lm.eval(), tokenizer


# --------------------------------------------------------------------------- on a GPU

ENGINE_COMMANDS = {
    "vLLM, draft model": (
        "vllm serve TARGET --speculative-config "
        '\'{"method": "draft_model", "model": "DRAFT", "num_speculative_tokens": 4}\''
    ),
    "vLLM, n-gram (prompt lookup)": (
        "vllm serve TARGET --speculative-config "
        '\'{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4}\''
    ),
    "SGLang, draft model": (
        "python -m sglang.launch_server --model-path TARGET "
        "--speculative-algorithm STANDALONE --speculative-draft-model-path DRAFT "
        "--speculative-num-steps 4 --speculative-eagle-topk 1 --speculative-num-draft-tokens 5"
    ),
}
"""The serving engines' speculative decoding, as their documentation spells it
(vLLM's and SGLang's speculative-decoding pages): vLLM takes one JSON
``--speculative-config`` (``method`` ``draft_model`` with the draft's ``model``,
or ``ngram``, its prompt lookup); SGLang takes ``--speculative-algorithm``
(``STANDALONE`` for a separate draft model) and the draft's path, with the
draft's steps per round, its branching (``topk`` 1: one chain of guesses, as
here) and the tokens verified per round. Not run here: no engine is installed."""
ENGINE_FLAGS = {
    "vllm": ("--speculative-config", '"method"', '"num_speculative_tokens"',
             '"prompt_lookup_max"', '"draft_model"', '"ngram"'),
    "sglang": ("--speculative-algorithm", "--speculative-draft-model-path",
               "--speculative-num-steps", "--speculative-eagle-topk",
               "--speculative-num-draft-tokens", "STANDALONE"),
}  # fmt: skip
"""The option names :data:`ENGINE_COMMANDS` uses, as each engine's documentation
names them (checked against the commands by the tests)."""
