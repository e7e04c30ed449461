"""Inception v3 fine-tuned on tiny-imagenet-200: the training chapter's second case study.

:func:`finetune_model` takes the pretrained model
(:func:`~rocm_dl_guide.casestudies.inception_pretrained.load_pretrained`),
replaces the classifier and switches the auxiliary head off, and :func:`train`
runs the guide's SGD/StepLR recipe (:data:`RECIPE`) through the shared loop
:func:`rocm_dl_guide.training.train.fit` on the loaders of
:func:`~rocm_dl_guide.casestudies.tiny_imagenet.tiny_imagenet_loaders`, with the
profile's settings (:func:`settings`: the ``gpu`` profile trains at batch
:data:`GPU_BATCH_SIZE` in bfloat16 and channels-last, as the GPU record
measured fastest, with the learning rate scaled to the batch). This is
the registry's ``inception-v3`` (``train inception-v3``); :func:`training_workload`
is what ``selfcheck`` and ``bench training inception-v3`` time.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rocm_dl_guide.casestudies.inception_pretrained import (
    LoadedModel,
    load_pretrained,
)
from rocm_dl_guide.casestudies.tiny_imagenet import (
    BATCH_SIZE,
    TRAIN_CROP_SIZE,
    VAL_CROP_SIZE,
    VAL_RESIZE_SIZE,
    TinyImageNet,
    tiny_imagenet_loaders,
)
from rocm_dl_guide.core import datasets, files, profiles
from rocm_dl_guide.core.device import fused_optimizer_supported as fused_supported
from rocm_dl_guide.core.messages import count

if TYPE_CHECKING:  # pragma: no cover
    from torch import nn

    from rocm_dl_guide.training.training_speed import Workload

# The guide's fine-tuning recipe (torchvision's reference classification script,
# whose defaults are for 8 GPUs with 32 images each; the input sizes and the
# batch are the loaders', in tiny_imagenet).
LEARNING_RATE = 0.1
MOMENTUM = 0.9
WEIGHT_DECAY = 1e-4
LR_STEP_SIZE = 30
LR_GAMMA = 0.1
RANDOM_INIT_LR = 0.001
"""The learning rate from random weights (the ``smoke`` profile, or fixtures), in
place of :data:`LEARNING_RATE`. The recipe's 0.1 is for 256 images a step (8 GPUs
with 32 each); the linear scaling rule gives 0.0125 for 32 images on one device.
In the ``smoke`` profile's two epochs (:data:`RANDOM_INIT_CHECK`), 0.1 at 32 images
a step kept the loss finite but sent it far above chance, 0.0125 brought it below
chance and 0.001 to about chance. The ``smoke`` profile keeps 0.001, the rate its
book pages and tests were made with: a cautious rate, not the rule's."""
RANDOM_INIT_CHECK = {0.1: (5.10, 5.36), 0.0125: (2.38, 2.07), 0.001: (2.39, 2.30)}
"""Learning rate -> mean training loss in each of the ``smoke`` profile's two epochs
(16 steps of 32 images at 75 px each, random weights, the fixtures, seed 0; two CPU
cores, 2026-11-27; chance is ln 10 = 2.30). 0.1 and 0.0125 were measured with the
same model, loader and SGD outside :func:`train`; at 0.1 one step's loss reached
16.1. 0.001 is the smoke test's run of :func:`train` (``tests/test_inception.py``)."""
FULL_EPOCHS = 90
RECIPE = {
    "case study": "Inception v3 fine-tuning (PyTorch)",
    "optimizer": "SGD",
    "batch size": BATCH_SIZE,
    "learning rate": LEARNING_RATE,
    "momentum": MOMENTUM,
    "weight decay": WEIGHT_DECAY,
    "schedule": f"StepLR: x{LR_GAMMA} every {LR_STEP_SIZE} epochs",
    "epochs": FULL_EPOCHS,
    "input": f"train crop {TRAIN_CROP_SIZE}; val resize {VAL_RESIZE_SIZE}, crop {VAL_CROP_SIZE}",
}
"""The ``full`` profile's settings, which are the guide's."""
REFERENCE_BATCH = 256
"""The batch that the recipe's learning rate of 0.1 is for: torchvision's reference
script runs on 8 GPUs with 32 images each (``torchrun --nproc_per_node=8 train.py``),
so each step averages the gradient over 256 images."""
GPU_BATCH_SIZE = 256
"""The ``gpu`` profile's batch per device. The GPU record (``make gpu-check`` on an
NVIDIA H200, ``data/gpu-verification.json``, figures ``inception-v3``) measured
training at 299x299: float32 1,075 img/s at batch 64 and 1,195 at 256; bfloat16
autocast with channels-last 1,204 at 64, where the GPU was busy only 56% of the
time, and 2,417 at 256 (busy 98%, 2.02x float32); bfloat16 without channels-last
1,287 at 256. The fastest run's peak memory was 13,649 MiB (13.3 GiB)."""
WARMUP_EPOCHS = 1
"""The ``gpu`` profile's linear warm-up, in epochs (stepped every batch). Goyal et al.
warm up for 5 of 90 epochs; the ``gpu`` profile trains at most 5, so it takes one."""
WARMUP_START_FACTOR = 0.01
"""The warm-up starts at this fraction of the learning rate (torchvision's reference
script's default ``--lr-warmup-decay``)."""


