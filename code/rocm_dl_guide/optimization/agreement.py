"""Agreement: how often a reduced-precision engine gives the fp32 model's answer.

Agreement is top-1 agreement with the fp32 model's own predictions on a test
set, with its 95% confidence interval (:func:`wilson_interval`), and each
engine's accuracy beside it (:func:`prediction_agreement`). It is measured on a
*trained* network, never on random weights (whose near-tied logits flip for no
good reason): the CIFAR-10 network of the training chapter
(:func:`trained_cifar10`, trained once and kept for every page and command
that compares engines), on its test images (:func:`test_arrays`). Which
engines are compared, and how they are built, is
:mod:`rocm_dl_guide.optimization.precision`'s job.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from rocm_dl_guide.core import profiles
from rocm_dl_guide.optimization.ort_int8 import PrecisionError
from rocm_dl_guide.optimization.precision_results import LEAST_SURE_COLUMN, LOGIT_COLUMN


class Predictor(Protocol):
    """What :func:`prediction_agreement` compares: an engine
    (:class:`rocm_dl_guide.optimization.precision.Engine`) by its names and its
    function from an input batch to logits."""

    backend: str
    precision: str
    run: Callable[[np.ndarray], np.ndarray]

    @property
    def key(self) -> str: ...


@dataclass
class PredictionAgreement:
    """How one engine's predictions compare with the fp32 model's, on a test set."""

    backend: str
    precision: str
    top1_agreement: float
    """Share of test images whose top-1 class equals the fp32 model's."""
    accuracy: float
    images: int
    key: str = ""
    """The engine's key (:func:`rocm_dl_guide.optimization.precision.engine_key`)."""
    boundary_agreement: float | None = None
    """Top-1 agreement on the test images nearest the fp32 model's decision
    boundary (:func:`least_sure`): where a rounding error can change the answer."""
    boundary_images: int = 0
    logit_change: float | None = None
    """How far the engine's logits moved from the fp32 model's: per image, the
    largest change of a logit as a share of the fp32 model's largest logit
    (in magnitude); the median over the test images (:func:`logit_change`)."""

    @property
    def interval(self) -> tuple[float, float]:
        """The 95% confidence interval of :attr:`top1_agreement` (:func:`wilson_interval`)."""
        return wilson_interval(round(self.top1_agreement * self.images), self.images)


