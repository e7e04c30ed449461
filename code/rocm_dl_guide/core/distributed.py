"""Data-parallel training with PyTorch's own engines: torchrun, the process group, DDP.

The shared loop (:func:`rocm_dl_guide.training.train.fit`) calls :func:`setup` first.
When the process was started by ``torchrun`` (which sets ``RANK``,
``WORLD_SIZE`` and ``LOCAL_RANK``), :func:`setup` joins the process group
(``nccl`` on GPUs, which is RCCL on ROCm; ``gloo`` on the CPU) and pins the
process to its local GPU; otherwise it returns a one-process context and
nothing changes. The loop then shards its loaders with
:func:`shard_train_loader` and :func:`shard_eval_loader`, sums its running
totals over ranks with :func:`all_reduce_sums`, and lets only rank 0 log, draw
progress and write checkpoints.

:func:`launch` starts N local workers through torchrun's elastic agent
(``torch.distributed.run``, in the calling process), which restarts the whole group when a
worker dies (``max_restarts``). :func:`lock_checkpoint_dir` keeps two jobs from
writing into one checkpoint folder.

Data is prepared before the loop starts: :func:`rocm_dl_guide.core.datasets.prepare`
runs inside :func:`local_main_first`, so each node's local rank 0 downloads or
generates it while the node's other ranks wait, and they then load its copy.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, RandomSampler, Subset
from torch.utils.data.distributed import DistributedSampler

LOCK_NAME = ".lock"
"""The lock file a run holds in its checkpoint folder."""
DATA_WAIT = timedelta(hours=3)
"""How long the other ranks wait for their node's local rank 0 to prepare the
data (:func:`local_main_first`): the largest download on a slow link; past it
they fail instead of hanging."""


@dataclass(frozen=True)
class Context:
    """Where this process stands in a (possibly one-process) training job."""

    rank: int
    world_size: int
    local_rank: int
    backend: str | None
    """The process group's backend (``nccl``/``gloo``), ``None`` for one process."""
    device: torch.device

    @classmethod
    def single(cls, device: str | torch.device | None = None) -> Context:
        """Rank 0 of a one-process job on ``device`` (default: the GPU if any)."""
        from rocm_dl_guide.core.device import pick

        return cls(
            rank=0,
            world_size=1,
            local_rank=0,
            backend=None,
            device=torch.device(device) if device is not None else pick(),
        )

    @property
    def distributed(self) -> bool:
        return self.backend is not None

    @property
    def is_main(self) -> bool:
        """Rank 0: the process that logs, draws progress and writes files."""
        return self.rank == 0


def env_world_size() -> int:
    """Processes in the run as torchrun announces it (``WORLD_SIZE``; 1 without it),
    readable before :func:`setup`."""
    return int(os.environ.get("WORLD_SIZE", "1"))


def env_rank() -> int:
    """This process's rank as torchrun announces it (``RANK``; 0 without it)."""
    return int(os.environ.get("RANK", "0"))


def launched_by_torchrun(env: dict[str, str] | None = None) -> bool:
    """Whether torchrun (or another launcher using its variables) started this process."""
    env = os.environ if env is None else env
    return "RANK" in env and "WORLD_SIZE" in env and "LOCAL_RANK" in env


def restart_count() -> int:
    """How often torchrun's elastic agent has restarted this job's workers."""
    return int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0") or 0)


def setup(device: str | torch.device | None = None) -> Context:
    """Join the process group if torchrun started this process; the context either way.

    Without torchrun: rank 0 of 1 on ``device`` (default: the GPU if any). Under
    torchrun: ``nccl`` with one GPU per local rank when PyTorch sees GPUs, else
    ``gloo`` on the CPU; an already initialised process group is reused.
    """
    if not launched_by_torchrun():
        return Context.single(device)
    local_rank = int(os.environ["LOCAL_RANK"])
    if torch.cuda.is_available():
        if local_rank >= torch.cuda.device_count():
            raise RuntimeError(
                f"local rank {local_rank} has no GPU of its own: only "
                f"{torch.cuda.device_count()} visible; start at most that many processes per "
                "node, or hide the GPUs (HIP_VISIBLE_DEVICES= CUDA_VISIBLE_DEVICES=) to train "
                "on the CPU with gloo"
            )
        torch.cuda.set_device(local_rank)
        backend, dev = "nccl", torch.device("cuda", local_rank)
    else:
        backend, dev = "gloo", torch.device("cpu")
    if not dist.is_initialized():
        dist.init_process_group(backend=backend)
    return Context(dist.get_rank(), dist.get_world_size(), local_rank, dist.get_backend(), dev)


