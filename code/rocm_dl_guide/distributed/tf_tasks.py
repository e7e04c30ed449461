"""The child side of :mod:`rocm_dl_guide.distributed.tf_distributed`: the tasks that train.

Each process that :mod:`~rocm_dl_guide.distributed.tf_distributed` starts runs
:func:`run_task` on a JSON task file (with ``python -c``, see
:data:`~rocm_dl_guide.distributed.tf_distributed.CHILD_CODE`), imports
TensorFlow, builds the Fashion-MNIST model of
:mod:`rocm_dl_guide.casestudies.fashion_mnist` and trains it one way:

- ``mirrored_fit``: Keras ``fit`` under ``MirroredStrategy``, over the GPUs or
  logical CPU devices;
- ``multiworker_loop``: :func:`custom_loop` under ``MultiWorkerMirroredStrategy``,
  one worker of the cluster its ``TF_CONFIG`` describes;
- ``single_loop``: the same loop under TensorFlow's default strategy;
- ``keras_fit_multiworker``: Keras ``fit`` under ``MultiWorkerMirroredStrategy``,
  reporting its error (:func:`short_error`) rather than raising it.

It writes its result (test accuracy and loss, :func:`weights_sha256` of the
final weights, timings, history, the data note) as JSON, then ends the process.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

from rocm_dl_guide.casestudies import fashion_mnist
from rocm_dl_guide.casestudies.fashion_mnist import BATCH_SIZE
from rocm_dl_guide.core import profiles


def run_task(task_path: str) -> None:
    """A child process's entry point: run the JSON task at ``task_path``, write its result.

    Ends the process with ``os._exit`` once the result is written, so that
    TensorFlow's collective runtime cannot hold it open at shutdown.
    """
    spec = json.loads(Path(task_path).read_text(encoding="utf-8"))
    tasks = {
        "mirrored_fit": _mirrored_fit_task,
        "multiworker_loop": _multiworker_loop_task,
        "single_loop": _single_loop_task,
        "keras_fit_multiworker": _keras_fit_multiworker_task,
    }
    result = tasks[spec["task"]](spec)
    result["index"] = spec["index"]
    Path(spec["result"]).write_text(json.dumps(result), encoding="utf-8")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _tensorflow():
    from rocm_dl_guide.core.device import import_tensorflow

    return import_tensorflow()


def _load(spec: dict[str, Any]):
    """Scaled ``(x_train, y_train), (x_test, y_test)`` and the data note, as a dict."""
    prof = profiles.Profile(**spec["profile"])
    # the fixture even where the OS has the real files: the lesson is the launch
    (x, y), (x_test, y_test), prepared = fashion_mnist.load_data(prof, system_copies=False)
    data = {"name": prepared.name, "root": str(prepared.root), "kind": prepared.kind}
    data["note"] = prepared.note
    scaled = (x.astype("float32") / 255.0, y.astype("int64"))
    return scaled, (x_test.astype("float32") / 255.0, y_test.astype("int64")), data


def weights_sha256(model) -> str:
    """SHA-256 over a Keras model's weights, in order, as float32 bytes."""
    import numpy as np

    digest = hashlib.sha256()
    for w in model.get_weights():
        digest.update(np.ascontiguousarray(w, dtype=np.float32).tobytes())
    return digest.hexdigest()


def _evaluate(model, x, y) -> tuple[float, float]:
    """Test accuracy and mean cross-entropy of the logits model on ``x``, in this process."""
    import numpy as np

    logits = np.asarray(model.predict(x, batch_size=256, verbose=0), dtype=np.float64)
    logits -= logits.max(axis=1, keepdims=True)
    log_probs = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    loss = float(-log_probs[np.arange(len(y)), y].mean())
    return float((logits.argmax(axis=1) == y).mean()), loss


def _build(keras, seed: int):
    keras.utils.set_random_seed(seed)
    return fashion_mnist.build_model()


def _mirrored_fit_task(spec: dict[str, Any]) -> dict[str, Any]:
    tf = _tensorflow()
    n = spec["devices"]
    gpus = tf.config.list_physical_devices("GPU")
    if len(gpus) >= 2:
        devices = [f"/gpu:{i}" for i in range(min(n, len(gpus)))]
    else:  # before anything initialises the devices
        cpu = tf.config.list_physical_devices("CPU")[0]
        config = [tf.config.LogicalDeviceConfiguration() for _ in range(n)]
        tf.config.set_logical_device_configuration(cpu, config)
        devices = [d.name for d in tf.config.list_logical_devices("CPU")][:n]
    import keras

    strategy = tf.distribute.MirroredStrategy(devices=devices)
    (x, y), (x_test, y_test), data = _load(spec)
    with strategy.scope():
        model = fashion_mnist.compile_model(_build(keras, spec["seed"]))
    replicas = strategy.num_replicas_in_sync
    start = time.perf_counter()
    hist = model.fit(x, y, epochs=spec["epochs"], batch_size=BATCH_SIZE * replicas, verbose=0)
    seconds = time.perf_counter() - start
    accuracy, loss = _evaluate(model, x_test, y_test)
    history = [
        [e + 1, float(hist.history["loss"][e]), float(hist.history["accuracy"][e])]
        for e in range(len(hist.epoch))
    ]
    return {
        "test_accuracy": accuracy,
        "test_loss": loss,
        "weights_sha256": weights_sha256(model),
        "seconds": seconds,
        "replicas": replicas,
        "devices": devices,
        "history": history,
        "data": data,
    }


