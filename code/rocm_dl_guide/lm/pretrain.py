"""The ``tiny-lm`` case study: pretrain a small Llama-style decoder from scratch.

The text is :func:`rocm_dl_guide.lm.corpus.for_profile`'s (Python's
documentation offline, WikiText-2 from the Hub on the ``real`` data source),
tokenized with the corpus's byte-level BPE and cut into blocks of the model's context length; the
model is :mod:`rocm_dl_guide.lm.model`'s; the loop is the guide's one loop
(:func:`rocm_dl_guide.training.train.fit`), with AdamW, warm-up and cosine decay, so it
gets mixed precision, atomic checkpoints, resume, preemption, ``--nproc`` DDP
and FSDP2 (sharded per transformer block) like the image case studies.

The held-out perplexity (``exp`` of the mean cross-entropy per token on the
held-out topics) is compared with two baselines: the untrained model (close to
the vocabulary size: it guesses uniformly) and a unigram model, which predicts
every token with its frequency in the training split and ignores the context.
Beating the unigram model is what shows the model learnt to use the context.
"""

from __future__ import annotations

import json
import math
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset

from rocm_dl_guide.core import distributed, files, profiles
from rocm_dl_guide.core.progress import no_library_bars
from rocm_dl_guide.lm import corpus as corpora
from rocm_dl_guide.lm import model as models

VOCAB_SIZE = 4096
RECIPE = {
    "optimizer": "AdamW",
    "lr": 6e-4,
    "betas": (0.9, 0.95),
    "weight_decay": 0.1,
    "warmup_steps": 20,
    "schedule": "linear warm-up, then cosine decay to 10% of lr",
    "batch_size": 64,
    "epochs": 30,
    "vocab_size": VOCAB_SIZE,
}
"""The ``full`` profile's hyperparameters (nanoGPT's for GPT-2 small)."""
LEARNING_RATES = {"smoke": 3e-3, "gpu": 3e-3}
"""Peak learning rates that differ from the recipe's: a model 40 times smaller
trains better with a higher one (3e-3 on both, chosen by trying a few: on two
CPU cores at 4 sequences a step, 5e-3 and 1e-2 did worse at 8)."""
BATCH_SIZES = {"smoke": 4, "gpu": 16}
"""Sequences per step and per process, where it differs from the recipe's. The
corpus holds about 100,000 training tokens, so the recipe's 64 sequences of 256
tokens make an epoch of a few steps, too few updates for the small profiles;
two CPU cores process about as many tokens a second at 4 sequences a step as at
16, so the ``smoke`` profile takes the smaller batch and four times the updates
(chosen by timing several batch sizes and learning rates side by side against
held-out perplexity). Passes over the corpus: :data:`RECIPE`'s, capped per
profile by the case-study registry (``casestudies.get("tiny-lm").epoch_caps``)."""


def settings(profile: profiles.Profile) -> dict[str, Any]:
    """The training settings of ``profile``: sequences and tokens per step, peak
    learning rate and passes over the corpus (before ``--epochs``)."""
    batch = BATCH_SIZES.get(profile.name, RECIPE["batch_size"])
    context = models.SIZES.get(profile.name, models.SIZES["smoke"]).context
    return {
        "batch": batch,
        "tokens_per_step": batch * context,
        "peak_lr": LEARNING_RATES.get(profile.name, RECIPE["lr"]),
        "epochs": profile.epochs(RECIPE["epochs"], example="tiny-lm"),
    }


SIZE_COLUMNS = {
    "layers": "layers",
    "width": "width",
    "heads": "heads",
    "context": "context (tokens)",
    "parameters": "parameters",
    "weights_mib": "weights (MiB)",
    "training_state_mib": "training state (MiB)",
    "batch": "batch (sequences)",
    "tokens_per_step": "tokens per step",
    "peak_lr": "peak learning rate",
    "epochs": "epochs",
}
"""The columns of a profile's size (:func:`rocm_dl_guide.lm.model.size_facts`) and
:func:`settings`, with the headers a page shows them under: the training state is
the weights, their gradients and AdamW's two moments, in float32."""
SIZE_FORMATS = {"parameters": "{:,}", "weights (MiB)": "{:,.1f}",
                "training state (MiB)": "{:,.1f}", "tokens per step": "{:,}",
                "peak learning rate": "{:g}"}  # fmt: skip