def active() -> bool:
    """Whether a process group is initialised in this process."""
    return dist.is_available() and dist.is_initialized()


SHUTDOWN_WAIT = timedelta(seconds=30)
"""How long :func:`shutdown` waits for the other ranks before leaving anyway."""


def shutdown() -> None:
    """Leave the process group (at the end of a torchrun worker).

    Where :func:`local_main_first` made its gloo group, the ranks first meet on
    it (a monitored barrier, at most :data:`SHUTDOWN_WAIT`), so that no rank
    tears its connections down while a peer still uses them: gloo aborts the
    process ("terminate called without an active exception") when that happens.
    """
    global _DATA_GROUP
    if not active():
        return
    if _DATA_GROUP is not None and _DATA_GROUP[0] is dist.group.WORLD:
        with contextlib.suppress(Exception):  # a rank that is gone: leave anyway
            dist.monitored_barrier(_DATA_GROUP[1], timeout=SHUTDOWN_WAIT, wait_all_ranks=True)
    _DATA_GROUP = None
    dist.destroy_process_group()


def barrier() -> None:
    """Wait for every rank (a no-op in one process)."""
    if active():
        dist.barrier()


@contextlib.contextmanager
def local_main_first(what: str = "the data") -> Iterator[None]:
    """Under torchrun, each node's local rank 0 runs the block before the node's other ranks.

    For preparing data: local rank 0 downloads or generates it while the other
    ranks wait, and they run the block once it is done, find the data complete
    and only load it, so a node prepares its data once (the build lock of
    :func:`rocm_dl_guide.core.files.prepare_once` still keeps two nodes sharing a
    cache folder, or two jobs, from building it at the same time). It joins
    the process group early (:func:`setup`, which the training loop then
    reuses) and waits on a gloo group of its own, whose timeout is
    :data:`DATA_WAIT`. When local rank 0 fails, the others raise
    ``RuntimeError`` rather than wait for it; when it succeeds, the main rank
    says so in one line on standard error (``data: WHAT prepared by local rank
    0 before the other ranks load it``). Without torchrun, or with one process
    in all, the block just runs. Like any collective, every rank must enter it
    the same number of times.
    """
    if not launched_by_torchrun() or int(os.environ["WORLD_SIZE"]) < 2:
        yield
        return
    ctx = setup()
    group = _data_group()
    if ctx.local_rank != 0:
        if _failed_on_any_rank(False, group):
            raise RuntimeError(
                f"a node's local rank 0 could not prepare {what} (its error is above); "
                "this rank stops rather than load it"
            )
        yield
    else:
        try:
            yield
        except BaseException:
            with contextlib.suppress(Exception):
                _failed_on_any_rank(True, group)  # the others stop waiting and fail too
            raise
        if _failed_on_any_rank(False, group):
            raise RuntimeError(f"another node's local rank 0 could not prepare {what}")
    if ctx.is_main:
        print(
            f"data: {what} prepared by local rank 0 before the other ranks load it",
            file=sys.stderr,
            flush=True,
        )


_DATA_GROUP: tuple[Any, Any] | None = None
"""(the default process group, the gloo group :func:`local_main_first` waits on)."""


def _data_group() -> Any:
    """A gloo group of every rank with the long :data:`DATA_WAIT` timeout, made
    once per default process group (all ranks make it at the same point)."""
    global _DATA_GROUP
    world = dist.group.WORLD
    if _DATA_GROUP is None or _DATA_GROUP[0] is not world:
        _DATA_GROUP = (world, dist.new_group(backend="gloo", timeout=DATA_WAIT))
    return _DATA_GROUP[1]


def _failed_on_any_rank(failed: bool, group: Any) -> bool:
    """Whether any rank of ``group`` reports ``failed`` (a collective on the CPU)."""
    flag = torch.tensor([1 if failed else 0], dtype=torch.int32)
    dist.all_reduce(flag, op=dist.ReduceOp.MAX, group=group)
    return bool(flag.item())


def any_rank(flag: bool, device: torch.device) -> bool:
    """Whether ``flag`` is true on at least one rank (``flag`` itself in one process)."""
    if not active():
        return bool(flag)
    t = torch.tensor([1.0 if flag else 0.0], device=device)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return bool(t.item() > 0)