@dataclass(frozen=True)
class Settings:
    """How a profile trains: what :func:`settings` returns."""

    batch_size: int
    """Images per step on each device."""
    lr: float
    """The learning rate after the warm-up."""
    warmup_steps: int
    """Steps of linear warm-up from ``WARMUP_START_FACTOR * lr`` (0: none)."""
    steps_per_epoch: int
    fused: bool
    """SGD's fused kernel (one kernel for the whole update) instead of ``foreach``."""
    amp: bool
    channels_last: bool
    world_size: int = 1

    @property
    def per_step(self) -> bool:
        """Whether the schedule steps every batch (warm-up) rather than every epoch."""
        return self.warmup_steps > 0

    def optimizer(self, params):
        """The recipe's SGD (momentum, weight decay) at :attr:`lr`, fused where chosen."""
        import torch

        fused = {"fused": True} if self.fused else {}
        return torch.optim.SGD(
            params, lr=self.lr, momentum=MOMENTUM, weight_decay=WEIGHT_DECAY, **fused
        )

    def scheduler(self, optimizer):
        """The learning-rate schedule on ``optimizer``: the recipe's StepLR (x0.1 every
        30 epochs), per epoch; with a warm-up, a linear rise over ``warmup_steps``
        chained with the same decay counted in steps, both stepped every batch."""
        import torch

        sched = torch.optim.lr_scheduler
        if not self.per_step:
            return sched.StepLR(optimizer, step_size=LR_STEP_SIZE, gamma=LR_GAMMA)
        warmup = sched.LinearLR(
            optimizer, start_factor=WARMUP_START_FACTOR, total_iters=self.warmup_steps
        )
        decay = sched.StepLR(
            optimizer, step_size=LR_STEP_SIZE * self.steps_per_epoch, gamma=LR_GAMMA
        )
        return sched.ChainedScheduler([warmup, decay])

    def facts(self) -> dict[str, Any]:
        """The settings for a run's record and the page."""
        return {
            "batch_size": self.batch_size,
            "global_batch": self.batch_size * self.world_size,
            "lr": self.lr,
            "warmup_steps": self.warmup_steps,
            "fused": self.fused,
            "amp": self.amp,
            "channels_last": self.channels_last,
        }

    def describe(self) -> str:
        """The settings in a few words, as :meth:`InceptionRun.summary` prints them."""
        warmup = (
            f" after a linear warm-up over {self.warmup_steps} steps from "
            f"{WARMUP_START_FACTOR * self.lr:g}"
            if self.warmup_steps
            else ""
        )
        parts = [f"batch {self.batch_size}", f"lr {self.lr:g}{warmup}"]
        parts.append("fused SGD" if self.fused else "SGD")
        parts += ["bfloat16 autocast"] * self.amp + ["channels-last"] * self.channels_last
        return ", ".join(parts)


def default_batch(profile: profiles.Profile) -> int:
    """Images per step on each device: :data:`GPU_BATCH_SIZE` in the ``gpu`` profile,
    the recipe's 32 in the others."""
    return GPU_BATCH_SIZE if profile.name == "gpu" else BATCH_SIZE


