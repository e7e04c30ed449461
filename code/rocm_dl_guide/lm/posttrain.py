"""Post-training with TRL: the model DPO and GRPO start from, and what their runs share.

Both :mod:`~rocm_dl_guide.lm.dpo` and :mod:`~rocm_dl_guide.lm.grpo` start from
the LoRA page's fine-tuned model, its adapter merged into the weights and saved
as a ``transformers`` folder (:func:`start_folder`), the usual order of
post-training: supervised fine-tuning first, then preferences or rewards. TRL's
trainers are ``transformers`` trainers; :func:`trainer_settings` gives them the
settings this guide runs them with, :func:`fit` runs one (resuming from its last
complete checkpoint, stopping cleanly on ``SIGTERM`` or Ctrl-C like the guide's
own loop) and :func:`answer_scores` measures a model on the topic task's answers.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import shutil
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch

from rocm_dl_guide.core import files, preemption, profiles
from rocm_dl_guide.core.progress import enabled as bars_enabled
from rocm_dl_guide.core.progress import no_library_bars
from rocm_dl_guide.lm import lora, pretrain, topic_task
from rocm_dl_guide.lm import model as models

START_FOLDER = "sft-model"
"""The merged LoRA model, in the ``posttrain`` runs folder."""
SOURCE_FILE = "rocm_dl_guide_source.json"
"""Written into :data:`START_FOLDER`: the adapter and base it was merged from."""
TRAINER_FOLDER = "trainer"
"""The trainer's checkpoints (``checkpoint-N``), inside a run's checkpoint folder."""
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json",
                   "chat_template.jinja")  # fmt: skip
"""What a model folder's tokenizer is made of (a Hub model's base folder)."""


def start_folder(profile: profiles.Profile, base: str | Path | None = None) -> Path:
    """The model DPO and GRPO start from: a ``transformers`` folder.

    ``base`` is a model folder to start from as it is. Without it: the LoRA run
    of the runs folder (``lora``), its adapter merged into the pretrained model
    (:func:`rocm_dl_guide.lm.lora.merged`) and saved once in the ``posttrain``
    runs folder; LoRA is trained first where its adapter is missing. A folder
    made from an older adapter is made again.
    """
    from rocm_dl_guide.core.runs import runs_dir

    if base is not None:
        folder = Path(base)
        if not (folder / "config.json").is_file():
            raise FileNotFoundError(f"{folder} is not a transformers model folder: no config.json")
        return folder
    adapter = runs_dir("lora") / lora.ADAPTER_DIR
    with files.build_lock(adapter, what="the LoRA adapter"):
        if not (adapter / "adapter_config.json").is_file():
            print(f"no LoRA adapter at {files.shown(adapter)}: fine-tuning it first", flush=True)
            lora.train(profile, checkpoint_dir=adapter.parent, progress=False)
    target = runs_dir("posttrain") / START_FOLDER
    with files.build_lock(target, what="the fine-tuned model"):
        source = _source(profile, adapter)
        marker = target / SOURCE_FILE
        if not (marker.is_file() and json.loads(marker.read_text()) == source):
            merge_adapter(profile, adapter, target, source=source)
    return target


def merge_adapter(
    profile: profiles.Profile,
    adapter: Path,
    target: Path,
    base: str | Path | None = None,
    source: dict[str, Any] | None = None,
) -> Path:
    """The LoRA ``adapter`` merged into its base model (:func:`lora.base_model` of
    ``base``), saved as the model folder ``target`` in one step (complete or absent)."""
    lm, tokenizer, base_path = lora.base_model(profile, base)
    merged = lora.merged(lora.load_adapter(lm, adapter))
    with files.staged_directory(target, "merge") as staged:
        save_model(merged, tokenizer, base_path, staged)
        if source is not None:
            (staged / SOURCE_FILE).write_text(json.dumps(source))
    return target


def _source(profile: profiles.Profile, adapter: Path) -> dict[str, Any]:
    """What a merged folder was made from: the adapter's and the base's files."""
    weights = lora.base_weights(profile, say=False)
    stats = {}
    for path in (adapter / "adapter_model.safetensors", weights):
        if path.is_file():
            stat = path.stat()
            stats[str(path)] = [stat.st_size, stat.st_mtime_ns]
    return stats


def save_model(lm: models.CausalLM, tokenizer: Any, base: Path, folder: Path) -> None:
    """``lm`` as a ``transformers`` folder: tiny-lm's own tokenizer
    (:func:`rocm_dl_guide.lm.pretrain.export`), or the tokenizer files of the
    model folder ``base`` it was fine-tuned from."""
    if not Path(base).is_dir():
        pretrain.export(lm, tokenizer, folder)
        return
    with no_library_bars():
        lm.decoder().save_pretrained(folder)
    for name in TOKENIZER_FILES:
        if (Path(base) / name).is_file():
            shutil.copy2(Path(base) / name, folder / name)


def load(folder: Path, device: torch.device | None = None) -> tuple[models.CausalLM, Any]:
    """A model folder as the topic task measures it: ``(CausalLM, tokenizer)``, in
    evaluation mode on ``device``."""
    lm, tokenizer = lora.from_folder(Path(folder))
    return lm.to(device or "cpu").eval(), tokenizer


def causal_lm(hf: Any) -> models.CausalLM:
    """A trainer's ``transformers`` model as the topic task measures it (no copy)."""
    return models.CausalLM(hf)