def gather(value: Any) -> list[Any]:
    """Every rank's ``value`` (picklable), in rank order (``[value]`` in one process)."""
    if not active():
        return [value]
    out: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, value)
    return out


def all_reduce_sums(values: Sequence[float], device: torch.device) -> list[float]:
    """Sum each value over all ranks (returned unchanged in one process)."""
    if not active():
        return [float(v) for v in values]
    t = torch.tensor([float(v) for v in values], dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return t.tolist()


def shard_train_loader(loader: DataLoader, ctx: Context) -> DataLoader:
    """The same loader, but each rank draws a different ``1/world_size`` of the data.

    Uses :class:`~torch.utils.data.distributed.DistributedSampler`, shuffled
    when ``loader`` shuffled, seeded from the loader's generator so every rank
    agrees on the permutation; the per-rank batch size stays ``loader.batch_size``.
    The loop calls ``sampler.set_epoch(epoch)`` every epoch.
    """
    from torchdata.stateful_dataloader.sampler import StatefulDistributedSampler

    shuffle = isinstance(loader.sampler, RandomSampler)
    gen = loader.generator
    seed = gen.initial_seed() if gen is not None else 0
    # A DistributedSampler that also knows how far into the epoch it is (for
    # the loop's mid-epoch checkpoints); the same permutation as its parent.
    sampler = StatefulDistributedSampler(
        loader.dataset, num_replicas=ctx.world_size, rank=ctx.rank, shuffle=shuffle, seed=seed
    )
    return rebuilt_loader(loader, sampler)


def shard_eval_loader(loader: DataLoader, ctx: Context) -> DataLoader:
    """Every ``world_size``-th sample for this rank, in order, without padding.

    Unlike ``DistributedSampler(shuffle=False)``, no sample is repeated to even
    out the shards, so metrics summed over ranks equal one process's exactly.
    """
    indices = range(ctx.rank, len(loader.dataset), ctx.world_size)
    return rebuilt_loader(loader, None, dataset=Subset(loader.dataset, indices))


def resumable_loader(loader: Any) -> Any:
    """The training loader as a ``torchdata`` ``StatefulDataLoader``, whose
    ``state_dict()`` records how far into the epoch it is and whose
    ``load_state_dict()`` continues with exactly the batches not yet drawn.

    A shuffling loader gets torchdata's ``RandomSampler`` with a generator of
    its own: a copy of the loader's generator or, without one, seeded from
    PyTorch's global generator (so a seeded run shuffles the same every time).
    The new loader has no generator, so the seeds it draws for its workers come
    from the global generator, whose state the checkpoints keep. A sequential
    loader keeps its order.
    A loader that is already stateful is returned as it is, and so is anything
    that is not a map-style ``DataLoader`` with a random or sequential sampler
    (the loop then checkpoints at epoch ends only).
    """
    from torch.utils.data import SequentialSampler
    from torchdata.stateful_dataloader import StatefulDataLoader
    from torchdata.stateful_dataloader.sampler import RandomSampler as StatefulRandomSampler

    if isinstance(loader, StatefulDataLoader) or not isinstance(loader, DataLoader):
        return loader
    if type(loader.sampler) is RandomSampler and not loader.sampler.replacement:
        gen = torch.Generator()
        if loader.generator is not None:
            gen.set_state(loader.generator.get_state())
        else:
            gen.manual_seed(int(torch.empty((), dtype=torch.int64).random_().item()))
        sampler = StatefulRandomSampler(loader.dataset, generator=gen)
    elif type(loader.sampler) is SequentialSampler:
        sampler = None
    else:
        return loader
    return rebuilt_loader(loader, sampler, generator=None)


_SAME = object()


def rebuilt_loader(
    loader: DataLoader, sampler: Any, dataset: Any = None, generator: Any = _SAME
) -> DataLoader:
    """A ``StatefulDataLoader`` like ``loader``, with another sampler (and dataset)."""
    import warnings

    from torchdata.stateful_dataloader import StatefulDataLoader

    with warnings.catch_warnings():
        # torchdata 0.11 calls torch.set_vital, deprecated in PyTorch 2.14; the warning
        # is about torchdata's code, not yours, so it is silenced here.
        warnings.filterwarnings("ignore", message="'set_vital' is deprecated")
        return StatefulDataLoader(
            dataset if dataset is not None else loader.dataset,
            batch_size=loader.batch_size,
            sampler=sampler,
            shuffle=False,
            num_workers=loader.num_workers,
            collate_fn=loader.collate_fn,
            pin_memory=loader.pin_memory,
            drop_last=loader.drop_last,
            generator=loader.generator if generator is _SAME else generator,
            persistent_workers=loader.persistent_workers if loader.num_workers else False,
        )


def set_epoch(loader: Any, epoch: int) -> None:
    """Tell a :class:`DistributedSampler` which epoch begins, so it reshuffles."""
    sampler = getattr(loader, "sampler", None)
    if isinstance(sampler, DistributedSampler):
        sampler.set_epoch(epoch)


class CheckpointInUseError(RuntimeError):
    """Another training run holds the lock of this checkpoint folder."""


def lock_checkpoint_dir(directory: str | os.PathLike):
    """Hold ``directory/.lock`` for this run; raises :class:`CheckpointInUseError` if taken.

    The lock is an OS file lock (``filelock``), so it is released when the
    holder exits or is killed, and an elastic restart can take it again.
    Returns the lock; call ``release()`` when training ends.
    """
    from filelock import FileLock, Timeout

    from rocm_dl_guide.core import files

    path = Path(directory) / LOCK_NAME
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(path))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        raise CheckpointInUseError(
            f"{files.shown(directory)} is in use by another training run (it holds "
            f"{files.shown(path)}); wait for "
            "that run to finish, or give this one its own checkpoint folder"
        ) from None
    return lock


