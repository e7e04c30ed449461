"""Inception v3 fine-tuned on tiny-imagenet-200: the training chapter's second case study.

:func:`finetune_model` takes the pretrained model
(:func:`~rocm_dl_guide.casestudies.inception_pretrained.load_pretrained`),
replaces the classifier and switches the auxiliary head off, and :func:`train`
runs the guide's SGD/StepLR recipe (:data:`RECIPE`) through the shared loop
:func:`rocm_dl_guide.training.train.fit` on the loaders of
:func:`~rocm_dl_guide.casestudies.tiny_imagenet.tiny_imagenet_loaders`. This is
the registry's ``inception-v3`` (``train inception-v3``); :func:`training_workload`
is what ``selfcheck`` times, and :func:`compare_training_speed` the page's
float32 / AMP / channels-last comparison.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rocm_dl_guide.casestudies.inception_pretrained import (
    LoadedModel,
    load_pretrained,
    random_inception,
)
from rocm_dl_guide.casestudies.tiny_imagenet import (
    BATCH_SIZE,
    TRAIN_CROP_SIZE,
    VAL_CROP_SIZE,
    VAL_RESIZE_SIZE,
    TinyImageNet,
    tiny_imagenet_loaders,
)
from rocm_dl_guide.core import files, profiles

if TYPE_CHECKING:  # pragma: no cover
    from torch import nn

    from rocm_dl_guide.training.training_speed import SpeedComparison, Workload

# The guide's fine-tuning recipe (torchvision's reference classification script;
# the input sizes and the batch are the loaders', in tiny_imagenet).
LEARNING_RATE = 0.1
MOMENTUM = 0.9
WEIGHT_DECAY = 1e-4
LR_STEP_SIZE = 30
LR_GAMMA = 0.1
RANDOM_INIT_LR = 0.001
"""Learning rate used instead of 0.1 when the model starts from random weights
(the smoke profile, or offline): the guide's 0.1 is a fine-tuning rate and makes
training from scratch diverge within a few dozen steps."""
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
    """The initial learning rate used."""
    epochs: int
    device: str
    profile: str
    weights: Path | None
    """Where the trained weights were saved (``trained_inception_v3.pt``), if anywhere."""
    pretrained: bool = False
    """Whether training started from the ImageNet weights (else random weights)."""

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
            f"{self.data.image_size}px): {val} after {self.epochs} epoch(s) on {self.device}; "
            f"profile {self.profile}; start: {self.start}, lr {self.lr:g}; "
            f"data: {self.data.prepared.note}{saved}"
        )

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
    amp: bool = False,
    channels_last: bool = False,
    fsdp: bool = False,
    image_size: int | None = None,
    batch_size: int = BATCH_SIZE,
    lr: float | None = None,
    seed: int = 0,
) -> InceptionRun:
    """Fine-tune Inception v3 on tiny-imagenet-200 with the guide's recipe.

    SGD (lr 0.1, momentum 0.9, weight decay 1e-4) with StepLR (x0.1 every 30
    epochs), cross-entropy loss, batch 32, 90 epochs in the ``full`` profile;
    the profile caps epochs (``smoke``: 2, the registry's cap for ``inception-v3``),
    batches per epoch and the input size. With
    ``checkpoint_dir`` every epoch is checkpointed (``resume`` continues;
    ``checkpoint_every`` adds checkpoints every N steps inside the epochs) and the
    final weights are saved as ``trained_inception_v3.pt``. ``lr`` defaults to
    the guide's 0.1 from pretrained weights and :data:`RANDOM_INIT_LR` from
    random ones.
    """
    import torch

    from rocm_dl_guide.core import device as devices
    from rocm_dl_guide.training import train as loop

    n_epochs = profile.epochs(FULL_EPOCHS, epochs, example="inception-v3")
    dev = devices.pick()
    data = tiny_imagenet_loaders(
        profile, image_size=image_size, batch_size=batch_size, seed=seed, device=dev
    )
    torch.manual_seed(seed)
    model, loaded = finetune_model(len(data.classes), profile)
    if lr is None:
        lr = LEARNING_RATE if loaded.pretrained else RANDOM_INIT_LR
    optimizer = torch.optim.SGD(
        model.parameters(), lr=lr, momentum=MOMENTUM, weight_decay=WEIGHT_DECAY
    )
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=LR_STEP_SIZE, gamma=LR_GAMMA)
    result = loop.fit(
        model,
        data.train_loader,
        epochs=n_epochs,
        optimizer=optimizer,
        scheduler=scheduler,
        val_loader=data.val_loader,
        device=dev,
        max_train_batches=profile.max_train_batches,
        checkpoint_dir=checkpoint_dir,
        resume=resume,
        checkpoint_every=checkpoint_every,
        amp=amp,
        channels_last=channels_last,
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
        lr=lr,
        epochs=n_epochs,
        device=str(devices.describe()),
        profile=profile.name,
        weights=result.weights,
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


def compare_training_speed(
    profile: profiles.Profile,
    batch_size: int | None = None,
    image_size: int | None = None,
) -> SpeedComparison:
    """Training-step throughput of Inception v3 in float32, channels-last, autocast
    and both, measured in one run (see :func:`rocm_dl_guide.training.training_speed.compare`).

    Uses tiny-imagenet-200 batches at the profile's input size and a randomly
    initialised model (weights do not change the speed). On the CPU the run is
    short (batch 16, 1 warm-up step, 3 timed repeats of 3 steps); on a GPU,
    batch 32 with 5 warm-up steps and 5 repeats of 20 steps.
    """
    import torch

    from rocm_dl_guide.core import device as devices
    from rocm_dl_guide.training import training_speed

    dev = devices.pick()
    on_gpu = dev.type == "cuda"
    data = tiny_imagenet_loaders(
        profile,
        image_size=image_size,
        batch_size=batch_size or (BATCH_SIZE if on_gpu else 16),
        device=dev,
    )
    n = len(data.classes)
    torch.manual_seed(0)
    result = training_speed.compare(
        lambda: random_inception(n, aux_logits=False),
        data.train_loader,
        dev,
        steps=20 if on_gpu else 3,
        warmup=5 if on_gpu else 1,
        repeats=5 if on_gpu else 3,
    )
    result.batch_size = data.train_loader.batch_size
    result.image_size = data.image_size
    return result
