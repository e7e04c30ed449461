"""Training checkpoints: the files :func:`rocm_dl_guide.training.train.fit` writes and resumes from.

``checkpoint_dir/last.pt`` is written at the end of every epoch: model,
optimizer, scheduler and grad-scaler state, the epoch number, the full history
and the RNG states (Python, NumPy, PyTorch, the training loader's generator,
and the GPU's when training on one). Every file is written atomically (a
temporary file in the same directory, flushed and fsync'ed, then
``os.replace``), so a reader never sees half a checkpoint and a crash while
saving leaves the previous one intact. ``best.pt`` holds the weights of the
epoch with the best validation accuracy so far. An FSDP run keeps its model and
optimizer state in a ``torch.distributed.checkpoint`` folder
(``sharded-epoch-N``) that ``last.pt`` names (:mod:`rocm_dl_guide.training.sharded`).
"""

from __future__ import annotations

import os
import random
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch import nn

from rocm_dl_guide.core import files
from rocm_dl_guide.training import sharded

CHECKPOINT_NAME = "last.pt"
"""File name of the checkpoint written at every epoch end."""
BEST_NAME = "best.pt"
"""File name of the weights of the best epoch by validation accuracy."""
SHARDED_PREFIX = "sharded-epoch-"
"""FSDP runs: the DCP folder of epoch N is ``sharded-epoch-N`` next to ``last.pt``."""
SHARDED_STEP_PREFIX = "sharded-step-"
"""FSDP runs: the DCP folder of a checkpoint inside an epoch, at global step N."""
FORMAT = "rocm_dl_guide.checkpoint/1"
REQUIRED_KEYS = ("format", "epoch", "model", "optimizer", "history", "rng")


class CheckpointError(RuntimeError):
    """A checkpoint or weights file that cannot be used (corrupt, truncated, foreign)."""

    def __init__(self, path: str | os.PathLike, reason: str):
        self.path = Path(path)
        self.reason = reason
        super().__init__(f"{self.path}: {reason}")


def listing(folder: str | os.PathLike) -> list[tuple[str, str]]:
    """The files of a checkpoint folder a reader cares about, with their sizes in
    words (``("best.pt", "87.5 MB")``): hidden files, lock files and temporary
    files left out; a folder (a sharded checkpoint) sized by what it holds."""
    out = []
    for path in sorted(Path(folder).iterdir()):
        if path.name.startswith(".") or path.name.endswith(files.LOCK_SUFFIX):
            continue
        size = (
            sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
            if path.is_dir()
            else path.stat().st_size
        )
        out.append((path.name + ("/" if path.is_dir() else ""), files.human_bytes(size)))
    return out


def describe_checkpoint(path: str | os.PathLike) -> str | None:
    """``"epoch 3"`` (or ``"epoch 3, 120 batches into epoch 4"`` for a checkpoint
    taken inside an epoch) for the training checkpoint at ``path``; ``None`` when
    there is none or it cannot be read.

    Cheap: the file is memory-mapped, so its tensors are not read (a full disk
    is no time to read a large checkpoint into memory).
    """
    path = Path(path)
    if not path.is_file():
        return None
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception:  # noqa: BLE001 - unreadable: say nothing rather than fail again
        return None
    if not isinstance(ckpt, dict) or ckpt.get("format") != FORMAT:
        return None
    text = f"epoch {ckpt.get('epoch')}"
    where = ckpt.get("in_epoch")
    if isinstance(where, dict) and where.get("batches"):
        text += f", {where['batches']} batches into epoch {where.get('epoch')}"
    return text


def last_good_checkpoint(folder: str | os.PathLike) -> str | None:
    """What a failed save in ``folder`` leaves intact, in words for a message:
    ``"the last good checkpoint DIR/last.pt (epoch 3) is intact"``; ``None``
    when ``folder`` holds no readable ``last.pt``."""
    path = Path(folder) / CHECKPOINT_NAME
    what = describe_checkpoint(path)
    return f"the last good checkpoint {path} ({what}) is intact" if what else None


