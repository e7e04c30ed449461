"""Checkpoints of the training loop and resuming from them, at epoch ends and
inside epochs.

:func:`restore_checkpoint` is where a run starts (:class:`StartingPoint`):
from scratch, after a checkpoint's last complete epoch, or at a position inside
an epoch (:class:`EpochPosition`: the training loader's state, the running
sums and the RNG states of every rank). :func:`save_checkpoint` writes
``last.pt`` (and ``best.pt``) through :mod:`rocm_dl_guide.training.checkpoints`.
:class:`Interruptions` takes the checkpoints inside an epoch: every
``checkpoint_every`` steps, and on a stop signal
(:mod:`rocm_dl_guide.core.preemption`), after which it raises
:class:`~rocm_dl_guide.core.preemption.Preempted`.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rocm_dl_guide.core import distributed, files, preemption
from rocm_dl_guide.training import checkpoints, sharded
from rocm_dl_guide.training.checkpoints import CheckpointError
from rocm_dl_guide.training.metrics import EpochMetrics, Tally
from rocm_dl_guide.training.setup import LoopState


@dataclass(kw_only=True)
class EpochPosition:
    """How far into an epoch a mid-epoch checkpoint was taken: this rank's part."""

    epoch: int
    batches: int
    """Batches of ``epoch`` done."""
    loader: Mapping[str, Any]
    """The training loader's ``state_dict()`` (a ``StatefulDataLoader``'s)."""
    tally: Mapping[str, Any]
    """The epoch's running loss and accuracy sums so far."""
    rng: Mapping[str, Any]
    """The RNG states after the last step done."""
    seconds: float
    """Training time of the epoch so far."""


@dataclass(kw_only=True)
class StartingPoint:
    """Where a run starts: from scratch, or after a checkpoint's last epoch."""

    checkpoint: Path | None
    epoch: int = 0
    history: list[EpochMetrics] = field(default_factory=list)
    best_val_accuracy: float | None = None
    rng: Mapping[str, Any] | None = None
    lock: Any = None
    """The checkpoint folder's lock, held by rank 0 until the run ends."""
    step: int = 0
    """Optimizer steps already taken (0 from scratch)."""
    position: EpochPosition | None = None
    """Where inside epoch ``epoch + 1`` a mid-epoch checkpoint left off."""


def restore_checkpoint(state: LoopState) -> StartingPoint:
    """Step 1 of :func:`~rocm_dl_guide.training.train.fit`: load ``last.pt`` into the model and
    optimizer when resuming.

    Removes temporary files left by a run killed while saving. Returns where the
    run starts; an unusable checkpoint raises :class:`CheckpointError`.
    """
    opts, say = state.options, state.say
    if opts.checkpoint_dir is None:
        return StartingPoint(checkpoint=None)
    path = Path(opts.checkpoint_dir) / checkpoints.CHECKPOINT_NAME
    lock = _take_checkpoint_dir(state, path)
    resume = opts.resume or distributed.restart_count() > 0  # torchrun restarted the group
    if not resume:
        if path.exists():
            say(f"starting from scratch; {files.shown(path)} will be overwritten (resume=False)")
        return StartingPoint(checkpoint=path, lock=lock)
    if not path.exists():
        say(f"no checkpoint at {files.shown(path)}: starting from scratch")
        return StartingPoint(checkpoint=path, lock=lock)
    ckpt = checkpoints.read_checkpoint(path)
    try:
        checkpoints.load_model_and_optimizer(
            ckpt, path, state.module, state.optimizer, state.options.fsdp
        )
        if state.scheduler is not None and ckpt.get("scheduler") is not None:
            state.scheduler.load_state_dict(ckpt["scheduler"])
        if state.scaler.is_enabled() and ckpt.get("scaler"):
            state.scaler.load_state_dict(ckpt["scaler"])
    except (RuntimeError, ValueError, KeyError) as exc:
        raise CheckpointError(path, f"does not match this model/optimizer: {exc}") from exc
    try:
        history = [EpochMetrics(**row) for row in ckpt["history"]]
    except TypeError as exc:
        raise CheckpointError(path, f"has an unknown history format: {exc}") from exc
    state.step = int(ckpt.get("step") or 0)
    return StartingPoint(
        checkpoint=path,
        epoch=ckpt["epoch"],
        history=history,
        best_val_accuracy=ckpt.get("best_val_accuracy"),
        rng=ckpt["rng"],
        lock=lock,
        step=state.step,
        position=_position(ckpt, path, state.ctx),
    )


def _position(
    ckpt: Mapping[str, Any], path: Path, ctx: distributed.Context
) -> EpochPosition | None:
    """This rank's part of a mid-epoch checkpoint's position (``None`` at an epoch end)."""
    where = ckpt.get("in_epoch")
    if not where:
        return None
    ranks = where["ranks"]
    if len(ranks) != ctx.world_size:
        raise CheckpointError(
            path,
            f"was saved inside epoch {where['epoch']} by {len(ranks)} process(es), and the "
            "position in an epoch is per process: resume it with the same number of "
            f"processes (--nproc {len(ranks)}), not {ctx.world_size}",
        )
    part = ranks[ctx.rank]
    return EpochPosition(
        epoch=where["epoch"],
        batches=where["batches"],
        loader=part["loader"],
        tally=part["tally"],
        rng=part["rng"],
        seconds=part["seconds"],
    )


