"""The ``lora`` case study: fine-tune the pretrained decoder with LoRA (PEFT).

LoRA (Hu et al., 2021) freezes the pretrained weights and learns, for chosen
weight matrices W, a low-rank update B A (rank r), so the layer computes
``W x + (alpha / r) B A x``. Only A and B train: a few percent of the
parameters, and of the optimizer's memory. PEFT's ``get_peft_model`` adds the
adapters to a ``transformers`` model; the guide's one loop trains it.

The task (:mod:`rocm_dl_guide.lm.topic_task`) has a right answer: name the topic
of a passage of the Python documentation with one word; exact match is measured
on held-out passages before and after fine-tuning. With ``qlora`` the frozen
base is held in 4 bits (:mod:`rocm_dl_guide.lm.qlora`).

The base model is the one ``tiny-lm`` pretrained (the ``fixtures`` data
source, offline), or SmolLM2-135M from the Hugging Face Hub, pinned by
revision and checksum (the ``real`` data source, :mod:`rocm_dl_guide.lm.hub`),
or any ``transformers`` model folder given as ``base``.
"""

from __future__ import annotations

import contextlib
import math
import os
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import DataLoader

from rocm_dl_guide.core import casestudies, distributed, files, profiles
from rocm_dl_guide.core.progress import no_library_bars
from rocm_dl_guide.lm import hub, pretrain, topic_task
from rocm_dl_guide.lm import model as models
from rocm_dl_guide.lm import qlora as qlora_mod  # (``qlora`` is a parameter below)
from rocm_dl_guide.training import checkpoints

RECIPE = {
    "method": "LoRA (PEFT)",
    "rank": 8,
    "alpha": 16,
    "target_modules": ("q_proj", "k_proj", "v_proj", "o_proj", "lm_head"),
    "optimizer": "AdamW",
    "lr": 3e-3,
    "warmup_steps": 12,
    "schedule": "linear warm-up, then cosine decay to 10% of lr",
    "batch_size": 8,
    "epochs": 6,
}
"""LoRA's settings, the same on every profile. On the smoke model, adapters on the
attention projections alone barely move the answer's loss: the output layer is
tied to the embeddings and the answer words are rare tokens, so ``lm_head``
needs an adapter too. Batch size, learning rate and epochs were chosen by timing
a few side by side on two CPU cores against held-out exact match: smaller steps
and more of them did better than 16 passages a step, and 3e-3 better than 6e-3
or 1e-2. Six epochs, not four: after four, two seeds of LoRA left 17 and 18
of the 43 held-out passages right, and one of them never named two of the four
topics; after six they left 27 and 29. DPO and GRPO start from this model, and
GRPO from the weaker one sometimes lost passages. The ``smoke`` profile lets
its six epochs through its usual cap of three
(``casestudies.get("lora").epoch_caps``)."""
PRETRAINED_LR = 1e-3
"""The peak learning rate for a model pretrained elsewhere (SmolLM2 on the ``real``
data source): lower than the small model's, within the range PEFT's examples use
(2e-4 to 1e-3); not tuned here, since no GPU ran it when this was written."""
ADAPTER_DIR = "adapter"
"""The saved adapter (PEFT's ``save_pretrained``), next to the run's checkpoints."""


def base_model(profile: profiles.Profile, path: str | os.PathLike | None = None):
    """The pretrained decoder, its tokenizer and where it came from.

    ``path`` is the weights ``tiny-lm`` saved, or a ``transformers`` model folder
    (``config.json``, ``tokenizer.json`` and the weights). Without it, the model
    :func:`base_weights` finds.
    """
    path = base_weights(profile, path)
    if Path(path).is_dir():
        return (*from_folder(Path(path)), Path(path))
    data = pretrain.load(profile)
    size = models.SIZES.get(profile.name, models.SIZES["smoke"])
    lm = models.build(size, data.vocab_size, data.eos_id)
    checkpoints.load_weights(lm, path)
    return lm, data.tokenizer, Path(path)