"""How a page prints the figures of :data:`SIZE_COLUMNS`."""


def size_table(sizes):
    """``sizes`` (one row per profile, a ``profile`` column and those of
    :data:`SIZE_COLUMNS`) as a page shows it: one row per setting, under its
    header, and one column per profile, each figure formatted
    (:data:`SIZE_FORMATS`). Eleven settings fit down a page, not across it."""
    import pandas as pd

    shown = sizes.set_index("profile")[list(SIZE_COLUMNS)].rename(columns=SIZE_COLUMNS)
    shown = shown.astype(object)  # a row of ints and floats stays ints and floats
    return pd.DataFrame(
        {
            profile: [SIZE_FORMATS.get(c, "{}").format(v) for c, v in row.items()]
            for profile, row in shown.iterrows()
        },
        index=pd.Index(shown.columns, name="setting"),
    ).reset_index()


SAMPLE_PROMPTS = ("The ", "A list ", "An exception ")
WEIGHTS_NAME = "tiny_lm.pt"
"""The trained weights, next to the run's checkpoints."""
MODEL_FOLDER = "model"
"""The trained model and its tokenizer as a ``transformers`` model folder, next
to the weights (what ``AutoModelForCausalLM.from_pretrained`` and the serving
engines load)."""
SOURCE_FILE = "rocm_dl_guide_source.json"
"""Written into that folder: which weights it holds (their path, size, modification
time and inode)."""
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "<|{{ message['role'] }}|> {{ message['content'] }}\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)
"""The model's chat template (Jinja, as ``apply_chat_template`` renders it): each
message on a line of its own, its role in ``<|...|>``, a space and its text;
the reply follows ``<|assistant|>``. A question becomes ``"<|user|> What is a
list?\\n<|assistant|>"``. The byte-level BPE encodes these markers as ordinary
text (no special tokens), and the model never saw them in pretraining: the
template makes chat requests possible, not good. (With the markers on lines
of their own, ``"<|user|>\\n...\\n<|assistant|>\\n"``, the smoke profile's
model answered nothing but newlines.)"""
CHAT_TEMPLATE_FILE = "chat_template.jinja"
"""Where ``transformers`` 5 saves a tokenizer's chat template, and reads it from."""


class TokenBlocks(Dataset):
    """A token stream cut into non-overlapping blocks: item ``i`` is
    ``(tokens[i*T : (i+1)*T], tokens[i*T+1 : (i+1)*T+1])``, the inputs and the
    next tokens to predict."""

    def __init__(self, tokens: torch.Tensor, block: int) -> None:
        if len(tokens) < block + 1:
            raise ValueError(f"{len(tokens)} tokens are too few for one block of {block}")
        self.tokens, self.block = tokens, block

    def __len__(self) -> int:
        return (len(self.tokens) - 1) // self.block

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        start = i * self.block
        chunk = self.tokens[start : start + self.block + 1]
        return chunk[:-1], chunk[1:]


@dataclass
class LMData:
    """The tokenized corpus and its loaders."""

    corpus: corpora.Corpus
    tokenizer: Any
    train_tokens: torch.Tensor
    val_tokens: torch.Tensor
    block: int
    train_loader: DataLoader
    val_loader: DataLoader

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.get_vocab_size()

    @property
    def eos_id(self) -> int:
        return self.tokenizer.token_to_id(corpora.END_OF_TEXT)


def load(profile: profiles.Profile, *, batch_size: int | None = None, seed: int = 0) -> LMData:
    """Corpus, tokenizer (cached) and loaders for ``profile``'s model size."""
    size = models.SIZES[profile.name] if profile.name in models.SIZES else models.SIZES["smoke"]
    corpus = corpora.for_profile(profile)
    tok = corpora.tokenizer(corpus, VOCAB_SIZE)
    train_tokens = corpora.encode_documents(tok, corpus.train)
    val_tokens = corpora.encode_documents(tok, corpus.held_out)
    batch = batch_size or settings(profile)["batch"]
    gen = torch.Generator().manual_seed(seed)
    return LMData(
        corpus=corpus,
        tokenizer=tok,
        train_tokens=train_tokens,
        val_tokens=val_tokens,
        block=size.context,
        train_loader=DataLoader(
            TokenBlocks(train_tokens, size.context), batch_size=batch, shuffle=True, generator=gen
        ),
        val_loader=DataLoader(TokenBlocks(val_tokens, size.context), batch_size=32),
    )