def settings(
    profile: profiles.Profile,
    *,
    train_images: int,
    pretrained: bool,
    device="cpu",
    world_size: int = 1,
    batch_size: int | None = None,
    lr: float | None = None,
    amp: bool | None = None,
    channels_last: bool | None = None,
    fsdp: bool = False,
) -> Settings:
    """How ``profile`` trains on ``train_images`` images with ``world_size`` processes.

    - ``smoke`` and ``full``: the recipe as it is (batch 32, the StepLR schedule
      per epoch, no warm-up), lr 0.1 from pretrained weights. The ``full``
      profile is the recipe for 8 GPUs (``--nproc 8``); on one device it keeps
      lr 0.1 for a batch of 32.
    - ``gpu``: batch :data:`GPU_BATCH_SIZE` per device and lr 0.1 scaled
      linearly to the global batch (``0.1 * batch * world_size / 256``; Goyal et
      al. 2017), reached by a linear warm-up over the first epoch
      (:data:`WARMUP_EPOCHS`) and then decayed x0.1 every 30 epochs, counted in
      steps. On a GPU, bfloat16 autocast and channels-last are on.

    Random weights (the ``smoke`` profile, or fixtures) train at
    :data:`RANDOM_INIT_LR`, without scaling. SGD is fused where
    :func:`fused_supported` says so, except in ``smoke``, which keeps the
    default ``foreach`` update so the CPU build's numbers stay as they were,
    and with ``fsdp`` (sharded parameters).
    ``batch_size``, ``lr`` (the rate after the warm-up), ``amp`` and
    ``channels_last`` override the profile's choice where given.
    """
    import torch

    gpu_profile = profile.name == "gpu"
    on_gpu = torch.device(device).type == "cuda"
    batch = batch_size or default_batch(profile)
    if lr is None:
        if not pretrained:
            lr = RANDOM_INIT_LR
        elif gpu_profile:
            lr = LEARNING_RATE * batch * world_size / REFERENCE_BATCH
        else:
            lr = LEARNING_RATE
    per_rank = math.ceil(train_images / world_size)  # DistributedSampler pads the shards
    steps = math.ceil(per_rank / batch)
    if profile.max_train_batches is not None:
        steps = min(steps, profile.max_train_batches)
    return Settings(
        batch_size=batch,
        lr=lr,
        warmup_steps=WARMUP_EPOCHS * steps if gpu_profile else 0,
        steps_per_epoch=steps,
        fused=profile.name != "smoke" and not fsdp and fused_supported(device),
        amp=(gpu_profile and on_gpu) if amp is None else amp,
        channels_last=(gpu_profile and on_gpu) if channels_last is None else channels_last,
        world_size=world_size,
    )


def finetune_model(num_classes: int, profile: profiles.Profile) -> tuple[nn.Module, LoadedModel]:
    """Inception v3 (pretrained where the profile says so and the weights can be
    had) with its classifier replaced for ``num_classes`` and the auxiliary
    classifier removed, as in the guide. Returns ``(model, what was loaded)``;
    the second item's ``model`` is the same object."""
    from torch import nn

    loaded = load_pretrained(profile)
    model = loaded.model
    model.fc = nn.Linear(model.fc.in_features, num_classes)
    model.aux_logits = False
    model.AuxLogits = None
    return model.train(), loaded


@dataclass
class InceptionRun:
    """What :func:`train` returns."""

    model: Any
    data: TinyImageNet
    result: Any
    """The :class:`rocm_dl_guide.training.train.TrainResult`."""
    weights_note: str
    lr: float
    """The learning rate used (after the warm-up, where there is one)."""
    epochs: int
    device: str
    profile: str
    weights: Path | None
    """Where the trained weights were saved (``trained_inception_v3.pt``), if anywhere."""
    pretrained: bool = False
    """Whether training started from the ImageNet weights (else random weights)."""
    settings: Settings | None = None
    """How it trained: batch, learning rate, warm-up, fused SGD, autocast, channels-last."""

    @property
    def start(self) -> str:
        """Which weights training started from, in a few words."""
        return "pretrained ImageNet weights" if self.pretrained else "random weights"

    def summary(self) -> str:
        last = self.result.final
        val = (
            f"validation loss {last.val_loss:.3f}, accuracy {100 * last.val_accuracy:.1f}% "
            f"(chance {100 / len(self.data.classes):.1f}%)"
            if last and last.val_loss is not None
            else "no epochs run"
        )
        saved = f"; weights saved to {files.shown(self.weights)}" if self.weights else ""
        return (
            f"Inception v3 on tiny-imagenet-200 ({len(self.data.classes)} classes, "
            f"{self.data.image_size}px): {val} after {count(self.epochs, 'epoch')} "
            f"on {self.device}; "
            f"profile {self.profile}; start: {self.start}, {self.how()}; "
            f"data: {self.data.prepared.note}{saved}"
        )

    def how(self) -> str:
        """The training settings in a few words (batch, lr, warm-up, optimizer, precision)."""
        return self.settings.describe() if self.settings else f"lr {self.lr:g}"

    def record_fields(self) -> dict[str, Any]:
        """The settings, for the ``--json`` record."""
        return self.settings.facts() if self.settings else {"lr": self.lr}

    def plot(self, ax=None):
        return self.result.plot(
            ax=ax, title=f"Inception v3 on tiny-imagenet-200 ({self.data.prepared.kind} data)"
        )