def atomic_torch_save(obj: Any, path: Path) -> None:
    """``torch.save`` to ``path`` so that readers see the old file or the new, never half.

    Writes a hidden temporary file in the same directory (``.NAME.*.tmp``, never
    mistaken for a checkpoint), flushes and fsyncs it, renames it over ``path``
    and fsyncs the directory. On any error the temporary file is removed and
    ``path`` is untouched. A full disk raises :class:`files.DiskFullError`
    naming ``path``, the space left and, for a checkpoint (``last.pt``,
    ``best.pt``, or any file next to a ``last.pt``), the last good checkpoint
    with its epoch and the advice to rerun with ``--resume``.
    """
    path = Path(path)
    try:
        with files.atomic_write(path) as fh:
            torch.save(obj, fh)
    except files.DiskFullError as exc:
        intact = last_good_checkpoint(path.parent)
        if intact is None and path.name not in (CHECKPOINT_NAME, BEST_NAME):
            raise  # a weights file away from any training run: no --resume to suggest
        raise exc.but(intact=intact, advice=files.RESUME_ADVICE) from exc


def save_weights(model: nn.Module, path: str | os.PathLike) -> Path:
    """Save ``model.state_dict()`` to ``path`` atomically; returns the path."""
    path = Path(path)
    atomic_torch_save(model.state_dict(), path)
    return path


def load_weights(
    model: nn.Module,
    path: str | os.PathLike,
    map_location: str | torch.device | None = None,
    strict: bool = True,
) -> nn.Module:
    """Load weights saved by :func:`save_weights` (or a :func:`fit` checkpoint) into ``model``.

    Uses ``torch.load(weights_only=True)``. ``map_location=None`` loads onto the
    CPU first, and ``load_state_dict`` then copies into the model's own device,
    so weights saved on a GPU load on a CPU-only machine. A missing file raises
    ``FileNotFoundError``; a malformed, truncated or mismatching one raises
    :class:`CheckpointError` naming the file. Returns ``model``.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no weights file at {path}")
    try:
        state = torch.load(path, map_location=map_location or "cpu", weights_only=True)
    except Exception as exc:
        raise CheckpointError(
            path, f"not a readable PyTorch weights file ({type(exc).__name__}: {exc})"
        ) from exc
    if isinstance(state, Mapping) and state.get("format") == FORMAT and "model" in state:
        state = state["model"]
    if not isinstance(state, Mapping) or not all(
        isinstance(v, torch.Tensor) for v in state.values()
    ):
        raise CheckpointError(path, "does not hold a state dict (a mapping of names to tensors)")
    try:
        model.load_state_dict(state, strict=strict)
    except RuntimeError as exc:
        raise CheckpointError(path, f"does not match this model: {exc}") from exc
    return model


# --------------------------------------------------------------------------- RNG state


def _loader_generator(loader: Any) -> torch.Generator | None:
    """The ``torch.Generator`` a DataLoader shuffles with, if it was given one."""
    for owner in (loader, getattr(loader, "sampler", None)):
        gen = getattr(owner, "generator", None)
        if isinstance(gen, torch.Generator):
            return gen
    return None


def rng_state(device: torch.device, loader: Any = None) -> dict[str, Any]:
    """RNG states as plain types and tensors, so ``torch.load(weights_only=True)`` reads them.

    Includes the training loader's own generator, when it has one, so a resumed
    run shuffles exactly as an uninterrupted one would.
    """
    state: dict[str, Any] = {"python": random.getstate(), "torch": torch.get_rng_state()}
    gen = _loader_generator(loader)
    if gen is not None:
        state["loader"] = gen.get_state()
    try:
        import numpy as np
    except ImportError:  # pragma: no cover - numpy ships with every torch wheel in practice
        np = None
    if np is not None:
        kind, keys, pos, has_gauss, cached = np.random.get_state()
        state["numpy"] = {
            "kind": kind,
            "keys": torch.from_numpy(keys.astype("int64")),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "cached_gaussian": float(cached),
        }
    if device.type == "cuda" and torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: Mapping[str, Any], loader: Any = None) -> None:
    gen = _loader_generator(loader)
    if gen is not None and state.get("loader") is not None:
        gen.set_state(state["loader"].cpu())
    python = state["python"]
    random.setstate((python[0], tuple(python[1]), python[2]))
    torch.set_rng_state(state["torch"].cpu())
    if "numpy" in state:
        import numpy as np

        s = state["numpy"]
        np.random.set_state(
            (
                s["kind"],
                s["keys"].numpy().astype(np.uint32),
                s["pos"],
                s["has_gauss"],
                s["cached_gaussian"],
            )
        )
    cuda = state.get("cuda")
    if cuda and torch.cuda.is_available() and len(cuda) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all([t.cpu() for t in cuda])


# --------------------------------------------------------------------------- last.pt


def read_checkpoint(path: Path) -> dict[str, Any]:
    """Load and sanity-check a training checkpoint; raises :class:`CheckpointError`."""
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        raise CheckpointError(
            path,
            f"cannot be read as a checkpoint ({type(exc).__name__}: {exc}). "
            "It is corrupt or truncated; delete it to train from scratch, or restore a copy.",
        ) from exc
    if not isinstance(ckpt, dict) or ckpt.get("format") != FORMAT:
        raise CheckpointError(path, "is not a rocm_dl_guide training checkpoint")
    missing = [k for k in REQUIRED_KEYS if k not in ckpt]
    if missing:
        raise CheckpointError(path, f"is incomplete: missing {', '.join(missing)}")
    epoch, history = ckpt["epoch"], ckpt["history"]
    if (
        not isinstance(epoch, int)
        or not isinstance(history, list)
        or not all(isinstance(row, dict) for row in history)
        or [row.get("epoch") for row in history] != list(range(1, epoch + 1))
    ):
        raise CheckpointError(path, f"is inconsistent: epoch {epoch!r} does not match its history")
    return ckpt


def sharded_folders(folder: Path) -> list[Path]:
    """The DCP folders of an FSDP run's checkpoints in ``folder`` (epoch ends and steps)."""
    return sorted(
        p
        for prefix in (SHARDED_PREFIX, SHARDED_STEP_PREFIX)
        for p in folder.glob(f"{prefix}*")
        if p.is_dir()
    )