def unigram_perplexity(train_tokens: torch.Tensor, val_tokens: torch.Tensor, vocab: int) -> float:
    """Held-out perplexity of token frequencies (add-one smoothed) of the training split."""
    counts = torch.bincount(train_tokens, minlength=vocab).double() + 1.0
    log_p = (counts / counts.sum()).log()
    return math.exp(-log_p[val_tokens].mean().item())


def perplexity(model: torch.nn.Module, loader: DataLoader, device: torch.device) -> float:
    """``exp`` of the mean next-token cross-entropy over ``loader``."""
    from rocm_dl_guide.training import train

    loss, _ = train.evaluate(model, loader, device, loss_fn=models.next_token_loss)
    return math.exp(loss)


def generate(
    model: models.CausalLM, tokenizer: Any, prompt: str, *, max_new_tokens: int = 30, seed: int = 0
) -> str:
    """Continue ``prompt`` with ``transformers``' ``generate``: sampling (top-k 40,
    temperature 0.8), seeded, so a page shows the same text every build."""
    hf = model.model
    device = next(hf.parameters()).device
    ids = torch.tensor([tokenizer.encode(prompt).ids], device=device)
    torch.manual_seed(seed)
    was_training = hf.training
    hf.eval()
    try:
        with torch.no_grad():
            out = hf.generate(
                ids,
                attention_mask=torch.ones_like(ids),
                max_new_tokens=max_new_tokens,
                do_sample=True,
                top_k=40,
                temperature=0.8,
                pad_token_id=hf.config.pad_token_id,
            )
    finally:
        hf.train(was_training)
    return tokenizer.decode(out[0].tolist())


def cosine_schedule(optimizer: torch.optim.Optimizer, total_steps: int, warmup: int):
    """Linear warm-up over ``warmup`` steps, then cosine decay to 10% (stepped per batch)."""

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        progress = min(1.0, (step - warmup) / max(1, total_steps - warmup))
        return 0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * progress))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


@dataclass
class LMRun:
    """What :func:`train` returns."""

    model: models.CausalLM
    data: LMData
    result: Any
    """The loop's :class:`rocm_dl_guide.training.train.TrainResult`."""
    size: dict[str, Any]
    perplexity_before: float
    perplexity_unigram: float
    samples_before: dict[str, str] = field(default_factory=dict)
    samples_after: dict[str, str] = field(default_factory=dict)
    device: str = "cpu"
    profile: str = "smoke"
    epochs: int = 0
    flops_per_token: float | None = None
    """Forward and backward FLOPs of one token, counted by PyTorch."""
    peak_tflops: float | None = None
    """The GPU's dense bf16 matrix peak (``None`` on a CPU or an unlisted GPU)."""

    @property
    def mfu(self) -> float | None:
        """Model FLOPs utilisation: the FLOPs the model needs per second over the
        device's peak (``None`` where there is no peak to divide by)."""
        if not (self.flops_per_token and self.peak_tflops):
            return None
        return self.flops_per_token * self.tokens_per_s / (self.peak_tflops * 1e12)

    @property
    def perplexity(self) -> float:
        """Held-out perplexity after training."""
        return math.exp(self.result.final.val_loss)

    @property
    def tokens_per_s(self) -> float:
        """Training throughput of the last epoch (all ranks)."""
        return self.result.final.images_per_second * self.data.block

    @property
    def test_accuracy(self) -> float | None:
        """Next-token accuracy on the held-out topics."""
        return self.result.final.val_accuracy

    def record_fields(self) -> dict[str, Any]:
        """The language-model facts of the ``--json`` record."""
        return {
            "tokens_per_s": self.tokens_per_s,
            "final_loss": self.result.final.train_loss,
            "perplexity_before": self.perplexity_before,
            "perplexity_unigram": self.perplexity_unigram,
            "perplexity": self.perplexity,
            "parameters": self.size["parameters"],
            "flops_per_token": self.flops_per_token,
            "mfu": self.mfu,
        }

    def summary(self) -> str:
        return (
            f"tiny-lm ({self.size['parameters'] / 1e6:.1f}M parameters, {self.profile} profile, "
            f"{self.device}): held-out perplexity {self.perplexity:.0f} after {self.epochs} "
            f"epochs (untrained {self.perplexity_before:.0f}, unigram "
            f"{self.perplexity_unigram:.0f}); {self.tokens_per_s:.0f} tokens/s"
            + (f", MFU {self.mfu:.1%}" if self.mfu is not None else "")
        )


