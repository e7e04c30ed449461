"""TensorFlow's distribution strategies on one machine, with the Fashion-MNIST network.

The TensorFlow chapter's Fashion-MNIST model (:mod:`rocm_dl_guide.casestudies.fashion_mnist`)
trained data-parallel three ways, each in fresh Python processes so that the
caller (a notebook kernel, the command line) never imports TensorFlow:

- :func:`mirrored_fit`: ``tf.distribute.MirroredStrategy`` and Keras ``fit``,
  one process, over the real GPUs when TensorFlow sees at least two, otherwise
  over logical CPU devices (which must be configured before TensorFlow
  initialises its devices, hence the fresh process).
- :func:`multiworker_custom_loop`: ``tf.distribute.MultiWorkerMirroredStrategy``
  with local worker processes, each given its ``TF_CONFIG`` (a cluster of
  ``127.0.0.1`` addresses on free ports), trained with a custom loop
  (``strategy.experimental_distribute_dataset``, ``strategy.run``,
  ``tf.nn.compute_average_loss``). Every worker reports its test accuracy and a
  SHA-256 of its final weights: synchronous data parallelism leaves them equal.
- :func:`single_worker_baseline`: the same model and loop in one process.
- :func:`keras_fit_multiworker_known_issue`: whether Keras 3's ``fit`` under
  ``MultiWorkerMirroredStrategy`` still fails with "Attempt to convert a value
  (PerReplica ...)" (keras-team/keras#20585).

This module is the parent side: it starts the processes (each with its
``TF_CONFIG``), bounds them and turns their reports into a
:class:`TfDistributedRun` or a :class:`KnownIssue`. Each child process runs
:func:`rocm_dl_guide.distributed.tf_tasks.run_task` on a JSON task file and
writes its result as JSON; the parent kills the processes it started on a
timeout or when one of them fails, and raises :class:`TfDistributedError` with
the failing process's stderr tail.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rocm_dl_guide.casestudies import fashion_mnist
from rocm_dl_guide.core import datasets, profiles
from rocm_dl_guide.core import ports as ports_mod  # (``ports`` is a local name below)
from rocm_dl_guide.core.messages import count
from rocm_dl_guide.distributed import tf_tasks

if TYPE_CHECKING:  # pragma: no cover
    import pandas

FULL_EPOCHS = fashion_mnist.FULL_EPOCHS
"""The guide's number of epochs for Fashion-MNIST (the ``full`` profile)."""
BATCH_SIZE = fashion_mnist.BATCH_SIZE
"""Examples per replica and step; the global batch is this times the replicas."""
DEFAULT_TIMEOUT = 300.0
"""Seconds a whole run (all its processes) may take before they are killed."""
KERAS_ISSUE = "keras-team/keras#20585"
KERAS_ISSUE_URL = "https://github.com/keras-team/keras/issues/20585"
PER_REPLICA_ERROR = "Attempt to convert a value (PerReplica"
"""The start of the error Keras 3's ``fit`` raises under ``MultiWorkerMirroredStrategy``."""

CHILD_CODE = f"import sys; from {tf_tasks.__name__} import run_task; run_task(sys.argv[1])"
"""What each child runs with ``python -c``, its task file's path as the argument.
(The module imports :mod:`.tf_tasks`, which imports no TensorFlow, so that the
book's execution cache sees that the TensorFlow page depends on it.)"""
FAILURE_GRACE = 15.0
"""Seconds the other processes get after one failed, before they are killed."""

STILL_FAILING, WORKS_NOW, FAILS_DIFFERENTLY = "still failing", "works now", "fails differently"
_STDERR_TAIL = 3000


class TfDistributedError(RuntimeError):
    """A child process failed or ran out of time; the message holds its stderr tail."""


# --------------------------------------------------------------------------- results


@dataclass
class WorkerReport:
    """What one process (a worker, or the only one) reports after training."""

    index: int
    test_accuracy: float
    test_loss: float
    weights_sha256: str
    """SHA-256 over the model's final weights, in order, as float32 bytes."""
    seconds: float
    """Wall time of the training loop (or ``fit``) in this process."""
    replicas: int
    """``strategy.num_replicas_in_sync``."""
    devices: list[str]
    """The devices this process trained on."""


