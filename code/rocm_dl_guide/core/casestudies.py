"""The guide's case studies: one typed record each, in one registry.

Every place that needs to know the case studies reads :data:`REGISTRY`: the
command line (``train NAME`` and its flags), ``selfcheck`` (which ones to train
on a GPU, and the model and loader it times), the recipe table of the training
chapter, the run profiles' per-example epoch caps and the tests. Each case study
has one name, its command-line name, everywhere.

Adding a case study means one :class:`CaseStudy` entry here, plus its module
(a ``train`` function that returns a run object) and its page.

The records name their functions by module and attribute and import them only
when asked (:meth:`CaseStudy.train_function`), so reading the registry imports
neither PyTorch nor TensorFlow.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

FLAGS = ("amp", "channels_last", "fsdp", "nproc", "qlora", "model")
"""The training flags a case study may support (``--amp``, ``--channels-last``,
``--fsdp``, ``--nproc``, ``--qlora``, ``--model``)."""
FRAMEWORKS = ("pytorch", "tensorflow")


class UnknownCaseStudyError(ValueError):
    """A name that is not in :data:`REGISTRY`."""


@dataclass(frozen=True)
class CaseStudy:
    """One training example of the guide."""

    name: str
    """The command-line name (``train NAME``), the case study's one name."""
    summary: str
    """One line for ``--help``."""
    framework: str
    """``pytorch`` or ``tensorflow``."""
    module: str
    """The module under ``rocm_dl_guide`` that holds it."""
    train: str
    """The module's training function: keywords ``profile`` and ``epochs`` (PyTorch
    ones also ``checkpoint_dir``, ``resume``, ``checkpoint_every``, ``progress`` and the supported
    :attr:`flags`); returns a run object with ``summary()``."""
    page: str
    """The book page that teaches it (a Sphinx docname)."""
    flags: frozenset[str] = frozenset()
    """Which of :data:`FLAGS` it supports."""
    workload: str | None = None
    """For ``selfcheck``: the module's function ``(profile, device) -> Workload``
    (model factory, training loader, input size) whose training speed it times;
    ``None`` for case studies selfcheck does not train."""
    recipe_attr: str | None = "RECIPE"
    """The module's dict of the ``full`` profile's hyperparameters, or ``None``."""
    epoch_caps: Mapping[str, int] = field(default_factory=dict)
    """Tighter epoch caps than the profile's own, by profile name."""
    data_notes: Mapping[str, str] | None = None
    """What it trains on, by data source, where that is not what the profile's
    :meth:`~rocm_dl_guide.core.profiles.Profile.source_note` says (generated fixtures
    or the real data sets); ``None`` where it is."""

    def data_line(self, profile: Any) -> str:
        """The line the command prints about its data, for ``profile``'s data source."""
        if self.data_notes is None:
            return profile.source_note()
        return self.data_notes[profile.data_source]

    def __post_init__(self) -> None:
        if self.framework not in FRAMEWORKS:
            raise ValueError(f"{self.name}: framework must be one of {FRAMEWORKS}")
        unknown = set(self.flags) - set(FLAGS)
        if unknown:
            raise ValueError(f"{self.name}: unknown flag(s) {sorted(unknown)}")
        object.__setattr__(self, "epoch_caps", MappingProxyType(dict(self.epoch_caps)))

    @property
    def default_checkpoint_dir(self) -> Path:
        """Where ``train NAME`` checkpoints without ``--checkpoint-dir`` (relative
        to the working folder)."""
        return Path("checkpoints") / self.name

    @property
    def checkpoints(self) -> bool:
        """Whether its runs write checkpoints that ``--resume`` continues (PyTorch ones)."""
        return self.framework == "pytorch"

    def supports(self, flag: str) -> bool:
        """Whether ``flag`` (one of :data:`FLAGS`) applies to this case study."""
        if flag not in FLAGS:
            raise ValueError(f"unknown flag {flag!r}: one of {', '.join(FLAGS)}")
        return flag in self.flags

    def _attr(self, name: str) -> Any:
        return getattr(importlib.import_module(f"rocm_dl_guide.{self.module}"), name)

    def train_function(self) -> Callable[..., Any]:
        """The training function (imports the module)."""
        return self._attr(self.train)

    def workload_function(self) -> Callable[..., Any]:
        """The selfcheck workload function; ``ValueError`` where there is none."""
        if self.workload is None:
            raise ValueError(f"{self.name} has no training workload for selfcheck")
        return self._attr(self.workload)

    def recipe(self) -> dict[str, Any] | None:
        """The ``full`` profile's hyperparameters (a copy), or ``None``."""
        return None if self.recipe_attr is None else dict(self._attr(self.recipe_attr))


_PINNED = "pinned by revision and checksum (downloaded once; no fallback)"
TINY_LM_DATA = MappingProxyType(
    {
        "fixtures": "data: Python's own documentation (pydoc_data.topics, installed with "
        "Python: real text, no download)",
        "real": f"data: WikiText-2 (raw) from the Hugging Face Hub, {_PINNED}",
    }
)
LORA_DATA = MappingProxyType(
    {
        "fixtures": "data: passages of Python's own documentation (pydoc_data.topics) and "
        "tiny-lm, pretrained on it here",
        "real": "data: passages of Python's own documentation and SmolLM2-135M, pretrained, "
        f"from the Hugging Face Hub, {_PINNED}",
    }
)
POSTTRAIN_DATA = MappingProxyType(
    {
        "fixtures": "data: passages of Python's own documentation (pydoc_data.topics) and "
        "tiny-lm, fine-tuned on them with LoRA here",
        "real": "data: passages of Python's own documentation and SmolLM2-135M from the "
        f"Hugging Face Hub ({_PINNED}), fine-tuned on them with LoRA here",
    }
)
"""The language-model case studies' data, by data source."""