def _take_checkpoint_dir(state: LoopState, path: Path) -> Any:
    """Rank 0 locks the checkpoint folder and removes temporary files of a killed
    save; the other ranks wait for it. Returns the lock (``None`` on other ranks)."""
    lock = None
    if state.ctx.is_main:
        path.parent.mkdir(parents=True, exist_ok=True)
        lock = distributed.lock_checkpoint_dir(path.parent)
        best = path.parent / checkpoints.BEST_NAME
        for stale in files.stale_temp_files(path) + files.stale_temp_files(best):
            state.say(f"removing {stale.name}, left by a run killed while saving")
            stale.unlink(missing_ok=True)
    distributed.barrier()
    return lock


def save_checkpoint(
    state: LoopState,
    start: StartingPoint,
    history: list[EpochMetrics],
    loader: Any,
    position: EpochPosition | None = None,
) -> None:
    """Step 4 of :func:`~rocm_dl_guide.training.train.fit`: ``best.pt`` if this epoch is the best so
    far, then ``last.pt``.

    With ``position`` (a checkpoint inside an epoch, collective in a distributed
    run) ``last.pt`` also records every rank's position in the epoch, and
    ``best.pt`` is left alone.
    """
    if start.checkpoint is None:
        return
    is_best = False
    if position is None:
        val_acc = history[-1].val_accuracy
        best = start.best_val_accuracy
        is_best = (
            state.options.keep_best and val_acc is not None and (best is None or val_acc > best)
        )
        if is_best:
            start.best_val_accuracy = val_acc
    folder = start.checkpoint.parent
    shards = None
    if state.options.fsdp:  # collective: every rank writes its own shard
        name = (
            f"{checkpoints.SHARDED_PREFIX}{history[-1].epoch}"
            if position is None
            else f"{checkpoints.SHARDED_STEP_PREFIX}{state.step}"
        )
        shards = sharded.save(folder / name, state.module, state.optimizer)
    best_state = sharded.full_state_dict(state.module) if is_best else None  # collective
    in_epoch = None
    if position is not None:
        parts = distributed.gather(  # collective: each rank's loader, sums and RNG
            {
                "loader": position.loader,
                "tally": position.tally,
                "rng": position.rng,
                "seconds": position.seconds,
            }
        )
        in_epoch = {"epoch": position.epoch, "batches": position.batches, "ranks": parts}
    if state.ctx.is_main:  # one writer; the others wait until the files are complete
        if is_best:
            checkpoints.atomic_torch_save(best_state, folder / checkpoints.BEST_NAME)
        checkpoints.write_checkpoint(
            start.checkpoint,
            history=[asdict(m) for m in history],
            model=state.module,
            optimizer=state.optimizer,
            scheduler=state.scheduler,
            scaler=state.scaler,
            rng=checkpoints.rng_state(state.device, loader),
            best_val_accuracy=start.best_val_accuracy,
            shards=shards,
            step=state.step,
            in_epoch=in_epoch,
        )
        for old in checkpoints.sharded_folders(folder):
            if shards is None or old.name != shards.name:
                shutil.rmtree(old, ignore_errors=True)  # last.pt no longer names it
    distributed.barrier()


class Interruptions:
    """Checkpoints inside an epoch: every ``checkpoint_every`` steps, and when a
    stop signal arrived (then :class:`~rocm_dl_guide.core.preemption.Preempted` is raised).

    Called after every step with the epoch's progress. In a distributed run the
    ranks agree on whether any of them was signalled (one all-reduce of a flag),
    so all of them save and stop after the same step.
    """

    def __init__(
        self, state: LoopState, start: StartingPoint, loader: Any, request: preemption.StopRequest
    ) -> None:
        self.state, self.start, self.loader, self.request = state, start, loader, request
        self.history: list[EpochMetrics] = list(start.history)
        self.epoch = start.epoch + 1
        self.saved = (start.step, start.epoch, start.position.batches if start.position else 0)
        """(step, epoch, batches) of the checkpoint on disk."""
        self.stateful = callable(getattr(loader, "state_dict", None))
        if start.checkpoint is not None and not self.stateful:
            state.say(
                f"note: the training loader ({type(loader).__name__}) cannot record its "
                "position, so checkpoints are taken at epoch ends only"
            )

    def stop_requested(self) -> bool:
        watched = self.start.checkpoint is not None
        return watched and distributed.any_rank(self.request.requested, self.state.device)

    def __call__(self, batches: int, tally: Tally, seconds: float) -> None:
        state = self.state
        every = state.options.checkpoint_every
        stop = self.stop_requested()
        if not self.stateful or not (stop or (every and state.step % every == 0)):
            if stop:
                self.preempted()
            return
        position = EpochPosition(
            epoch=self.epoch,
            batches=batches,
            loader=self.loader.state_dict(),
            tally=tally.state(),
            rng=checkpoints.rng_state(state.device, self.loader),
            seconds=seconds,
        )
        save_checkpoint(state, self.start, self.history, self.loader, position)
        self.saved = (state.step, self.epoch, batches)
        if stop:
            self.preempted()

    def epoch_saved(self, history: list[EpochMetrics]) -> None:
        """After an epoch's checkpoint: stop there if a signal came during the epoch's end."""
        self.history = list(history)
        self.epoch = history[-1].epoch + 1
        self.saved = (self.state.step, history[-1].epoch, 0)
        if self.stop_requested():
            self.preempted()

    def preempted(self) -> None:
        """Raise :class:`~rocm_dl_guide.core.preemption.Preempted` for the checkpoint on disk."""
        step, epoch, batches = self.saved
        raise preemption.Preempted(
            self.request.name or "a signal", step, epoch, batches, self.start.checkpoint
        )