@dataclass
class TfDistributedRun:
    """What :func:`mirrored_fit`, :func:`multiworker_custom_loop` and
    :func:`single_worker_baseline` return."""

    strategy: str
    """``MirroredStrategy``, ``MultiWorkerMirroredStrategy`` or ``default strategy``."""
    method: str
    """``Keras fit`` or ``custom loop``."""
    test_accuracy: float
    """The first worker's (every worker's, when their weights agree)."""
    test_loss: float
    replicas: int
    workers: int
    """Processes that trained together."""
    epochs: int
    history: pandas.DataFrame
    """One row per epoch: ``epoch`` (1-based), training ``loss`` and ``accuracy``."""
    seconds: float
    """Training wall time: the slowest process's ``fit`` or loop."""
    wall_seconds: float
    """Everything, process start-up and TensorFlow import included."""
    devices: list[str]
    profile: str
    data: datasets.PreparedData
    worker_reports: list[WorkerReport] = field(default_factory=list)

    @property
    def weights_identical(self) -> bool:
        """Whether every process ended with bit-identical weights."""
        return len({w.weights_sha256 for w in self.worker_reports}) == 1

    def summary(self) -> str:
        replicas = count(self.replicas, "replica")
        where = f"{count(self.workers, 'worker')}, {replicas} on {', '.join(self.devices)}"
        same = ""
        if self.workers > 1:
            same = "; weights identical" if self.weights_identical else "; weights DIFFER"
        return (
            f"{self.strategy} ({self.method}) Fashion-MNIST: test accuracy "
            f"{100 * self.test_accuracy:.1f}% after {count(self.epochs, 'epoch')}, {where}, "
            f"{self.seconds:.1f} s training ({self.wall_seconds:.1f} s in all){same}; "
            f"profile {self.profile}; data: {self.data.note}"
        )

    def plot(self, ax=None):
        """Training loss and accuracy per epoch; returns the Figure."""
        from rocm_dl_guide.core.plots import plot_history

        title = f"{self.strategy}, {self.method} ({self.data.kind} data)"
        return plot_history(self.history, ax=ax, title=title)


@dataclass
class KnownIssue:
    """What :func:`keras_fit_multiworker_known_issue` found."""

    issue: str
    url: str
    status: str
    """``still failing``, ``works now`` or ``fails differently`` (another error)."""
    message: str
    """The error (``Type: text``, shortened), or what ran when it worked."""
    seconds: float
    profile: str
    data: datasets.PreparedData

    @property
    def still_failing(self) -> bool:
        return self.status == STILL_FAILING

    def summary(self) -> str:
        first_line = self.message.splitlines()[0].rstrip(".") if self.message else ""
        return (
            f"Keras fit under MultiWorkerMirroredStrategy ({self.issue}): {self.status}: "
            f"{first_line}; profile {self.profile}; data: {self.data.note}"
        )


# --------------------------------------------------------------------------- processes


def tf_config(ports: list[int], index: int, host: str = "127.0.0.1") -> dict[str, Any]:
    """The ``TF_CONFIG`` of worker ``index`` in a cluster of workers on ``host:port``."""
    return {
        "cluster": {"worker": [f"{host}:{p}" for p in ports]},
        "task": {"type": "worker", "index": index},
    }


def _child_env(config: dict | None) -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    package_parent = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_parent, env.get("PYTHONPATH")) if p)
    env.pop("TF_CONFIG", None)
    if config is not None:
        env["TF_CONFIG"] = json.dumps(config)
    return env


def _tail(path: Path, limit: int = _STDERR_TAIL) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return text[-limit:].strip()


def _run_children(
    task: dict[str, Any],
    configs: list[dict | None],
    timeout: float,
    grace: float | None = None,
    need_all: bool = True,
) -> list[dict[str, Any]]:
    """Run one child per entry of ``configs`` on ``task``; their JSON results, in order.

    Kills the children it started when ``timeout`` runs out, or ``grace`` seconds
    (default :data:`FAILURE_GRACE`) after one of them failed (the others may wait
    for it forever); then raises :class:`TfDistributedError` with the first
    failure's stderr tail. With ``need_all=False`` the grace starts when any
    child ends, and the results of those that finished are enough (an error one
    worker reports can leave the others waiting in a collective).
    """
    with tempfile.TemporaryDirectory(prefix="tf-distributed-") as tmp:
        work = Path(tmp)
        procs, files = [], []
        try:
            for i, config in enumerate(configs):
                spec = dict(task, index=i, result=str(work / f"result-{i}.json"))
                (work / f"task-{i}.json").write_text(json.dumps(spec), encoding="utf-8")
                err = work / f"stderr-{i}.txt"
                files.append((Path(spec["result"]), err))
                with open(err, "wb") as err_file:
                    procs.append(
                        subprocess.Popen(
                            [sys.executable, "-c", CHILD_CODE, str(work / f"task-{i}.json")],
                            stdin=subprocess.DEVNULL,
                            stdout=subprocess.DEVNULL,
                            stderr=err_file,
                            env=_child_env(config),
                        )
                    )
            grace = FAILURE_GRACE if grace is None else grace
            failed = _wait(procs, timeout, grace, need_all)
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
        return _collect(task["task"], procs, files, failed, timeout, need_all)