def flops_per_token(size: models.ModelSize, vocab_size: int, eos_id: int, device=None) -> float:
    """Forward and backward FLOPs of one token of the decoder of ``size``, counted by
    PyTorch's ``FlopCounterMode`` on one sequence of a fresh model on ``device``."""
    from rocm_dl_guide.training import training_speed

    device = torch.device(device or "cpu")
    tokens = torch.zeros(1, size.context, dtype=torch.long)
    workload = training_speed.SweepWorkload(
        "tiny-lm",
        lambda: models.build(size, vocab_size, eos_id),
        (tokens, tokens),
        loss_fn=models.next_token_loss,
    )
    return training_speed.flops_per_sample(workload, device) / size.context


def training_workload(profile: profiles.Profile, device=None):
    """What ``bench training tiny-lm`` times: the decoder at ``profile``'s size (the
    ``full`` profile's is GPT-2 small's shape), its training loader, the loss and
    the recipe's AdamW (fused or ``foreach``); rates are in tokens."""
    from rocm_dl_guide.training.training_speed import Workload

    size = models.SIZES.get(profile.name, models.SIZES["smoke"])
    data = load(profile)

    def model_fn() -> models.CausalLM:
        return models.build(size, data.vocab_size, data.eos_id)

    def optimizer_fn(params, fused: bool = False) -> torch.optim.AdamW:
        return torch.optim.AdamW(
            params,
            lr=settings(profile)["peak_lr"],
            betas=RECIPE["betas"],
            weight_decay=RECIPE["weight_decay"],
            fused=fused or None,
        )

    return Workload(
        model_fn,
        data.train_loader,
        loss_fn=models.next_token_loss,
        optimizer_fn=optimizer_fn,
        unit="tokens",
        per_sample=size.context,
    )


def train(
    profile: profiles.Profile,
    epochs: int | None = None,
    checkpoint_dir: Path | None = None,
    resume: bool = False,
    checkpoint_every: int | None = None,
    progress: bool = True,
    amp: bool = False,
    fsdp: bool = False,
    seed: int = 0,
    samples: bool = True,
) -> LMRun:
    """Pretrain the decoder on the corpus with the guide's loop; measure it before and after.

    With ``checkpoint_dir`` the loop checkpoints there (``resume`` continues;
    ``checkpoint_every`` adds checkpoints inside the epochs) and the trained
    weights are saved as :data:`WEIGHTS_NAME` next to them; a run of one process
    also saves them as a ``transformers`` model folder (:func:`save_folder`).
    """
    from rocm_dl_guide.core import device as devices
    from rocm_dl_guide.training import train as loop

    n_epochs = profile.epochs(RECIPE["epochs"], epochs, example="tiny-lm")
    size = models.SIZES.get(profile.name, models.SIZES["smoke"])
    dev = devices.pick()
    data = load(profile, seed=seed)
    model = models.build(size, data.vocab_size, data.eos_id, seed=seed)
    model.to(dev)
    before = perplexity(model, data.val_loader, dev)  # every rank alone, before the group exists
    main = distributed.env_rank() == 0
    samples_before = _samples(model, data) if samples and main else {}
    optimizer = models.optimizer(
        model.parameters(),
        lr=settings(profile)["peak_lr"],
        betas=RECIPE["betas"],
        weight_decay=RECIPE["weight_decay"],
    )
    steps_per_epoch = math.ceil(len(data.train_loader) / distributed.env_world_size())
    scheduler = cosine_schedule(optimizer, n_epochs * steps_per_epoch, RECIPE["warmup_steps"])
    # One process at a time writes a folder's weights; LoRA waits on this lock for
    # a pretraining run in progress (under torchrun the loop's own lock suffices).
    alone = checkpoint_dir is not None and distributed.env_world_size() == 1
    weights = Path(checkpoint_dir or ".") / WEIGHTS_NAME
    lock = files.build_lock(weights, what="tiny-lm's weights") if alone else nullcontext()
    with lock:
        result = loop.fit(
            model,
            data.train_loader,
            epochs=n_epochs,
            optimizer=optimizer,
            scheduler=scheduler,
            scheduler_interval="batch",
            loss_fn=models.next_token_loss,
            val_loader=data.val_loader,
            device=dev,
            checkpoint_dir=checkpoint_dir,
            resume=resume,
            checkpoint_every=checkpoint_every,
            amp=amp,
            fsdp=fsdp,
            progress=progress,
            final_weights=WEIGHTS_NAME,
        )
        if alone:  # the weights as a transformers folder, while its classes are loaded
            save_folder(model, data.tokenizer, weights)
    samples_after = _samples(model, data) if samples and main and not fsdp else {}
    return LMRun(
        model=model,
        data=data,
        result=result,
        size=models.size_facts(model, size),
        perplexity_before=before,
        perplexity_unigram=unigram_perplexity(data.train_tokens, data.val_tokens, data.vocab_size),
        samples_before=samples_before,
        samples_after=samples_after,
        device=str(devices.describe()),
        profile=profile.name,
        epochs=n_epochs,
        **_mfu_facts(size, data, dev),
    )