def trl_tokenizer(folder: Path) -> Any:
    """The folder's tokenizer as TRL takes it, its end-of-text token as padding."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder)
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok


@contextlib.contextmanager
def output_folder(checkpoint_dir: Path | None) -> Iterator[Path]:
    """Where a trainer writes: the :data:`TRAINER_FOLDER` of ``checkpoint_dir``, or
    without one a temporary folder, removed when the block ends."""
    if checkpoint_dir is not None:
        yield Path(checkpoint_dir) / TRAINER_FOLDER
        return
    with tempfile.TemporaryDirectory(prefix="rocm-dl-guide-trainer-") as tmp:
        yield Path(tmp)


def trainer_settings(
    device: torch.device,
    output_dir: Path,
    seed: int = 0,
    checkpoint_every: int | None = None,
    checkpoint_dir: Path | None = None,
) -> dict[str, Any]:
    """The settings every TRL run of this guide shares (``DPOConfig`` and
    ``GRPOConfig`` take them): bfloat16 on a GPU that has it and float32 on a CPU
    (TRL defaults to bfloat16, which this machine's CPU runs at half the speed),
    where there is a ``checkpoint_dir`` a checkpoint every ``checkpoint_every``
    optimizer steps (else every :data:`CHECKPOINT_EVERY`) keeping the last two
    (without one, none), no logging service, no
    gradient checkpointing (a model this small has the memory)."""
    from rocm_dl_guide.training.setup import autocast_dtype

    gpu = device.type != "cpu"
    return {
        "output_dir": str(output_dir),
        "use_cpu": not gpu,
        "bf16": gpu and autocast_dtype(device) == torch.bfloat16,
        "fp16": False,
        "seed": seed,
        "data_seed": seed,
        "save_strategy": "steps" if checkpoint_dir is not None else "no",
        "save_steps": checkpoint_every or CHECKPOINT_EVERY,
        "save_total_limit": 2,
        "logging_steps": 1,
        "report_to": "none",
        "gradient_checkpointing": False,
        "dataloader_num_workers": 0,
        "disable_tqdm": True,
    }


CHECKPOINT_EVERY = 20
"""Optimizer steps between a run's checkpoints, where ``checkpoint_every`` is not given."""


def last_checkpoint(folder: Path) -> Path | None:
    """The newest complete ``checkpoint-N`` in ``folder`` (one with its
    ``trainer_state.json``, which the trainer writes last), else ``None``."""
    if not Path(folder).is_dir():
        return None
    found = []
    for path in Path(folder).glob("checkpoint-*"):
        step = path.name.removeprefix("checkpoint-")
        if step.isdigit() and (path / "trainer_state.json").is_file():
            found.append((int(step), path))
    return max(found)[1] if found else None


def _progress_callbacks(trainer: Any, progress: bool) -> None:
    """A progress bar for people at a terminal, and no printed log dictionaries."""
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    class Bar(ProgressCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            pass  # the bar only; the figures go to the run's history

    trainer.remove_callback(PrinterCallback)
    trainer.remove_callback(ProgressCallback)
    if bars_enabled(progress):
        trainer.add_callback(Bar())


def fit(trainer: Any, checkpoint_dir: Path | None, resume: bool, progress: bool) -> int:
    """Run a TRL trainer; return the step it resumed from (0: from scratch).

    With ``resume`` it continues from :func:`last_checkpoint` of its output
    folder (from scratch, saying so, where there is none). ``SIGTERM`` and
    ``SIGINT`` end the step in progress, save a checkpoint and raise
    :class:`~rocm_dl_guide.core.preemption.Preempted`, as the guide's loop does.
    Callers build the trainer and run this inside :func:`quiet` and
    :func:`completion_positions_only`, one block for both.
    """
    from transformers import TrainerCallback

    _progress_callbacks(trainer, progress)
    output = Path(trainer.args.output_dir)
    start = last_checkpoint(output) if resume else None
    if resume and start is None:
        print(f"no checkpoint in {files.shown(output)}: starting from scratch", flush=True)
    with preemption.watch() as request:

        class StopOnSignal(TrainerCallback):
            def on_step_end(self, args, state, control, **kwargs):
                if request.requested:
                    control.should_save = checkpoint_dir is not None
                    control.should_training_stop = True
                return control

        trainer.add_callback(StopOnSignal())
        trainer.train(resume_from_checkpoint=str(start) if start else None)
    if request.requested:
        state = trainer.state
        per_epoch = max(1, math.ceil(state.max_steps / max(1, trainer.args.num_train_epochs)))
        epoch = state.global_step // per_epoch + 1
        raise preemption.Preempted(
            request.name,
            state.global_step,
            epoch,
            state.global_step - (epoch - 1) * per_epoch,
            last_checkpoint(output),
        )
    return int(start.name.removeprefix("checkpoint-")) if start else 0


@contextlib.contextmanager
def completion_positions_only() -> Iterator[None]:
    """Make TRL's fused LM head score only the completions' positions on every device.

    TRL's trainers replace the model's LM head with one that computes the
    log-probability of each label in chunks (``add_fused_lm_head``). Where its
    Triton kernels run (CUDA, which is ROCm's too, and XPU) it scores only the
    positions that have a label, the completion's. Elsewhere it scores every
    position and masks the prompt's afterwards, so that a compiler sees the same
    shapes every batch. On a CPU that is pure waste here: a one-token answer
    after a prompt of about 55 tokens costs 56 times the LM head's work, more
    than half of a GRPO step. Inside this block TRL takes its own compact path
    with its own PyTorch code; the log-probabilities are the same (a test
    compares them). It covers a trainer's construction too, where DPO scores
    the reference's log-probabilities once. With a TRL that lacks the switch,
    nothing changes."""
    from trl.trainer import utils as trl_utils

    switch = getattr(trl_utils, "_use_triton", None)
    if switch is None:
        yield
        return
    # the compact path; the kernels themselves still pick Triton or PyTorch by device
    trl_utils._use_triton = lambda device: True
    try:
        yield
    finally:
        trl_utils._use_triton = switch


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """No notices from ``transformers``, TRL and ``datasets`` that do not concern
    the reader: their progress bars, the deprecation warnings they raise about
    each other, and the logged advice that a CPU run could use a GPU."""
    import datasets
    import transformers

    datasets.disable_progress_bars()
    bars = os.environ.get("TQDM_DISABLE")
    os.environ["TQDM_DISABLE"] = "1"  # TRL's bar over the reference's log-probabilities
    level = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()
    trl_logger = logging.getLogger("trl")
    trl_level = trl_logger.level
    trl_logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings(), no_library_bars():
            warnings.simplefilter("ignore", FutureWarning)
            warnings.simplefilter("ignore", UserWarning)
            yield
    finally:
        transformers.logging.set_verbosity(level)
        trl_logger.setLevel(trl_level)
        if bars is None:
            os.environ.pop("TQDM_DISABLE", None)
        else:
            os.environ["TQDM_DISABLE"] = bars


def answer_scores(
    lm: models.CausalLM, tokenizer: Any, items: list[topic_task.Example], batch: int = 64
) -> torch.Tensor:
    """The log-probability of each topic's answer word after each item's prompt:
    ``(len(items), len(words()))``, summed over the word's tokens. Where every
    word is one token (tiny-lm's vocabulary), one pass over the prompt scores
    all of them; else each prompt and word are scored in one pass, right-padded
    (the attention is causal, so padding changes nothing before it)."""
    answers = [topic_task.answer_ids(tokenizer, w) for w in words()]
    prompts = [tokenizer.encode(topic_task.PROMPT.format(passage=ex.passage)).ids for ex in items]
    if all(len(a) == 1 for a in answers):
        rows = [(p, len(p), []) for p in prompts]  # the last position predicts every word
        firsts = torch.tensor([a[0] for a in answers])
        logp = _score_rows(lm, tokenizer, rows, batch, lambda lp, start, _: lp[:, start - 1])
        return torch.stack(logp)[:, firsts]
    rows = [(p + a, len(p), a) for p in prompts for a in answers]

    def word(lp: torch.Tensor, start: int, answer: list[int]) -> torch.Tensor:
        positions = torch.arange(start - 1, start - 1 + len(answer))
        return lp[torch.tensor(answer), positions].sum()

    scores = _score_rows(lm, tokenizer, rows, batch, word)
    return torch.stack(scores).view(len(items), len(answers))


def _score_rows(lm, tokenizer, rows, batch, pick) -> list[torch.Tensor]:
    """``pick(log_probs, start, answer)`` of each row ``(ids, start, answer)``,
    the rows run ``batch`` at a time, right-padded with the end-of-text token."""
    from rocm_dl_guide.lm import corpus as corpora

    pad = tokenizer.token_to_id(corpora.END_OF_TEXT) or 0
    device = next(lm.parameters()).device
    out = []
    lm.eval()
    with torch.no_grad():
        for i in range(0, len(rows), batch):
            chunk = rows[i : i + batch]
            width = max(len(r[0]) for r in chunk)
            ids = torch.tensor([r[0] + [pad] * (width - len(r[0])) for r in chunk], device=device)
            logp = lm(ids).float().log_softmax(dim=1).cpu()  # (batch, vocab, time)
            out += [pick(logp[j], start, answer) for j, (_, start, answer) in enumerate(chunk)]
    return out


def words() -> list[str]:
    """The topic task's answer words, in a fixed order (the columns of :func:`answer_scores`)."""
    return sorted(set(topic_task.TOPICS.values()))