def _wait(
    procs: list[subprocess.Popen], timeout: float, grace: float, need_all: bool
) -> str | None:
    """Wait for every process; ``None`` when all ended, else why the others were stopped."""
    deadline = time.monotonic() + timeout
    why = f"timed out after {timeout:.0f} s"
    while time.monotonic() < deadline:
        codes = [p.poll() for p in procs]
        if all(c is not None for c in codes):
            return None
        ended = [c for c in codes if c is not None and (c != 0 or not need_all)]
        if ended and "another" not in why:
            deadline = min(deadline, time.monotonic() + grace)
            why = f"stopped {grace:.0f} s after another process ended"
        time.sleep(0.1)
    return why


def _collect(
    name, procs, files, stopped: str | None, timeout: float, need_all: bool
) -> list[dict[str, Any]]:
    """The results of the processes that reported; raises for the one that failed first.

    A process that ended on its own with an error (or without a result) is
    blamed before one this module killed.
    """
    reported = [p.returncode == 0 and r.exists() for p, (r, _) in zip(procs, files, strict=True)]
    killed = [p.returncode == -9 for p in procs]  # by _run_children, after a timeout or failure
    failed = [i for i, ok in enumerate(reported) if not ok and not killed[i]]
    if need_all or failed or not any(reported):
        failed += [i for i, ok in enumerate(reported) if not ok and killed[i]]
    if failed:
        i = failed[0]
        why = stopped if killed[i] and stopped else f"exit {procs[i].returncode}"
        tails = [f"--- process {k} stderr ---\n{_tail(e)}" for k, (_, e) in enumerate(files)]
        order = [tails[i]] + [t for k, t in enumerate(tails) if k != i]
        raise TfDistributedError(
            f"{name}: process {i} of {len(procs)} failed ({why}; limit {timeout:.0f} s)\n"
            + "\n".join(order)
        )
    return [
        json.loads(r.read_text(encoding="utf-8"))
        for ok, (r, _) in zip(reported, files, strict=True)
        if ok
    ]


def _task(prof: profiles.Profile, name: str, epochs: int, seed: int, **extra) -> dict[str, Any]:
    # once here, not concurrently in every child (the fixture: see tf_tasks)
    datasets.prepare("fashion-mnist", prof, system_copies=False)
    return dict(task=name, profile=dataclasses.asdict(prof), epochs=epochs, seed=seed, **extra)


def _data(report: dict[str, Any]) -> datasets.PreparedData:
    d = report["data"]
    return datasets.PreparedData(d["name"], Path(d["root"]), d["kind"], d["note"])


def _run_from(
    reports: list[dict[str, Any]], strategy: str, method: str, prof, epochs: int, wall: float
) -> TfDistributedRun:
    import pandas as pd

    workers = [
        WorkerReport(
            index=r["index"],
            test_accuracy=r["test_accuracy"],
            test_loss=r["test_loss"],
            weights_sha256=r["weights_sha256"],
            seconds=r["seconds"],
            replicas=r["replicas"],
            devices=list(r["devices"]),
        )
        for r in reports
    ]
    first = reports[0]
    return TfDistributedRun(
        strategy=strategy,
        method=method,
        test_accuracy=first["test_accuracy"],
        test_loss=first["test_loss"],
        replicas=first["replicas"],
        workers=len(reports),
        epochs=epochs,
        history=pd.DataFrame(first["history"], columns=["epoch", "loss", "accuracy"]),
        seconds=max(w.seconds for w in workers),
        wall_seconds=wall,
        devices=[d for w in workers for d in w.devices],
        profile=prof.name,
        data=_data(first),
        worker_reports=workers,
    )


# --------------------------------------------------------------------------- the API