def base_weights(
    profile: profiles.Profile, path: str | os.PathLike | None = None, say: bool = True
) -> Path:
    """Where :func:`base_model`'s weights are, without loading them: ``path`` if
    given; on the ``real`` data source, SmolLM2-135M's folder from the Hub
    (pinned; downloaded once); offline, the weights of ``train tiny-lm`` in its
    default folder (``checkpoints/tiny-lm``) where there are some, or else the
    book's ``tiny-lm`` run in the runs folder, pretrained first if missing (after
    waiting for a pretraining run in progress). ``say``: print which model it is."""
    from rocm_dl_guide.core.runs import runs_dir

    if path is None and profile.pretrained:
        path = hub.fetch(hub.SMOLLM2_135M)
        if say:
            print(f"base model: {hub.SMOLLM2_135M.describe()}, {files.shown(path)}", flush=True)
    if path is not None and Path(path).is_dir():
        return Path(path)
    if path is None:
        path = casestudies.get("tiny-lm").default_checkpoint_dir / pretrain.WEIGHTS_NAME
        if not path.is_file():
            path = runs_dir("tiny-lm") / pretrain.WEIGHTS_NAME
            if not _pretrained(path):
                print(f"no pretrained tiny-lm at {path}: pretraining it first", flush=True)
                pretrain.train(profile, checkpoint_dir=path.parent, samples=False, progress=False)
        if say:
            print(f"base model: {files.shown(path)}", flush=True)
    if not Path(path).is_file():
        raise FileNotFoundError(
            f"no pretrained model at {path}: give the weights `train tiny-lm` saved "
            f"({pretrain.WEIGHTS_NAME} in its checkpoint folder)"
        )
    return Path(path)


def from_folder(folder: Path) -> tuple[models.CausalLM, Any]:
    """A ``transformers`` causal LM and its tokenizer from a model folder (the Hub's
    layout); one clear error where the folder is not one."""
    from tokenizers import Tokenizer
    from transformers import AutoModelForCausalLM

    for name in ("config.json", "tokenizer.json"):
        if not (folder / name).is_file():
            raise FileNotFoundError(f"{folder} is not a transformers model folder: no {name}")
    try:
        with no_library_bars():
            hf = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
        tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    except Exception as exc:  # transformers, safetensors and tokenizers raise many kinds
        first = str(exc).splitlines()[0] if str(exc) else ""
        raise ValueError(
            f"{folder} is not a readable model ({type(exc).__name__}: {first[:200]})"
        ) from exc
    return models.CausalLM(hf), tokenizer


def _pretrained(path: Path) -> bool:
    """Whether ``path`` holds weights, once a pretraining run writing them has ended."""
    if distributed.env_world_size() > 1:  # every rank pretrains together where missing
        return path.is_file()
    with files.build_lock(path, what="the pretrained tiny-lm"):
        return path.is_file()


@contextlib.contextmanager
def quiet_peft() -> Iterator[None]:
    """Silence two warnings that do not apply here: PEFT's about an adapter on the
    tied ``lm_head`` (deliberate; :func:`merged` unties before folding it in) and
    transformers' deprecation of ``is_gradient_checkpointing``, which PEFT calls."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*tie_word_embeddings=True.*")
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*")
        yield


def add_lora(lm: models.CausalLM) -> models.CausalLM:
    """Wrap the decoder's ``transformers`` model with PEFT's LoRA adapters (in place)."""
    from peft import LoraConfig, get_peft_model

    config = LoraConfig(
        r=RECIPE["rank"],
        lora_alpha=RECIPE["alpha"],
        target_modules=list(RECIPE["target_modules"]),
        lora_dropout=0.0,
        bias="none",
        task_type="CAUSAL_LM",
    )
    with quiet_peft():
        lm.model = get_peft_model(lm.model, config)
    return lm


def trainable(model: torch.nn.Module) -> tuple[int, int]:
    """(trainable parameters, all parameters)."""
    params = list(model.parameters())
    return sum(p.numel() for p in params if p.requires_grad), sum(p.numel() for p in params)


def optimizer_state_bytes(optimizer: torch.optim.Optimizer) -> int:
    """Bytes of the optimizer's state tensors (AdamW: two moments per trained parameter)."""
    return sum(
        t.numel() * t.element_size()
        for state in optimizer.state.values()
        for t in state.values()
        if isinstance(t, torch.Tensor)
    )


def save_adapter(lm: models.CausalLM, directory: str | os.PathLike) -> Path:
    """PEFT's ``save_pretrained`` into ``directory``, swapped in whole (never half).

    Only the adapter's own tensors are saved: the embeddings (tied to ``lm_head``)
    did not change, so PEFT's default of saving them along would add 3 MB of base
    weights to a 0.2 MB adapter."""
    target = Path(directory)
    with files.staged_directory(target, label="adapter") as tmp:
        lm.model.save_pretrained(str(tmp), save_embedding_layers=False)
    return target


def load_adapter(base: models.CausalLM, directory: str | os.PathLike) -> models.CausalLM:
    """The base decoder with the adapter saved in ``directory``; one clear error if unusable."""
    from peft import PeftModel

    directory = Path(directory)
    if not (directory / "adapter_config.json").is_file():
        raise ValueError(f"{directory} is not a LoRA adapter: it has no adapter_config.json")
    try:
        with quiet_peft():
            base.model = PeftModel.from_pretrained(base.model, str(directory))
    except Exception as exc:  # safetensors and PEFT raise many kinds
        raise ValueError(
            f"{directory} is not a readable LoRA adapter ({type(exc).__name__}: "
            f"{str(exc).splitlines()[0] if str(exc) else ''}); save it again"
        ) from exc
    return base