def wilson_interval(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson's score interval for a proportion (``z`` = 1.96: 95%), which,
    unlike the normal approximation, stays inside [0, 1] and is not empty at
    100% agreement (Brown, Cai and DasGupta 2001 recommend it for this)."""
    if n <= 0 or not 0 <= successes <= n:
        raise PrecisionError(f"{successes} successes out of {n}: no interval")
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


LEAST_SURE_SHARE = 0.1
"""The share of the test images, those with the smallest gap between the fp32
model's two largest logits, on which agreement is also counted on its own."""


def least_sure(logits: np.ndarray, share: float = LEAST_SURE_SHARE) -> np.ndarray:
    """The indices of the ``share`` of rows of ``logits`` (at least one) whose two
    largest values are closest: the inputs a model is least sure of, nearest its
    decision boundary, where a small change to the logits flips the top class."""
    if logits.ndim != 2 or logits.shape[1] < 2 or len(logits) == 0:
        raise PrecisionError(f"logits of shape {logits.shape}: need images x classes (2 or more)")
    top2 = np.sort(logits, axis=1)[:, -2:]
    n = max(1, round(share * len(logits)))
    return np.argsort(top2[:, 1] - top2[:, 0], kind="stable")[:n]


def logit_change(logits: np.ndarray, reference: np.ndarray) -> float:
    """The median over images (rows) of the largest change of a logit from
    ``reference``, as a share of the reference row's largest logit in magnitude:
    how much a format's rounding moved the network's output, even where the top
    class stayed."""
    if logits.shape != reference.shape or reference.ndim != 2 or len(reference) == 0:
        raise PrecisionError(f"logits of shape {logits.shape} against {reference.shape}")
    scale = np.maximum(np.abs(reference).max(axis=1), np.finfo(np.float32).tiny)
    return float(np.median(np.abs(logits - reference).max(axis=1) / scale))


def prediction_agreement(
    engine_list: list[Predictor], images: np.ndarray, labels: np.ndarray, batch: int = 100
) -> list[PredictionAgreement]:
    """Top-1 agreement of every engine with the first one (the fp32 reference)
    and each one's accuracy, on ``images``/``labels``; agreement also on the
    reference's :func:`least_sure` images alone."""
    if not engine_list:
        raise PrecisionError("no engines to compare")
    if len(images) != len(labels) or len(images) == 0:
        raise PrecisionError(f"{len(images)} images for {len(labels)} labels")
    logits = []
    for engine in engine_list:
        out = [np.asarray(engine.run(images[i : i + batch])) for i in range(0, len(images), batch)]
        logits.append(np.concatenate(out).astype(np.float32))
    preds = [one.argmax(1) for one in logits]
    reference, reference_logits = preds[0], logits[0]
    hard = least_sure(reference_logits)
    return [
        PredictionAgreement(
            backend=e.backend,
            precision=e.precision,
            top1_agreement=float((p == reference).mean()),
            accuracy=float((p == labels).mean()),
            images=len(labels),
            key=e.key,
            boundary_agreement=float((p[hard] == reference[hard]).mean()),
            boundary_images=len(hard),
            logit_change=logit_change(out, reference_logits),
        )
        for e, p, out in zip(engine_list, preds, logits, strict=True)
    ]


AGREEMENT_EPOCHS = {"smoke": 4}
"""Epochs the agreement model trains for where the training chapter's own
(two, as the guide has it) leave it undecided: after two epochs on the
fixtures its top logits are often nearly tied (57.5% test accuracy), so a
rounding error flips predictions for no good reason; after three or four it
classifies nearly every fixture test image right. The real data source keeps
the chapter's epochs."""


AGREEMENT_MODEL = "cifar10-agreement.pt"
"""The trained agreement network's weights, in the models folder
(:func:`rocm_dl_guide.optimization.onnx_files.models_dir`), beside a record
(``<name>.json``) of what trained them (:func:`_training_key`)."""


def trained_cifar10(profile: profiles.Profile, epochs: int | None = None):
    """The training chapter's CIFAR-10 network, trained with the shared loop
    for ``epochs`` (default: :data:`AGREEMENT_EPOCHS` on the fixtures, else the
    profile's); returns ``(model, data, note)``, ``data`` being fresh loaders.

    It is trained once and kept (:data:`AGREEMENT_MODEL`): the precision and
    int8 pages and ``bench precision`` compare their engines on the same
    network, and only the first of them trains it. The record beside the
    weights holds what decides them (the data set's marker, the profile's
    sizes, the epochs, the device type, PyTorch's version and the source of the
    network and the loop); any difference trains it again. Processes asking at
    once train it once (:func:`rocm_dl_guide.core.files.build_lock`). The
    network is trained on one thread: its batches of four images are too small
    to share between threads, and a second one made each step slower, not faster.
    """
    import torch

    from rocm_dl_guide.casestudies import cifar10
    from rocm_dl_guide.core import device as devices
    from rocm_dl_guide.core.files import build_lock
    from rocm_dl_guide.optimization import onnx_files

    if epochs is None and profile.data_source == "fixtures":
        epochs = AGREEMENT_EPOCHS.get(profile.name)
    n_epochs = profile.epochs(cifar10.FULL_EPOCHS, epochs, example="cifar10")
    dev = devices.pick()
    data = cifar10.load(profile, device=dev)
    key = _training_key(profile, n_epochs, data, dev)
    path = onnx_files.models_dir() / AGREEMENT_MODEL
    record = _kept(path, key)
    if record is None:
        with build_lock(path, what="the CIFAR-10 agreement network"):
            record = _kept(path, key)  # another process may have trained it meanwhile
            if record is None:
                record = _train_and_keep(profile, n_epochs, path, key)
    model = cifar10.Net()
    model.load_state_dict(torch.load(path, map_location="cpu", weights_only=True))
    epochs = record["epochs"]
    note = (
        f"the CIFAR-10 network of the training chapter, trained for {epochs} "
        f"epoch{'' if epochs == 1 else 's'} on {data.prepared.note}"
    )
    return model.eval(), data, note


def _training_key(profile: profiles.Profile, epochs: int, data, dev) -> dict:
    """What decides the agreement network's weights, as :func:`trained_cifar10` records it."""
    import hashlib
    import inspect

    import torch

    from rocm_dl_guide.casestudies import cifar10
    from rocm_dl_guide.core import datasets
    from rocm_dl_guide.training import train as loop

    code = hashlib.blake2b(digest_size=16)
    for module in (cifar10, loop):
        code.update(inspect.getsource(module).encode())
    return {
        "data": datasets.read_marker(data.prepared.root),
        "profile": [
            profile.name,
            profile.data_source,
            profile.max_epochs,
            profile.max_train_batches,
        ],
        "epochs": epochs,
        "device": dev.type,
        "torch": torch.__version__,
        "code": code.hexdigest(),
    }


def _kept(path, key: dict) -> dict | None:
    """The record of the network kept at ``path`` if it was trained as ``key`` says
    and the file is the one written then, else ``None``."""
    import json

    try:
        record = json.loads(path.with_name(path.name + ".json").read_text(encoding="utf-8"))
        stat = path.stat()
    except (OSError, ValueError):
        return None
    same = record.get("key") == json.loads(json.dumps(key)) and record.get("file") == [
        stat.st_size,
        stat.st_mtime_ns,
    ]
    return record if same else None


def _train_and_keep(profile: profiles.Profile, epochs: int, path, key: dict) -> dict:
    """Train the network on one thread, write its weights to ``path`` and then its record."""
    import json

    import torch

    from rocm_dl_guide.casestudies import cifar10
    from rocm_dl_guide.core.files import atomic_write

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        run = cifar10.train(profile, epochs=epochs, progress=False, log=None)
    finally:
        torch.set_num_threads(threads)
    with atomic_write(path, "wb") as fh:
        torch.save(run.model.cpu().state_dict(), fh)
    stat = path.stat()
    record = {
        "key": key,
        "file": [stat.st_size, stat.st_mtime_ns],
        "epochs": run.epochs,
        "test_accuracy": run.test_accuracy,
    }
    with atomic_write(path.with_name(path.name + ".json"), "w") as fh:
        json.dump(record, fh, indent=1, default=str)
    return json.loads(json.dumps(record, default=str))


def what_agreement_shows(profile: profiles.Profile, accuracy: float) -> str:
    """A sentence for the pages on what this build's agreement figures can show:
    a trained network is sure of most answers, which keep their top class
    through any rounding, so agreement over the whole set is near 100% and the
    least-sure and logit columns are the ones that tell formats apart; on the
    fixtures, also why the accuracy is what it is (some labels are wrong on
    purpose, and agreement compares answers, not labels)."""
    text = (
        f"The fp32 network is right on {accuracy:.1%} of the test images. It is sure of "
        "most of its answers, and those keep their top class through any rounding, so "
        "agreement over the whole set stays near 100%. The columns "
        f'"{LEAST_SURE_COLUMN}" and "{LOGIT_COLUMN}" are where the formats differ.'
    )
    if profile.data_source != "fixtures":
        return text
    return text + (
        " On the generated stand-in for CIFAR-10, some test labels are wrong on purpose, "
        "so that no accuracy reads better than the real data set's; agreement compares "
        "answers with fp32's, not with labels. With the real data source "
        f"({profiles.DATA_SOURCE_VAR}=real) both are measured on the real test images."
    )


def test_arrays(data, limit: int | None) -> tuple[np.ndarray, np.ndarray]:
    """The first ``limit`` test images (all of them for ``None``) and labels."""
    images, labels = [], []
    for x, y in data.test_loader:
        images.append(np.asarray(x, dtype=np.float32))
        labels.append(np.asarray(y))
        if limit is not None and sum(len(b) for b in images) >= limit:
            break
    xs, ys = np.concatenate(images)[:limit], np.concatenate(labels)[:limit]
    # MIGraphX programs have a fixed batch: keep whole batches of 100 where possible.
    keep = (len(xs) // 100) * 100 or len(xs)
    return np.ascontiguousarray(xs[:keep]), ys[:keep]