def mirrored_fit(
    profile: profiles.Profile,
    epochs: int | None = None,
    devices: int = 2,
    seed: int = 1,
    timeout: float = DEFAULT_TIMEOUT,
) -> TfDistributedRun:
    """Keras ``fit`` under ``MirroredStrategy`` over ``devices`` devices, in a fresh process.

    The devices are the first ``devices`` GPUs (all, when there are fewer) when
    TensorFlow sees at least two, else ``devices`` logical CPU devices. The global batch is
    :data:`BATCH_SIZE` times the replicas.
    """
    if devices < 1:
        raise ValueError(f"devices must be at least 1, got {devices}")
    n_epochs = profile.epochs(FULL_EPOCHS, epochs)
    start = time.perf_counter()
    task = _task(profile, "mirrored_fit", n_epochs, seed, devices=devices)
    reports = _run_children(task, [None], timeout)
    wall = time.perf_counter() - start
    return _run_from(reports, "MirroredStrategy", "Keras fit", profile, n_epochs, wall)


def multiworker_custom_loop(
    profile: profiles.Profile,
    epochs: int | None = None,
    workers: int = 2,
    seed: int = 1,
    timeout: float = DEFAULT_TIMEOUT,
) -> TfDistributedRun:
    """A custom loop under ``MultiWorkerMirroredStrategy`` with ``workers`` local processes.

    Each worker gets ``TF_CONFIG`` with the whole cluster (``127.0.0.1`` on
    free ports) and its index, trains one replica (its own GPU when TensorFlow
    sees one per worker, else the CPU), evaluates the whole test set and hashes
    its weights; :attr:`TfDistributedRun.weights_identical` compares them.
    """
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    n_epochs = profile.epochs(FULL_EPOCHS, epochs)
    start = time.perf_counter()
    task = _task(profile, "multiworker_loop", n_epochs, seed, workers=workers)
    ports = ports_mod.free_ports(workers)
    reports = _run_children(task, [tf_config(ports, i) for i in range(workers)], timeout)
    wall = time.perf_counter() - start
    strategy = "MultiWorkerMirroredStrategy"
    return _run_from(reports, strategy, "custom loop", profile, n_epochs, wall)


def single_worker_baseline(
    profile: profiles.Profile,
    epochs: int | None = None,
    seed: int = 1,
    timeout: float = DEFAULT_TIMEOUT,
) -> TfDistributedRun:
    """The same model and custom loop as :func:`multiworker_custom_loop`, in one process
    under TensorFlow's default strategy (one replica, batch :data:`BATCH_SIZE`)."""
    n_epochs = profile.epochs(FULL_EPOCHS, epochs)
    start = time.perf_counter()
    reports = _run_children(_task(profile, "single_loop", n_epochs, seed), [None], timeout)
    wall = time.perf_counter() - start
    return _run_from(reports, "default strategy", "custom loop", profile, n_epochs, wall)


def keras_fit_multiworker_known_issue(
    profile: profiles.Profile,
    workers: int = 2,
    seed: int = 1,
    timeout: float = DEFAULT_TIMEOUT,
) -> KnownIssue:
    """Try Keras ``fit`` (one short epoch) under ``MultiWorkerMirroredStrategy``.

    ``status`` is ``still failing`` when a worker's ``fit`` raised the
    PerReplica error of keras-team/keras#20585, ``works now`` when every worker's
    ``fit`` finished, and ``fails differently`` for any other error.
    """
    start = time.perf_counter()
    task = _task(profile, "keras_fit_multiworker", 1, seed, workers=workers)
    ports = ports_mod.free_ports(workers)
    configs = [tf_config(ports, i) for i in range(workers)]
    reports = _run_children(task, configs, timeout, need_all=False)
    errors = [r["error"] for r in reports if r.get("error")]
    if not errors and len(reports) < workers:
        status = FAILS_DIFFERENTLY
        message = f"only {len(reports)} of {workers} workers finished fit; the others hung"
    elif not errors:
        status = WORKS_NOW
        message = f"fit finished on all {workers} workers: " + "; ".join(
            f"worker {r['index']} loss {r['loss']:.4f}" for r in reports
        )
    else:
        matching = [e for e in errors if PER_REPLICA_ERROR in e]
        status = STILL_FAILING if matching else FAILS_DIFFERENTLY
        message = (matching or errors)[0]
    return KnownIssue(
        issue=KERAS_ISSUE,
        url=KERAS_ISSUE_URL,
        status=status,
        message=message,
        seconds=time.perf_counter() - start,
        profile=profile.name,
        data=_data(reports[0]),
    )
