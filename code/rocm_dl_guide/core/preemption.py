"""Stopping a training run cleanly when the scheduler says so.

Cluster schedulers end jobs with ``SIGTERM`` and a grace period: Slurm when it
preempts a job, at ``scancel`` and, with ``--signal=B:TERM@120``, two minutes
before the time limit; Kubernetes when it evicts a pod. A person at a terminal
sends ``SIGINT`` (Ctrl-C). While :func:`rocm_dl_guide.training.train.fit` trains, both
only *ask* it to stop: the loop finishes the step it is in, writes an atomic
checkpoint of where it is inside the epoch (model, optimizer, the data loader's
position, the RNG states) and raises :class:`Preempted`. The ``train`` command
turns that into the exit code :data:`EXIT_PREEMPTED`, which a requeue script
reads as "run me again with ``--resume``".

Under torchrun every rank gets the signal (torchrun's agent forwards it to its
workers), and the ranks agree after every step, with one all-reduce of a flag,
on whether to stop, so they all stop after the same step and the checkpoint is
consistent. Further signals while the run stops are ignored: under Slurm
both the launcher and the workers get ``SIGTERM`` (and a Ctrl-C reaches every
process of the terminal's group), so a worker may be signalled twice, and the
second must not cut its checkpoint short. ``SIGKILL`` stops a run at once, and
the scheduler sends it when the grace period is over.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

EXIT_PREEMPTED = 75
"""The ``train`` command's exit code after a clean stop on a signal: ``EX_TEMPFAIL``
of BSD's ``sysexits.h`` ("a temporary failure; the user is invited to retry")."""

SIGNALS = (signal.SIGTERM, signal.SIGINT)
"""The signals that ask a run to stop at the next step."""


class Preempted(Exception):
    """A run stopped on a signal after saving a checkpoint it can resume from.

    Not a ``RuntimeError``: the command line reports it apart from failures.
    """

    def __init__(self, signame: str, step: int, epoch: int, batch: int, checkpoint: object):
        self.signame = signame
        self.step = step
        """The global step (optimizer steps since the run began) saved."""
        self.epoch = epoch
        self.batch = batch
        """Batches of ``epoch`` done."""
        self.checkpoint = checkpoint
        where = f"saved in {checkpoint}" if checkpoint is not None else "no checkpoint folder"
        super().__init__(
            f"stopped by {signame} after step {step} (epoch {epoch}, batch {batch}); {where}. "
            "Run the same command with --resume to continue from there."
        )


class StopRequest:
    """Whether a stop signal arrived since :func:`watch` began (this process only)."""

    def __init__(self) -> None:
        self.signum: int | None = None

    @property
    def requested(self) -> bool:
        return self.signum is not None

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name if self.signum is not None else ""


@contextmanager
def watch(signals: tuple[int, ...] = SIGNALS) -> Iterator[StopRequest]:
    """Catch ``signals`` for the duration of the block; yields the :class:`StopRequest`.

    The first signal sets the request; later ones change nothing. Outside the
    main thread, where Python cannot install handlers, nothing is caught. The
    previous handlers are restored when the block ends.
    """
    request = StopRequest()
    if threading.current_thread() is not threading.main_thread():
        yield request
        return
    # getsignal is None for a handler installed from outside Python: restore the default
    previous = {sig: signal.getsignal(sig) or signal.SIG_DFL for sig in signals}

    def handler(signum: int, _frame: FrameType | None) -> None:
        if request.signum is None:
            request.signum = signum

    for sig in signals:
        signal.signal(sig, handler)
    try:
        yield request
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