def write_checkpoint(
    path: Path,
    *,
    history: list[dict[str, Any]],
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    scaler: torch.amp.GradScaler,
    rng: dict[str, Any],
    best_val_accuracy: float | None,
    shards: Path | None = None,
    step: int = 0,
    in_epoch: Mapping[str, Any] | None = None,
) -> None:
    """``last.pt``: everything to resume after the last epoch of ``history`` (one
    dict per epoch). With ``shards`` (an FSDP run) the model and optimizer state
    live in that DCP folder next to it, and ``last.pt`` names it.

    ``step`` is the global step (optimizer steps so far). ``in_epoch``, for a
    checkpoint inside an epoch, says where: ``{"epoch", "batches", "ranks"}``,
    with one dict per rank holding its loader state, running sums, RNG states
    and training seconds (see :func:`rocm_dl_guide.training.resume.save_checkpoint`)."""
    atomic_torch_save(
        {
            "format": FORMAT,
            "epoch": len(history),
            "step": int(step),
            "in_epoch": dict(in_epoch) if in_epoch is not None else None,
            "model": None if shards else model.state_dict(),
            "optimizer": None if shards else optimizer.state_dict(),
            "sharded": shards.name if shards else None,
            "scheduler": scheduler.state_dict() if scheduler is not None else None,
            "scaler": scaler.state_dict() if scaler.is_enabled() else None,
            "history": history,
            "best_val_accuracy": best_val_accuracy,
            "rng": rng,
            "torch_version": str(torch.__version__),
        },
        path,
    )


def load_model_and_optimizer(
    ckpt: Mapping[str, Any],
    path: Path,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    fsdp: bool,
) -> None:
    """Load a checkpoint's model and optimizer state (from its DCP folder for an
    FSDP run, which DCP reshards for this job)."""
    if ckpt.get("sharded"):
        folder = path.parent / ckpt["sharded"]
        if not (folder / ".metadata").is_file():
            raise CheckpointError(path, f"names {folder.name}, which is missing or incomplete")
        sharded.load(folder, model, optimizer)
    elif fsdp:
        raise CheckpointError(path, "was written without fsdp; resume it without --fsdp")
    else:
        model.load_state_dict(ckpt["model"])
        optimizer.load_state_dict(ckpt["optimizer"])