_ALL_PYTORCH_FLAGS = frozenset({"amp", "channels_last", "fsdp", "nproc"})

REGISTRY: Mapping[str, CaseStudy] = MappingProxyType(
    {
        cs.name: cs
        for cs in (
            CaseStudy(
                name="mnist-pytorch",
                summary="MNIST CNN with PyTorch",
                framework="pytorch",
                module="casestudies.mnist",
                train="train_pytorch",
                page="book/frameworks/pytorch",
                flags=frozenset({"fsdp", "nproc"}),
                workload="training_workload",
            ),
            CaseStudy(
                name="mnist-tensorflow",
                summary="MNIST with Keras",
                framework="tensorflow",
                module="casestudies.mnist",
                train="train_keras",
                page="book/frameworks/tensorflow",
                recipe_attr=None,
            ),
            CaseStudy(
                name="inception-v3",
                summary="fine-tune Inception v3 on tiny-imagenet-200",
                framework="pytorch",
                module="casestudies.inception",
                train="train",
                page="book/training/inception-tiny-imagenet",
                flags=_ALL_PYTORCH_FLAGS,
                workload="training_workload",
                # The slowest smoke run (about 15 s an epoch on two CPU cores); two
                # epochs of its fixture (32 steps) already show both losses falling.
                epoch_caps={"smoke": 2},
            ),
            CaseStudy(
                name="cifar10",
                summary="custom CNN on CIFAR-10",
                framework="pytorch",
                module="casestudies.cifar10",
                train="train",
                page="book/training/cifar10",
                flags=_ALL_PYTORCH_FLAGS,
                workload="training_workload",
            ),
            CaseStudy(
                name="fashion-mnist",
                summary="Keras classifier on Fashion-MNIST",
                framework="tensorflow",
                module="casestudies.fashion_mnist",
                train="train",
                page="book/training/fashion-mnist",
            ),
            CaseStudy(
                name="imdb",
                summary="Keras sentiment model on IMDB",
                framework="tensorflow",
                module="casestudies.imdb",
                train="train",
                page="book/training/imdb",
            ),
            CaseStudy(
                name="tiny-lm",
                summary="pretrain a small Llama-style decoder on Python's documentation",
                framework="pytorch",
                module="lm.pretrain",
                train="train",
                page="book/language-models/pretraining",
                flags=frozenset({"amp", "fsdp", "nproc"}),
                workload="training_workload",
                # two passes over the corpus at 4 sequences a step (about 45 s on two
                # CPU cores) bring held-out perplexity to well below half the unigram model's
                epoch_caps={"smoke": 2, "gpu": 8},
                data_notes=TINY_LM_DATA,
            ),
            CaseStudy(
                name="lora",
                summary="LoRA (PEFT) fine-tuning of tiny-lm: name a passage's topic",
                framework="pytorch",
                module="lm.lora",
                train="train",
                page="book/language-models/lora",
                flags=frozenset({"amp", "fsdp", "nproc", "qlora"}),
                # six passes over the 392 training passages (about 20 s on two CPU cores)
                epoch_caps={"smoke": 6},
                data_notes=LORA_DATA,
            ),
            CaseStudy(
                name="dpo",
                summary="DPO (TRL) from the LoRA model: prefer the right topic to the wrong one",
                framework="pytorch",
                module="lm.dpo",
                train="train",
                page="book/language-models/dpo",
                flags=frozenset({"model"}),
                # its page shows its RECIPE; the training chapter's table is for
                # the examples that train from scratch or fine-tune with the loop
                recipe_attr=None,
                data_notes=POSTTRAIN_DATA,
            ),
            CaseStudy(
                name="grpo",
                summary="GRPO (TRL) from the LoRA model, rewarded by code for the right topic",
                framework="pytorch",
                module="lm.grpo",
                train="train",
                page="book/language-models/grpo",
                flags=frozenset({"model"}),
                # its page shows its RECIPE; the training chapter's table is for
                # the examples that train from scratch or fine-tune with the loop
                recipe_attr=None,
                data_notes=POSTTRAIN_DATA,
            ),
        )
    }
)
"""Command-line name -> :class:`CaseStudy`, in the order the book teaches them."""


def get(name: str) -> CaseStudy:
    """The case study called ``name``; :class:`UnknownCaseStudyError` names the choices."""
    try:
        return REGISTRY[name]
    except KeyError:
        raise UnknownCaseStudyError(
            f"unknown case study {name!r}: choose one of {', '.join(REGISTRY)}"
        ) from None


def names(framework: str | None = None, with_flag: str | None = None) -> tuple[str, ...]:
    """Registry names, optionally those of one framework or supporting one flag."""
    return tuple(
        cs.name
        for cs in REGISTRY.values()
        if (framework is None or cs.framework == framework)
        and (with_flag is None or cs.supports(with_flag))
    )