def torchrun_command(
    module_args: Sequence[str],
    nproc: int,
    *,
    max_restarts: int = 0,
    nnodes: int = 1,
    node_rank: int = 0,
    rdzv_endpoint: str | None = None,
) -> list[str]:
    """The ``torch.distributed.run`` command line that runs ``python -m MODULE_ARGS...``.

    One node: ``--standalone`` (torchrun picks a free local port for its
    rendezvous). Several nodes: a c10d rendezvous at ``rdzv_endpoint``
    (``host:port``), which every node's agent must be given.
    """
    if nproc < 1:
        raise ValueError(f"nproc must be at least 1, got {nproc}")
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={nproc}"]
    cmd.append(f"--max-restarts={max_restarts}")
    if nnodes == 1 and rdzv_endpoint is None:
        cmd.append("--standalone")
    else:
        if rdzv_endpoint is None:
            raise ValueError("a multi-node launch needs rdzv_endpoint (host:port)")
        cmd += [f"--nnodes={nnodes}", f"--node-rank={node_rank}", "--rdzv-backend=c10d"]
        cmd += [f"--rdzv-endpoint={rdzv_endpoint}", "--rdzv-id=rocm-dl-guide"]
    return [*cmd, "-m", *module_args]


def launcher_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for torchrun: ``base`` (default: this process's) plus
    ``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1``.

    By default the workers reuse the rendezvous' TCP store, and after an elastic
    restart they can read the previous attempt's addresses from it and fail to
    connect ("Connection refused"; pytorch/pytorch#135712). A store of their own
    per attempt avoids that; it costs nothing when nothing restarts.
    """
    env = dict(os.environ if base is None else base)
    env.setdefault("TORCH_DISABLE_SHARE_RDZV_TCP_STORE", "1")
    return env


def launch(module_args: Sequence[str], nproc: int, **kwargs: Any) -> int:
    """Run ``python -m MODULE_ARGS...`` in ``nproc`` local workers under torchrun.

    torchrun's elastic agent runs in this process (``torch.distributed.run.main``,
    what the ``torchrun`` command calls, with :func:`torchrun_command`'s
    arguments), which has imported PyTorch already: a second interpreter
    importing it again would only add seconds to every launch. Blocks until the
    job ends and returns 0, or 1 when the workers failed more often than
    ``max_restarts`` allows (torchrun's summary of the failure goes to stderr).

    On ``SIGTERM`` or ``SIGINT`` the agent passes the signal on to the workers,
    which checkpoint where they are and exit (:mod:`rocm_dl_guide.core.preemption`;
    the agent gives them 30 s before it kills them), and this returns
    :data:`~rocm_dl_guide.core.preemption.EXIT_PREEMPTED`.
    """
    from torch.distributed import run as torchrun
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError

    from rocm_dl_guide.core.preemption import EXIT_PREEMPTED

    cmd = torchrun_command(module_args, nproc, **kwargs)
    os.environ.update(launcher_env())
    try:
        torchrun.main(cmd[cmd.index("torch.distributed.run") + 1 :])
    except ChildFailedError as exc:
        print(exc.format_msg(), file=sys.stderr)
        return 1
    except SignalException:
        return EXIT_PREEMPTED
    return 0