def _mfu_facts(size: models.ModelSize, data: LMData, device) -> dict[str, float | None]:
    """What :attr:`LMRun.mfu` divides: FLOPs per token and the device's peak."""
    from rocm_dl_guide.training import training_speed

    return {
        "flops_per_token": flops_per_token(size, data.vocab_size, data.eos_id, device),
        "peak_tflops": training_speed.device_peak_tflops(device),
    }


def _samples(model: models.CausalLM, data: LMData) -> dict[str, str]:
    return {p: generate(model, data.tokenizer, p, seed=i) for i, p in enumerate(SAMPLE_PROMPTS)}


# --------------------------------------------------------------------------- the model folder


def folder_for(weights: Path) -> Path:
    """The ``transformers`` model folder of the weights file ``weights``."""
    return Path(weights).parent / MODEL_FOLDER


def _source(weights: Path) -> dict[str, Any]:
    stat = Path(weights).stat()
    return {
        "weights": str(weights),
        "size": stat.st_size,
        "mtime_ns": stat.st_mtime_ns,
        "inode": stat.st_ino,
    }


def folder_is_current(weights: Path) -> bool:
    """Whether :func:`folder_for` ``(weights)`` holds these weights as they are
    now (its :data:`SOURCE_FILE` names their path, size and time) and today's
    :data:`CHAT_TEMPLATE` (a folder written before it had none); nothing is loaded."""
    folder = folder_for(weights)
    marker, template = folder / SOURCE_FILE, folder / CHAT_TEMPLATE_FILE
    if not (marker.is_file() and template.is_file()):
        return False
    same = json.loads(marker.read_text()) == _source(weights)
    return same and template.read_text(encoding="utf-8") == CHAT_TEMPLATE


def save_folder(lm: models.CausalLM, tokenizer: Any, weights: Path) -> Path:
    """Write ``lm`` (the model ``weights`` holds) and its tokenizer as the weights'
    model folder (:func:`folder_for`), in one step: a folder is complete or absent.
    One process at a time; a folder that is already current is kept."""
    target = folder_for(weights)
    with files.build_lock(target, what="the model folder"):
        if not folder_is_current(weights):
            with files.staged_directory(target, "export") as staged:
                export(lm, tokenizer, staged)
                (staged / SOURCE_FILE).write_text(json.dumps(_source(weights)))
    return target


def export(lm: models.CausalLM, tokenizer: Any, folder: Path) -> None:
    """Save a :class:`~rocm_dl_guide.lm.model.CausalLM` and its ``tokenizers``
    tokenizer as a ``transformers`` model folder (weights, config, fast tokenizer
    with :data:`CHAT_TEMPLATE`, in :data:`CHAT_TEMPLATE_FILE`)."""
    from transformers import PreTrainedTokenizerFast

    decoder = lm.decoder()
    eos = corpora.END_OF_TEXT
    decoder.generation_config.eos_token_id = tokenizer.token_to_id(eos)
    with no_library_bars():
        decoder.save_pretrained(folder)
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token=eos, bos_token=eos)
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(folder)