def merged(lm: models.CausalLM) -> models.CausalLM:
    """The decoder with the adapters folded into its weights (PEFT's ``merge_and_unload``,
    which works in place: ``lm`` itself is merged; reload the adapter to keep one unmerged).

    The output layer shares its weight with the input embeddings (tied); folding
    ``lm_head``'s adapter into that shared tensor would change the embeddings too,
    so the output layer gets its own copy first (the model is untied).
    """
    hf = lm.decoder()
    head = hf.get_output_embeddings()
    layer = getattr(head, "base_layer", head)
    if layer.weight is hf.get_input_embeddings().weight:
        layer.weight = torch.nn.Parameter(layer.weight.detach().clone(), requires_grad=False)
        hf.config.tie_word_embeddings = False
    return models.CausalLM(lm.model.merge_and_unload())


def weight_bytes(lm: models.CausalLM) -> int:
    """Bytes of the model's weights and buffers as stored (4-bit ones packed)."""
    return lm.decoder().get_memory_footprint()


@dataclass
class LoraRun:
    """What :func:`train` returns."""

    model: models.CausalLM
    tokenizer: Any
    result: Any
    accuracy_before: float
    accuracy: float
    majority: float
    trainable_parameters: int
    parameters: int
    optimizer_bytes: int
    full_optimizer_bytes: int
    adapter: Path | None
    adapter_bytes: int
    base: Path
    base_bytes: int
    """The base model's weights in memory (packed 4-bit ones with QLoRA)."""
    train_size: int
    test_size: int
    tokens_per_example: float
    """Prompt and answer tokens per training example, padding not counted."""
    device: str = "cpu"
    profile: str = "smoke"
    epochs: int = 0
    qlora: bool = False

    @property
    def method(self) -> str:
        return "QLoRA" if self.qlora else "LoRA"

    @property
    def base_name(self) -> str:
        """``tiny-lm``, or the model folder's name (``SmolLM2-135M`` for the Hub's)."""
        if not self.base.is_dir():
            return "tiny-lm"
        if self.base == hub.folder(hub.SMOLLM2_135M):
            return hub.SMOLLM2_135M.title
        return self.base.name

    @property
    def trainable_fraction(self) -> float:
        return self.trainable_parameters / self.parameters

    @property
    def test_accuracy(self) -> float:
        return self.accuracy

    @property
    def tokens_per_s(self) -> float:
        """Training throughput of the last epoch (all ranks): prompt and answer tokens
        per second, padding not counted."""
        return self.result.final.images_per_second * self.tokens_per_example

    def record_fields(self) -> dict[str, Any]:
        """The LoRA facts of the ``--json`` record."""
        return {
            "accuracy_before": self.accuracy_before,
            "accuracy": self.accuracy,
            "majority_baseline": self.majority,
            "trainable_fraction": self.trainable_fraction,
            "optimizer_bytes": self.optimizer_bytes,
            "full_optimizer_bytes": self.full_optimizer_bytes,
            "adapter_bytes": self.adapter_bytes,
            "base_bytes": self.base_bytes,
            "qlora": self.qlora,
            "tokens_per_s": self.tokens_per_s,
            "final_loss": self.result.final.train_loss,
        }

    def summary(self) -> str:
        return (
            f"{self.method} on {self.base_name} ({self.profile} profile, {self.device}): "
            f"exact match {self.accuracy_before:.0%} -> {self.accuracy:.0%} on "
            f"{self.test_size} held-out passages (majority answer {self.majority:.0%}), training "
            f"{self.trainable_parameters:,} of {self.parameters:,} parameters "
            f"({self.trainable_fraction:.2%})"
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
    base: str | os.PathLike | None = None,
    seed: int = 0,
    qlora: bool = False,
) -> LoraRun:
    """Fine-tune the pretrained model (:func:`base_model` of ``base``) with LoRA on the
    topic task; measure exact match. With ``checkpoint_dir`` the loop checkpoints
    there and rank 0 saves the adapter in its :data:`ADAPTER_DIR`. With ``qlora``
    the frozen base is held in 4 bits (:func:`rocm_dl_guide.lm.qlora.four_bit`)."""
    from rocm_dl_guide.core import device as devices
    from rocm_dl_guide.training import train as loop

    if qlora and fsdp:
        raise ValueError("--qlora with --fsdp: FSDP2 does not shard bitsandbytes' 4-bit weights")
    n_epochs = profile.epochs(RECIPE["epochs"], epochs, example="lora")
    dev = devices.pick()
    lm, tokenizer, base_path = base_model(profile, base)
    train_items, test_items = topic_task.examples()
    lm, base = _base_facts(lm.to(dev), tokenizer, train_items, test_items, qlora)
    torch.manual_seed(seed)
    add_lora(lm).to(dev)
    lr = PRETRAINED_LR if base_path.is_dir() else RECIPE["lr"]  # a folder: a Hub model
    optimizer = models.optimizer([p for p in lm.parameters() if p.requires_grad], lr=lr)
    prompts = topic_task.TopicPrompts(train_items, tokenizer)
    shuffle = torch.Generator().manual_seed(seed)
    loader = DataLoader(
        prompts, RECIPE["batch_size"], shuffle=True, generator=shuffle, collate_fn=prompts.collate
    )
    steps = n_epochs * math.ceil(len(loader) / distributed.env_world_size())
    result = loop.fit(
        lm,
        loader,
        epochs=n_epochs,
        optimizer=optimizer,
        scheduler=pretrain.cosine_schedule(optimizer, steps, RECIPE["warmup_steps"]),
        scheduler_interval="batch",
        loss_fn=models.next_token_loss,
        device=dev,
        checkpoint_dir=checkpoint_dir,
        resume=resume,
        checkpoint_every=checkpoint_every,
        amp=amp,
        fsdp=fsdp,
        progress=progress,
    )
    after = topic_task.exact_match(lm, tokenizer, test_items)
    adapter, size = _export(lm, checkpoint_dir, fsdp)
    trained = trainable(lm)[0]
    return LoraRun(
        model=lm,
        tokenizer=tokenizer,
        result=result,
        accuracy_before=base["before"],
        accuracy=after,
        majority=topic_task.majority(test_items),
        trainable_parameters=trained,
        parameters=base["parameters"] + trained,
        optimizer_bytes=optimizer_state_bytes(optimizer),
        full_optimizer_bytes=base["full_optimizer_bytes"],
        adapter=adapter,
        adapter_bytes=size,
        base=base_path,
        base_bytes=base["bytes"],
        train_size=len(train_items),
        test_size=len(test_items),
        tokens_per_example=prompts.mean_tokens,
        device=str(devices.describe()),
        profile=profile.name,
        epochs=n_epochs,
        qlora=qlora,
    )