def train(
    profile: profiles.Profile,
    epochs: int | None = None,
    checkpoint_dir: Path | None = None,
    resume: bool = False,
    checkpoint_every: int | None = None,
    progress: bool = True,
    amp: bool | None = None,
    channels_last: bool | None = None,
    fsdp: bool = False,
    image_size: int | None = None,
    batch_size: int | None = None,
    lr: float | None = None,
    seed: int = 0,
) -> InceptionRun:
    """Fine-tune Inception v3 on tiny-imagenet-200 with the guide's recipe.

    The ``full`` profile is the recipe (SGD, lr 0.1, batch 32, StepLR, 90
    epochs); ``gpu`` trains at batch 256 in bfloat16 and channels-last with the
    rate scaled to the batch after a warm-up; the profile caps epochs, batches
    and the input size. ``batch_size``, ``lr``, ``amp`` and ``channels_last``
    override :func:`settings`. With ``checkpoint_dir`` every epoch is
    checkpointed (``resume`` continues; ``checkpoint_every`` adds checkpoints
    inside epochs); the final weights are ``trained_inception_v3.pt``.
    """
    import torch

    from rocm_dl_guide.core import device as devices
    from rocm_dl_guide.core import distributed
    from rocm_dl_guide.training import train as loop

    n_epochs = profile.epochs(FULL_EPOCHS, epochs, example="inception-v3")
    dev = devices.pick()
    batch = batch_size or default_batch(profile)
    data = tiny_imagenet_loaders(
        profile, image_size=image_size, batch_size=batch, seed=seed, device=dev
    )
    torch.manual_seed(seed)
    model, loaded = finetune_model(len(data.classes), profile)
    how = settings(
        profile, train_images=len(data.train_set), pretrained=loaded.pretrained, device=dev,
        world_size=distributed.env_world_size(), batch_size=batch, lr=lr, amp=amp,
        channels_last=channels_last, fsdp=fsdp,
    )  # fmt: skip
    optimizer = how.optimizer(model.parameters())
    result = loop.fit(
        model,
        data.train_loader,
        epochs=n_epochs,
        optimizer=optimizer,
        scheduler=how.scheduler(optimizer),
        scheduler_interval="batch" if how.per_step else "epoch",
        val_loader=data.val_loader,
        device=dev,
        max_train_batches=profile.max_train_batches,
        data_tag=datasets.stand_in(data.prepared),
        checkpoint_dir=checkpoint_dir,
        resume=resume,
        checkpoint_every=checkpoint_every,
        amp=how.amp,
        channels_last=how.channels_last,
        fsdp=fsdp,
        progress=progress,
        final_weights="trained_inception_v3.pt",
    )
    return InceptionRun(
        model=model,
        data=data,
        result=result,
        weights_note=loaded.note,
        pretrained=loaded.pretrained,
        lr=how.lr,
        epochs=n_epochs,
        device=str(devices.describe()),
        profile=profile.name,
        weights=result.weights,
        settings=how,
    )


def training_workload(profile: profiles.Profile, device=None) -> Workload:
    """What ``selfcheck`` times: the fine-tuning model and the training loader."""
    from rocm_dl_guide.training.training_speed import Workload

    data = tiny_imagenet_loaders(profile, device=device)
    classes = len(data.classes)

    def model_fn():
        return finetune_model(classes, profile)[0]

    def loader(batch_size: int):
        return tiny_imagenet_loaders(profile, batch_size=batch_size, device=device).train_loader

    workers = data.train_loader.num_workers
    return Workload(
        model_fn,
        data.train_loader,
        data.image_size,
        loaders={f"DataLoader, {workers} workers, JPEG decode and augmentation": loader},
    )
