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


def run_record(example: str, run: object, data_source: str | None = None) -> dict:
    """The facts of a finished training run as one JSON-ready dict.

    Keys: ``example``, ``world_size``, ``backend`` (the process group's, ``None``
    for one process), ``epochs_completed``, ``test_accuracy`` (the run's own,
    else its last validation accuracy), ``resumed_from_epoch`` (``None`` when it
    started from scratch), ``img_per_s`` (training throughput of the last epoch,
    summed over ranks; ``None`` where the framework does not report it),
    ``device``, ``profile`` and ``data_source`` (``real`` or ``fixtures``, as the
    caller resolved it). Works for every case study's run object.
    """
    result = getattr(run, "result", None)
    history = getattr(result, "history", None)
    torch_run = isinstance(history, list)  # train.TrainResult; Keras keeps a DataFrame
    final = history[-1] if torch_run and history else None
    accuracy = getattr(run, "test_accuracy", None)
    if accuracy is None and final is not None:
        accuracy = final.val_accuracy
    resumed = getattr(result, "resumed_from_epoch", 0) if torch_run else 0
    return {
        "example": example,
        "world_size": getattr(result, "world_size", 1),
        "backend": getattr(result, "backend", None),
        "epochs_completed": len(history) if history is not None else 0,
        "test_accuracy": None if accuracy is None else float(accuracy),
        "resumed_from_epoch": resumed or None,
        "img_per_s": final.images_per_second if final is not None else None,
        "device": getattr(run, "device", None),
        "profile": getattr(run, "profile", None),
        "data_source": data_source,
    }