def _pin_worker_device(tf, index: int, workers: int) -> list[str]:
    """One GPU per worker when there are enough, else the CPU (each worker its share
    of the cores, so that they do not fight over them); the device names used."""
    gpus = tf.config.list_physical_devices("GPU")
    if len(gpus) >= workers:
        tf.config.set_visible_devices(gpus[index], "GPU")
        tf.config.experimental.set_memory_growth(gpus[index], True)
        return [f"worker {index} GPU {index}"]
    tf.config.set_visible_devices([], "GPU")
    share = max(1, (os.cpu_count() or 1) // workers)
    tf.config.threading.set_intra_op_parallelism_threads(share)
    tf.config.threading.set_inter_op_parallelism_threads(share)
    return [f"worker {index} CPU"]


def distributed_batches(tf, strategy, x, y, seed: int):
    """The training set as a distributed dataset of global batches, shuffled alike everywhere."""
    global_batch = BATCH_SIZE * strategy.num_replicas_in_sync
    ds = tf.data.Dataset.from_tensor_slices((x, y))
    ds = ds.shuffle(len(x), seed=seed, reshuffle_each_iteration=True)
    ds = ds.batch(global_batch, drop_remainder=True)
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return strategy.experimental_distribute_dataset(ds.with_options(options))


def custom_loop(tf, strategy, model, x, y, epochs: int, seed: int) -> list[list[float]]:
    """Train ``model`` (built in ``strategy.scope()``) with a custom loop; the history.

    Per step each replica computes its examples' losses, averages them over the
    *global* batch (``tf.nn.compute_average_loss``) so that the all-reduced
    gradients are those of the global mean, and applies them; the step returns
    the loss and the number of right answers summed over replicas. Returns
    ``[[epoch, mean loss, accuracy], ...]``.
    """
    import keras

    global_batch = BATCH_SIZE * strategy.num_replicas_in_sync
    with strategy.scope():
        optimizer = keras.optimizers.Adam()
        loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True, reduction="none")

    def replica_step(images, labels):
        with tf.GradientTape() as tape:
            logits = model(images, training=True)
            loss = tf.nn.compute_average_loss(
                loss_fn(labels, logits), global_batch_size=global_batch
            )
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        right = tf.reduce_sum(tf.cast(tf.equal(tf.argmax(logits, axis=1), labels), tf.float32))
        return loss, right

    @tf.function
    def train_step(batch):
        loss, right = strategy.run(replica_step, args=batch)
        total = tf.distribute.ReduceOp.SUM
        return strategy.reduce(total, loss, axis=None), strategy.reduce(total, right, axis=None)

    batches = distributed_batches(tf, strategy, x, y, seed)
    history = []
    for epoch in range(1, epochs + 1):
        losses, right, steps = 0.0, 0.0, 0
        for batch in batches:
            loss, correct = train_step(batch)
            losses, right, steps = losses + float(loss), right + float(correct), steps + 1
        history.append([epoch, losses / max(steps, 1), right / max(steps * global_batch, 1)])
    return history


def _loop_result(tf, strategy, spec, devices: list[str]) -> dict[str, Any]:
    import keras

    (x, y), (x_test, y_test), data = _load(spec)
    with strategy.scope():
        model = _build(keras, spec["seed"])
    start = time.perf_counter()
    history = custom_loop(tf, strategy, model, x, y, spec["epochs"], spec["seed"])
    seconds = time.perf_counter() - start
    accuracy, loss = _evaluate(model, x_test, y_test)
    return {
        "test_accuracy": accuracy,
        "test_loss": loss,
        "weights_sha256": weights_sha256(model),
        "seconds": seconds,
        "replicas": strategy.num_replicas_in_sync,
        "devices": devices,
        "history": history,
        "data": data,
    }


def _multiworker_loop_task(spec: dict[str, Any]) -> dict[str, Any]:
    tf = _tensorflow()
    devices = _pin_worker_device(tf, spec["index"], spec["workers"])
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    return _loop_result(tf, strategy, spec, devices)


def _single_loop_task(spec: dict[str, Any]) -> dict[str, Any]:
    tf = _tensorflow()
    gpus = tf.config.list_logical_devices("GPU")
    return _loop_result(tf, tf.distribute.get_strategy(), spec, ["GPU 0" if gpus else "CPU"])


def _keras_fit_multiworker_task(spec: dict[str, Any]) -> dict[str, Any]:
    """Keras ``fit`` under ``MultiWorkerMirroredStrategy``, as TensorFlow's tutorial does it."""
    tf = _tensorflow()
    _pin_worker_device(tf, spec["index"], spec["workers"])
    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    import keras

    (x, y), _, data = _load(spec)
    global_batch = BATCH_SIZE * strategy.num_replicas_in_sync
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(len(x), seed=spec["seed"])
    dataset = dataset.repeat().batch(global_batch)
    with strategy.scope():
        model = fashion_mnist.compile_model(_build(keras, spec["seed"]))
    result: dict[str, Any] = {"data": data, "error": None}
    try:
        hist = model.fit(
            dataset, epochs=1, steps_per_epoch=max(len(x) // global_batch, 1), verbose=0
        )
        result["loss"] = float(hist.history["loss"][-1])
    except Exception as exc:  # the point: report the error, whatever it is
        result["error"] = short_error(f"{type(exc).__name__}: {exc}")
    return result


def short_error(text: str, limit: int = 2000) -> str:
    """An error message with the printed tensors of a ``PerReplica:{...}`` left out,
    cut to ``limit`` characters."""
    text = re.sub(r"PerReplica:\{.*?\n\}", "PerReplica:{...}", text, flags=re.S)
    return text if len(text) <= limit else text[:limit] + " ..."
