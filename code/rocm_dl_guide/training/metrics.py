"""What the training loop counts: the running loss and accuracy over an epoch's
batches (:class:`Tally`, kept on the device so that the GPU never waits for a
read-back, summed over ranks in a distributed run), the labels it leaves out
(:data:`IGNORE_INDEX`), and one epoch's row of a training history
(:class:`EpochMetrics`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from rocm_dl_guide.core import distributed


@dataclass
class EpochMetrics:
    """One row of a training history."""

    epoch: int
    """1-based epoch number."""
    train_loss: float
    """Mean loss of the main output over this epoch's training batches."""
    train_accuracy: float | None
    """Accuracy over this epoch's training batches (``None`` if labels are not classes)."""
    val_loss: float | None
    val_accuracy: float | None
    images_per_second: float
    """Training throughput of this epoch: samples / wall time of the training pass."""
    seconds: float
    """Wall time of the whole epoch: training and validation."""
    lr: float
    """Learning rate of the first parameter group during the epoch's last step."""


IGNORE_INDEX = -100
"""Labels of this value count in neither the loss nor the accuracy (PyTorch's
cross-entropy ignores them by default; a prompt's positions when only an answer
is learnt)."""


def _correct(logits: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor] | None:
    """(number correct, number of labels), 0-d tensors on the device, or None if
    labels are not classes. Labels equal to :data:`IGNORE_INDEX` are left out."""
    if y.is_floating_point() or y.is_complex() or logits.dim() != y.dim() + 1:
        return None
    valid = y != IGNORE_INDEX
    return ((logits.argmax(dim=1) == y) & valid).sum(), valid.sum()


class Tally:
    """Running per-sample loss and accuracy over batches, kept on the device."""

    def __init__(self, device: torch.device) -> None:
        self.loss_sum = torch.zeros((), dtype=torch.float64, device=device)
        self.correct = torch.zeros((), dtype=torch.int64, device=device)
        self.samples = 0
        self.labels = 0
        self.classify = True  # False once labels turn out not to be class indices

    def add(self, logits: torch.Tensor, y: torch.Tensor, loss: torch.Tensor) -> None:
        n = y.shape[0]
        self.loss_sum += loss.double() * n
        self.samples += n
        hit = _correct(logits, y) if self.classify else None
        if hit is None:
            self.classify = False
        else:
            self.correct += hit[0]
            self.labels += hit[1]

    def loss(self) -> float:
        return self.loss_sum.item() / self.samples

    def accuracy(self) -> float | None:
        labels = int(self.labels)
        return self.correct.item() / labels if self.classify and labels else None

    def state(self) -> dict[str, Any]:
        """The running sums as plain numbers (for a mid-epoch checkpoint)."""
        return {
            "loss_sum": self.loss_sum.item(),
            "correct": int(self.correct.item()),
            "samples": self.samples,
            "labels": int(self.labels),
            "classify": self.classify,
        }

    @classmethod
    def restored(cls, device: torch.device, state: Mapping[str, Any]) -> Tally:
        tally = cls(device)
        tally.loss_sum += state["loss_sum"]
        tally.correct += state["correct"]
        tally.samples, tally.labels = state["samples"], state["labels"]
        tally.classify = state["classify"]
        return tally

    def sum_over_ranks(self) -> None:
        """Replace this rank's totals by the totals of all ranks (distributed runs)."""
        device = self.loss_sum.device
        totals = distributed.all_reduce_sums(
            [self.loss_sum.item(), self.correct.item(), self.samples, self.labels], device
        )
        self.loss_sum = torch.tensor(totals[0], dtype=torch.float64, device=device)
        self.correct = torch.tensor(int(totals[1]), dtype=torch.int64, device=device)
        self.samples, self.labels = int(totals[2]), int(totals[3])
