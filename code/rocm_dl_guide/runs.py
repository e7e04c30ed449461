"""What a classification case study returns: one shape for PyTorch and Keras runs.

:class:`ClassifierRun` is shared by the MNIST runs (:mod:`rocm_dl_guide.mnist`)
and the Fashion-MNIST case study, so that neither case study imports the other.
"""

from __future__ import annotations

from dataclasses import dataclass

from rocm_dl_guide.datasets import PreparedData


@dataclass
class ClassifierRun:
    """A trained classifier's test result, how it was trained and on what data."""

    framework: str
    test_accuracy: float
    test_loss: float
    epochs: int
    device: str
    profile: str
    data: PreparedData
    result: object
    """The framework's training result (``train.TrainResult`` or ``keras_train.KerasResult``)."""
    dataset: str = "MNIST"
    """The data set's name in the summary and plot title (also ``Fashion-MNIST``)."""

    def summary(self) -> str:
        return (
            f"{self.framework} {self.dataset}: test accuracy {100 * self.test_accuracy:.1f}% "
            f"(loss {self.test_loss:.3f}) after {self.epochs} epoch(s) on {self.device}; "
            f"profile {self.profile}; data: {self.data.note}"
        )

    def plot(self, ax=None):
        title = f"{self.framework} {self.dataset} ({self.data.kind} data)"
        return self.result.plot(ax=ax, title=title)