def _base_facts(
    lm: models.CausalLM,
    tokenizer: Any,
    train: list[topic_task.Example],
    test: list[topic_task.Example],
    qlora: bool,
) -> tuple[models.CausalLM, dict[str, Any]]:
    """The model to add adapters to (4-bit with ``qlora``) and its facts before
    training: parameters (counted before 4-bit packing), full fine-tuning's AdamW
    bytes (of the float32 model), exact match and the weights' bytes."""
    facts = {
        "parameters": models.parameter_count(lm),
        "full_optimizer_bytes": _full_optimizer_bytes(lm, tokenizer, train),
    }
    lm = qlora_mod.four_bit(lm) if qlora else lm
    return lm, {
        **facts,
        "before": topic_task.exact_match(lm, tokenizer, test),
        "bytes": weight_bytes(lm),
    }


def _full_optimizer_bytes(
    lm: models.CausalLM, tokenizer: Any, items: list[topic_task.Example]
) -> int:
    """The AdamW state of fine-tuning every parameter, measured after one step on a copy."""
    import copy

    full = copy.deepcopy(lm)
    opt = torch.optim.AdamW(full.parameters(), lr=0.0)
    x, y = next(iter(DataLoader(topic_task.TopicPrompts(items[:2], tokenizer), batch_size=2)))
    device = next(full.parameters()).device
    models.next_token_loss(full(x.to(device)), y.to(device)).backward()
    opt.step()
    return optimizer_state_bytes(opt)


def _export(
    lm: models.CausalLM, checkpoint_dir: Path | None, fsdp: bool
) -> tuple[Path | None, int]:
    """Rank 0 saves the adapter next to the checkpoints: (its folder, its bytes)."""
    adapter, size = None, 0
    if checkpoint_dir is not None and distributed.env_rank() == 0:
        if fsdp:  # save_pretrained needs whole tensors; the shards are in the checkpoint
            print(
                "the adapter is not exported under --fsdp (its shards are in the sharded "
                "checkpoint): run without --fsdp to save it with PEFT",
                flush=True,
            )
        else:
            adapter = save_adapter(lm, Path(checkpoint_dir) / ADAPTER_DIR)
            size = sum(p.stat().st_size for p in adapter.rglob("*") if p.is_file())
    return adapter, size
