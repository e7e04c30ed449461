"""TensorFlow's distribution strategies on the Fashion-MNIST fixture (smoke profile).

Every run happens in child processes that the module starts and bounds with a
timeout; this test process never imports TensorFlow. The workers listen on
free ``127.0.0.1`` ports.
"""

import json
import socket
import subprocess

import matplotlib
import pytest

from conftest import hang_limit
from rocm_dl_guide.core import profiles
from rocm_dl_guide.core.ports import free_ports
from rocm_dl_guide.distributed import tf_distributed, tf_tasks

SMOKE = profiles.current("smoke")

matplotlib.use("Agg")

TIMEOUT = 240  # seconds per run, all its processes together; a run takes 5-15 s here
CHANCE = 0.1  # ten classes


@pytest.fixture(scope="module")
def multiworker():
    return tf_distributed.multiworker_custom_loop(SMOKE, workers=2, timeout=TIMEOUT)


@pytest.fixture(scope="module")
def baseline():
    return tf_distributed.single_worker_baseline(SMOKE, timeout=TIMEOUT)


def _says_fixture(run):
    assert run.data.kind == "fixture" and "fixture" in run.data.note
    assert "fixture" in run.summary()


def test_free_ports_are_distinct_and_bindable():
    ports = free_ports(3)
    assert len(set(ports)) == 3 and all(p > 0 for p in ports)
    for port in ports:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", port))
    config = tf_distributed.tf_config(ports[:2], 1)
    assert config == {
        "cluster": {"worker": [f"127.0.0.1:{ports[0]}", f"127.0.0.1:{ports[1]}"]},
        "task": {"type": "worker", "index": 1},
    }
    json.dumps(config)


def test_short_error_leaves_out_the_printed_tensors():
    text = (
        "ValueError: Attempt to convert a value (PerReplica:{\n  0: <tf.Tensor: shape=(32, 28, 28)"
        ", numpy=\narray([[[0.1, 0.2]]])>\n}) with an unsupported type "
        "(<class 'tensorflow.python.distribute.values.PerReplica'>) to a Tensor."
    )
    short = tf_tasks.short_error(text)
    assert short.startswith("ValueError: " + tf_distributed.PER_REPLICA_ERROR + ":{...})")
    assert "numpy" not in short and short.endswith("to a Tensor.")
    assert tf_tasks.short_error("x" * 50, limit=10) == "x" * 10 + " ..."


def test_mirrored_fit_on_two_replicas_beats_chance():
    run = tf_distributed.mirrored_fit(SMOKE, devices=2, timeout=TIMEOUT)
    _says_fixture(run)
    assert run.strategy == "MirroredStrategy" and run.method == "Keras fit"
    assert run.replicas == 2 and len(run.devices) == 2, run.summary()
    assert run.test_accuracy > CHANCE + 0.4, run.summary()  # measured 0.94
    assert list(run.history["epoch"]) == [1, 2, 3]  # the smoke profile's epochs
    assert run.history["loss"].iloc[-1] < run.history["loss"].iloc[0]
    assert 0 < run.seconds < run.wall_seconds
    assert len(run.plot().axes) == 2


def test_multiworker_custom_loop_ends_with_identical_weights(multiworker):
    run = multiworker
    _says_fixture(run)
    assert run.strategy == "MultiWorkerMirroredStrategy" and run.method == "custom loop"
    assert run.workers == 2 and run.replicas == 2, run.summary()
    assert [w.index for w in run.worker_reports] == [0, 1]
    first, second = run.worker_reports
    assert first.weights_sha256 == second.weights_sha256, run.summary()
    assert run.weights_identical and "weights identical" in run.summary()
    assert first.test_accuracy == second.test_accuracy
    assert run.test_accuracy > CHANCE + 0.4, run.summary()  # measured 0.93
    assert list(run.history["epoch"]) == [1, 2, 3]
    assert run.history["loss"].iloc[-1] < run.history["loss"].iloc[0]


def test_multiworker_accuracy_is_comparable_to_one_worker(multiworker, baseline):
    _says_fixture(baseline)
    assert baseline.workers == 1 and baseline.replicas == 1
    assert baseline.test_accuracy > CHANCE + 0.4, baseline.summary()  # measured 0.96
    gap = abs(multiworker.test_accuracy - baseline.test_accuracy)
    # Seeds 2 and 3: one worker 0.97 and 0.92, two workers 0.94 and 0.91 (Keras
    # fit on two replicas 0.93 both): gaps 0.03 and 0.01.
    assert gap < 0.15, (multiworker.summary(), baseline.summary())


def test_keras_fit_under_multiworker_still_fails_with_per_replica_error():
    issue = tf_distributed.keras_fit_multiworker_known_issue(SMOKE, timeout=TIMEOUT)
    assert issue.data.kind == "fixture" and "fixture" in issue.summary()
    if issue.status == tf_distributed.WORKS_NOW:
        pytest.fail(
            f"{tf_distributed.KERAS_ISSUE} appears fixed: {issue.message}. Keras fit now works "
            "under MultiWorkerMirroredStrategy: update the TensorFlow distributed-training page "
            "(and this test) to use it."
        )
    assert issue.status == tf_distributed.STILL_FAILING, (
        f"Keras fit under MultiWorkerMirroredStrategy fails differently now: {issue.message}"
    )
    assert issue.still_failing and tf_distributed.PER_REPLICA_ERROR in issue.message
    assert issue.url.endswith("/keras-team/keras/issues/20585")


@pytest.fixture
def started(monkeypatch):
    """The processes the module starts in a test (to check that none is left running)."""
    procs = []
    real = subprocess.Popen

    def recording(*args, **kwargs):
        proc = real(*args, **kwargs)
        procs.append(proc)
        return proc

    monkeypatch.setattr(tf_distributed.subprocess, "Popen", recording)
    return procs


def test_a_failing_worker_stops_the_others_and_shows_its_stderr(monkeypatch, started):
    # Worker 1 fails at once; worker 0 would wait forever (as in a collective).
    child = (
        "import json, sys, time; spec = json.load(open(sys.argv[1])); "
        "sys.exit('worker boom') if spec['index'] == 1 else time.sleep(600)"
    )
    monkeypatch.setattr(tf_distributed, "CHILD_CODE", child)
    monkeypatch.setattr(tf_distributed, "FAILURE_GRACE", 1.0)
    # The failure ends the run, not the run's time limit ("timed out after ..."),
    # which worker 0, waiting forever, would otherwise reach.
    with pytest.raises(tf_distributed.TfDistributedError, match="process 1 of 2 failed") as err:
        tf_distributed.multiworker_custom_loop(SMOKE, epochs=1, timeout=hang_limit(20))
    assert "worker boom" in str(err.value) and "exit 1" in str(err.value)
    assert len(started) == 2 and all(p.poll() is not None for p in started)


def test_a_run_out_of_time_is_killed(monkeypatch, started):
    monkeypatch.setattr(tf_distributed, "CHILD_CODE", "import time; time.sleep(600)")
    with pytest.raises(tf_distributed.TfDistributedError, match="timed out after 2 s"):
        tf_distributed.mirrored_fit(SMOKE, epochs=1, timeout=2)
    assert len(started) == 1 and started[0].poll() is not None
