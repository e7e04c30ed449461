"""The shared PyTorch training loop (rocm_dl_guide.training.train) and the Keras runner.

Everything trains small CNNs / MLPs on a synthetic but learnable data set
(10 classes, each a fixed random 16x16 pattern, plus noise), so the tests run
on two CPU cores in seconds and a broken loop fails them (chance is 0.1).
Resuming is tested after real interruptions: training scripts run in
subprocesses that SIGKILL themselves after an epoch's checkpoint, or halfway
through writing one.
"""

from __future__ import annotations

import io
import json
import math
import os
import signal
import subprocess
import sys
import textwrap
from collections import namedtuple
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
from torch import nn  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

from rocm_dl_guide.training import train  # noqa: E402
from rocm_dl_guide.training.checkpoints import CheckpointError, load_weights, save_weights  # noqa: E402
from rocm_dl_guide.training.metrics import EpochMetrics  # noqa: E402
from rocm_dl_guide.training.train import TrainResult, evaluate, fit  # noqa: E402

HERE = Path(__file__).resolve().parent
SIZE = 16
CLASSES = 10


# --------------------------------------------------------------------------- helpers
# (also imported by the training scripts that run in subprocesses)


def make_data(n: int, seed: int, noise: float = 1.0) -> TensorDataset:
    """``n`` samples: class ``y`` is a fixed random pattern plus Gaussian noise."""
    patterns = torch.randn(CLASSES, 1, SIZE, SIZE, generator=torch.Generator().manual_seed(1234))
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, CLASSES, (n,), generator=g)
    x = patterns[y] + noise * torch.randn(n, 1, SIZE, SIZE, generator=g)
    return TensorDataset(x, y)


def make_model() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Dropout(0.1),
        nn.Linear(16 * (SIZE // 4) ** 2, CLASSES),
    )


def make_run(seed: int = 0, n_train: int = 1600, n_val: int = 400, lr: float = 3e-3):
    """(model, train loader, val loader, optimizer, scheduler), all seeded."""
    torch.manual_seed(seed)
    model = make_model()
    train_loader = DataLoader(make_data(n_train, seed=1), batch_size=32, shuffle=True)
    val_loader = DataLoader(make_data(n_val, seed=2), batch_size=200)
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    # MultiStepLR (unlike StepLR) goes wrong if its state is lost on resume
    scheduler = torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=[1], gamma=0.5)
    return model, train_loader, val_loader, optimizer, scheduler


SCRIPT = textwrap.dedent(
    """
    import io, json, os, signal, sys
    sys.path.insert(0, {tests!r})
    import torch
    torch.set_num_threads(1)
    from rocm_dl_guide.training.train import fit
    from test_train import make_run

    kill_after = int(os.environ.get("KILL_AFTER_EPOCH", "0"))
    kill_in_save = int(os.environ.get("KILL_IN_SAVE_AT_EPOCH", "0"))

    if kill_in_save:
        real_save = torch.save

        def dying_save(obj, f, *args, **kwargs):
            # write half of epoch N's checkpoint into the temporary file, then die
            if isinstance(obj, dict) and obj.get("epoch") == kill_in_save:
                buf = io.BytesIO()
                real_save(obj, buf, *args, **kwargs)
                data = buf.getvalue()
                f.write(data[: len(data) // 2])
                f.flush()
                os.fsync(f.fileno())
                os.kill(os.getpid(), signal.SIGKILL)
            return real_save(obj, f, *args, **kwargs)

        torch.save = dying_save

    def on_epoch_end(metrics):
        if metrics.epoch == kill_after:
            os.kill(os.getpid(), signal.SIGKILL)

    model, train_loader, val_loader, optimizer, scheduler = make_run()
    result = fit(
        model, train_loader, epochs=int(os.environ["EPOCHS"]), optimizer=optimizer,
        scheduler=scheduler, val_loader=val_loader, device="cpu",
        checkpoint_dir=os.environ["CKPT_DIR"], resume=True, progress=False,
        on_epoch_end=on_epoch_end,
    )
    with open(os.environ["OUT"], "w") as fh:
        json.dump({{"resumed_from_epoch": result.resumed_from_epoch,
                   "history": [vars(m) for m in result.history]}}, fh)
    """
).format(tests=str(HERE))


def run_script(tmp_path: Path, ckpt_dir: Path, epochs: int, **env: str):
    """Run the training script in a fresh interpreter; returns (returncode, output or None)."""
    script = tmp_path / "train_script.py"
    script.write_text(SCRIPT)
    out = tmp_path / f"out-{ckpt_dir.name}-{epochs}-{len(list(tmp_path.iterdir()))}.json"
    full_env = {
        **os.environ,
        "CKPT_DIR": str(ckpt_dir),
        "EPOCHS": str(epochs),
        "OUT": str(out),
        "OMP_NUM_THREADS": "1",
        **env,
    }
    proc = subprocess.run(
        [sys.executable, str(script)], env=full_env, capture_output=True, text=True, timeout=120
    )
    if proc.returncode not in (0, -signal.SIGKILL):
        pytest.fail(f"training script failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return proc.returncode, (json.loads(out.read_text()) if out.exists() else None)


def read_checkpoint(path: Path) -> dict:
    return torch.load(path, map_location="cpu", weights_only=True)


def quiet_fit(*args, **kwargs) -> TrainResult:
    kwargs.setdefault("device", "cpu")
    kwargs.setdefault("progress", False)
    kwargs.setdefault("log", None)
    return fit(*args, **kwargs)


def same_state(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


# --------------------------------------------------------------------------- training


def test_fit_learns_the_synthetic_classes():
    model, train_loader, val_loader, optimizer, _ = make_run()
    messages: list[str] = []
    result = fit(
        model,
        train_loader,
        epochs=2,
        optimizer=optimizer,
        val_loader=val_loader,
        device="cpu",
        progress=True,
        log=messages.append,
    )
    assert [m.epoch for m in result.history] == [1, 2]
    last = result.history[-1]
    assert last.val_accuracy > 0.8, result.to_frame()
    assert last.train_loss < result.history[0].train_loss
    assert all(m.images_per_second > 0 and m.seconds > 0 for m in result.history)
    assert all(m.lr == pytest.approx(3e-3) for m in result.history)
    assert result.device == "cpu" and result.checkpoint is None and result.resumed_from_epoch == 0
    assert len(messages) == 2 and messages[1].startswith("epoch 2/2: train loss")

    frame = result.to_frame()
    assert list(frame["epoch"]) == [1, 2]
    assert list(frame.columns) == [
        "epoch",
        "train_loss",
        "train_accuracy",
        "val_loss",
        "val_accuracy",
        "images_per_second",
        "seconds",
        "lr",
    ]
    # evaluate() agrees with the history's last validation numbers
    val_loss, val_acc = evaluate(model, val_loader, "cpu")
    assert val_acc == pytest.approx(last.val_accuracy)
    assert val_loss == pytest.approx(last.val_loss, rel=1e-6)


def test_plots_return_figures():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    history = [
        EpochMetrics(e, 2.0 / e, 0.3 * e, 2.1 / e, 0.25 * e, 100.0, 1.0, 0.1) for e in (1, 2, 3)
    ]
    result = TrainResult(history, "cpu", None)
    fig = result.plot(title="demo")
    assert len(fig.axes) == 2
    assert len(fig.axes[0].lines) == 2 and len(fig.axes[1].lines) == 2
    assert list(fig.axes[0].lines[0].get_ydata()) == pytest.approx([2.0, 1.0, 2.0 / 3])
    _, ax = plt.subplots()
    fig2 = result.plot(ax=ax)
    assert ax in fig2.axes and len(fig2.axes) == 2  # accuracy on a twin axis
    plt.close("all")


def test_evaluate_exact_loss_and_accuracy_and_restores_mode():
    class Oracle(nn.Module):
        """Logits: one-hot of the class written in pixel 0 (so accuracy is known)."""

        def forward(self, x):
            return 5.0 * nn.functional.one_hot(x[:, 0, 0, 0].long(), CLASSES).float()

    y = torch.arange(40) % CLASSES
    x = torch.zeros(40, 1, 2, 2)
    x[:, 0, 0, 0] = y.float()
    x[:10, 0, 0, 0] = (y[:10] + 1) % CLASSES  # a quarter is wrong
    loader = DataLoader(TensorDataset(x, y), batch_size=16)  # uneven last batch
    model = Oracle().train()
    loss, acc = evaluate(model, loader, "cpu")
    expected = nn.functional.cross_entropy(model(x), y).item()
    assert acc == pytest.approx(0.75)
    assert loss == pytest.approx(expected, rel=1e-6)
    assert model.training  # previous mode restored
    _, acc_capped = evaluate(model, loader, "cpu", max_batches=1)  # 10 wrong out of 16
    assert acc_capped == pytest.approx(6 / 16)


def test_max_train_batches_and_scheduler():
    model, train_loader, _, optimizer, scheduler = make_run(n_train=640)
    calls = []
    model.register_forward_hook(lambda *_: calls.append(1))
    result = quiet_fit(
        model,
        train_loader,
        epochs=2,
        optimizer=optimizer,
        scheduler=scheduler,
        max_train_batches=3,
    )
    assert len(calls) == 6  # 3 batches x 2 epochs, no validation
    assert [m.lr for m in result.history] == pytest.approx([3e-3, 1.5e-3])
    assert result.history[0].val_loss is None and result.history[0].val_accuracy is None
    assert optimizer.param_groups[0]["lr"] == pytest.approx(1.5e-3)


def test_aux_logits_weight_trains_the_aux_head():
    Outputs = namedtuple("Outputs", ["logits", "aux_logits"])

    class TwoHeads(nn.Module):
        """Like Inception v3: (logits, aux_logits) in train mode, logits in eval mode."""

        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Flatten(), nn.Linear(SIZE * SIZE, 32), nn.ReLU())
            self.head = nn.Linear(32, CLASSES)
            self.aux = nn.Linear(32, CLASSES)

        def forward(self, x):
            h = self.body(x)
            if self.training:
                return Outputs(self.head(h), self.aux(h))
            return self.head(h)

    loader = DataLoader(make_data(256, seed=3), batch_size=32)
    for weight, aux_moves in ((None, False), (0.4, True)):
        torch.manual_seed(0)
        model = TwoHeads()
        before = model.aux.weight.detach().clone()
        result = quiet_fit(
            model,
            loader,
            epochs=1,
            optimizer=torch.optim.SGD(model.parameters(), lr=0.05),
            val_loader=loader,
            aux_logits_weight=weight,
        )
        moved = not torch.equal(before, model.aux.weight)
        assert moved == aux_moves, weight
        m = result.history[0]
        assert 0.0 <= m.train_accuracy <= 1.0 and m.val_accuracy is not None


def test_amp_and_channels_last_on_cpu():
    model, train_loader, val_loader, optimizer, _ = make_run(n_train=320, n_val=200)
    messages: list[str] = []
    result = quiet_fit(
        model,
        train_loader,
        epochs=1,
        optimizer=optimizer,
        val_loader=val_loader,
        amp=True,
        channels_last=True,
        log=messages.append,
    )
    assert math.isfinite(result.history[0].train_loss)
    assert any("bfloat16" in m for m in messages)
    assert model[0].weight.is_contiguous(memory_format=torch.channels_last)


def test_resume_after_sigkill_continues_without_gap(tmp_path):
    ckpt_dir = tmp_path / "ckpt"
    rc, _ = run_script(tmp_path, ckpt_dir, 3, KILL_AFTER_EPOCH="1")
    assert rc == -signal.SIGKILL  # really killed, right after epoch 1's checkpoint
    saved = read_checkpoint(ckpt_dir / "last.pt")
    assert saved["epoch"] == 1 and len(saved["history"]) == 1

    rc, resumed = run_script(tmp_path, ckpt_dir, 3)
    assert rc == 0
    hist = resumed["history"]
    assert resumed["resumed_from_epoch"] == 1
    assert [h["epoch"] for h in hist] == [1, 2, 3]
    assert hist[0] == saved["history"][0]  # epoch 1 as saved before the kill
    assert hist[2]["train_loss"] < hist[0]["train_loss"]
    assert hist[2]["val_accuracy"] >= hist[0]["val_accuracy"]
    # the scheduler state survived the kill: one halving after epoch 1, none after
    assert [h["lr"] for h in hist] == pytest.approx([3e-3, 1.5e-3, 1.5e-3])
    assert read_checkpoint(ckpt_dir / "last.pt")["epoch"] == 3

    # RNG, optimizer and model states are restored: the resumed run matches an
    # uninterrupted one epoch for epoch
    rc, straight = run_script(tmp_path, tmp_path / "straight", 3)
    assert rc == 0 and straight["resumed_from_epoch"] == 0
    for a, b in zip(hist, straight["history"], strict=True):
        for key in ("train_loss", "train_accuracy", "val_loss", "val_accuracy"):
            assert a[key] == pytest.approx(b[key], rel=1e-5, abs=1e-7), (a["epoch"], key)


def test_sigkill_while_saving_keeps_the_previous_checkpoint(tmp_path):
    ckpt_dir = tmp_path / "ckpt"
    rc, first = run_script(tmp_path, ckpt_dir, 1)
    assert rc == 0 and [h["epoch"] for h in first["history"]] == [1]
    last = ckpt_dir / "last.pt"
    before = last.read_bytes()

    rc, _ = run_script(tmp_path, ckpt_dir, 3, KILL_IN_SAVE_AT_EPOCH="2")
    assert rc == -signal.SIGKILL
    leftovers = [p for p in ckpt_dir.iterdir() if p.name not in ("last.pt", "best.pt", ".lock")]
    assert leftovers and all(p.name.startswith(".last.pt.") for p in leftovers)
    assert last.read_bytes() == before  # untouched, still epoch 1
    assert read_checkpoint(last)["epoch"] == 1

    # the half-written temporary file is not taken for a checkpoint, and is cleaned up
    model, train_loader, val_loader, optimizer, scheduler = make_run()
    messages: list[str] = []
    result = quiet_fit(
        model,
        train_loader,
        epochs=2,
        optimizer=optimizer,
        scheduler=scheduler,
        val_loader=val_loader,
        checkpoint_dir=ckpt_dir,
        resume=True,
        log=messages.append,
    )
    assert result.resumed_from_epoch == 1
    assert [m.epoch for m in result.history] == [1, 2]
    assert sorted(p.name for p in ckpt_dir.iterdir()) == [".lock", "best.pt", "last.pt"]
    assert any("killed while saving" in m for m in messages)


def test_exception_during_save_leaves_previous_checkpoint(tmp_path, monkeypatch):
    model, train_loader, val_loader, optimizer, scheduler = make_run(n_train=320, n_val=200)
    common = dict(
        optimizer=optimizer,
        scheduler=scheduler,
        val_loader=val_loader,
        checkpoint_dir=tmp_path,
        resume=True,
    )
    messages: list[str] = []
    quiet_fit(model, train_loader, epochs=1, log=messages.append, **common)
    assert any("no checkpoint" in m and "from scratch" in m for m in messages)
    last = tmp_path / "last.pt"
    before = read_checkpoint(last)
    assert before["epoch"] == 1

    real_save = torch.save

    def half_then_fail(obj, f, *args, **kwargs):
        buf = io.BytesIO()
        real_save(obj, buf, *args, **kwargs)
        f.write(buf.getvalue()[: len(buf.getvalue()) // 2])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(torch, "save", half_then_fail)
    with pytest.raises(OSError, match="disk full") as full:
        quiet_fit(model, train_loader, epochs=2, **common)
    assert f"{last} (epoch 1) is intact" in str(full.value) and "--resume" in str(full.value)
    monkeypatch.setattr(torch, "save", real_save)

    after = read_checkpoint(last)
    assert after["epoch"] == 1 and after["history"] == before["history"]
    assert same_state(after["model"], before["model"])
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [".lock", "best.pt", "last.pt"]  # no temp file

    # a checkpoint already at `epochs` returns its history without training
    trained = []
    result = quiet_fit(model, train_loader, epochs=1, on_epoch_end=trained.append, **common)
    assert trained == [] and result.resumed_from_epoch == 1
    assert [vars(m) for m in result.history] == before["history"]


@pytest.mark.parametrize("damage", ["truncated", "random", "empty", "foreign"])
def test_corrupt_checkpoint_raises_checkpoint_error(tmp_path, damage):
    model, train_loader, _, optimizer, _ = make_run(n_train=64)
    quiet_fit(model, train_loader, epochs=1, optimizer=optimizer, checkpoint_dir=tmp_path)
    last = tmp_path / "last.pt"
    good = last.read_bytes()
    if damage == "truncated":
        last.write_bytes(good[: len(good) // 2])
    elif damage == "random":
        last.write_bytes(os.urandom(4096))
    elif damage == "empty":
        last.write_bytes(b"")
    else:
        torch.save({"weights": torch.zeros(3)}, last)  # a valid torch file, not a checkpoint
    with pytest.raises(CheckpointError, match=str(last)) as info:
        quiet_fit(
            model,
            train_loader,
            epochs=2,
            optimizer=optimizer,
            checkpoint_dir=tmp_path,
            resume=True,
        )
    assert isinstance(info.value, RuntimeError) and info.value.path == last


def test_save_and_load_weights_round_trip(tmp_path):
    torch.manual_seed(0)
    a = make_model().eval()
    torch.manual_seed(1)
    b = make_model().eval()
    x = make_data(8, seed=5).tensors[0]
    assert not torch.equal(a(x), b(x))
    path = save_weights(a, tmp_path / "w" / "model.pt")
    assert path.is_file() and [p.name for p in path.parent.iterdir()] == ["model.pt"]
    assert load_weights(b, path) is b
    assert torch.equal(a(x), b(x))


def test_final_weights_are_saved_next_to_the_checkpoint(tmp_path):
    model, train_loader, val_loader, optimizer, scheduler = make_run(n_train=320, n_val=64)
    result = quiet_fit(
        model,
        train_loader,
        epochs=1,
        optimizer=optimizer,
        checkpoint_dir=tmp_path,
        final_weights="final.pt",
    )
    assert result.weights == tmp_path / "final.pt"
    fresh = make_model()
    load_weights(fresh, result.weights)
    assert same_state(fresh.state_dict(), model.state_dict())
    # a resume that finds the run complete still hands back the weights file
    result.weights.unlink()
    again = quiet_fit(
        make_model(),
        train_loader,
        epochs=1,
        optimizer=optimizer,
        checkpoint_dir=tmp_path,
        resume=True,
        final_weights="final.pt",
    )
    assert again.resumed_from_epoch == 1 and again.weights.is_file()
    assert quiet_fit(model, train_loader, epochs=1, optimizer=optimizer).weights is None


def test_load_weights_errors(tmp_path):
    model = make_model()
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a zip archive at all")
    with pytest.raises(CheckpointError, match="bad.pt"):
        load_weights(model, bad)
    good = save_weights(model, tmp_path / "good.pt")
    cut = tmp_path / "cut.pt"
    cut.write_bytes(good.read_bytes()[:-200])
    with pytest.raises(CheckpointError, match="cut.pt"):
        load_weights(model, cut)
    with pytest.raises(CheckpointError, match="does not match this model"):
        load_weights(nn.Linear(3, 2), good)
    with pytest.raises(FileNotFoundError):
        load_weights(model, tmp_path / "missing.pt")


def test_failed_save_weights_keeps_old_file(tmp_path, monkeypatch):
    model = make_model()
    path = save_weights(model, tmp_path / "model.pt")
    before = path.read_bytes()

    def fail(obj, f, *args, **kwargs):
        f.write(b"partial")
        raise RuntimeError("killed")

    monkeypatch.setattr(train.torch, "save", fail)
    with torch.no_grad():
        model[0].weight.add_(1.0)
    with pytest.raises(RuntimeError, match="killed"):
        save_weights(model, path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["model.pt"]


# --------------------------------------------------------------------------- Keras


def test_importing_keras_train_does_not_import_tensorflow():
    code = (
        "import sys, rocm_dl_guide.training.keras_train as k\n"
        "assert callable(k.fit_keras)\n"
        "print('tensorflow' in sys.modules, 'keras' in sys.modules)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.split() == ["False", "False"]


def test_fit_keras_learns_and_reports(capsys):
    pytest.importorskip("tensorflow")
    import numpy as np

    from rocm_dl_guide.training.keras_train import fit_keras, tensorflow_devices

    data = make_data(2000, seed=6)
    x = data.tensors[0].reshape(2000, -1).numpy().astype(np.float32)
    y = data.tensors[1].numpy()
    import tensorflow as tf

    keras = tf.keras
    model = keras.Sequential(
        [
            keras.Input(shape=(SIZE * SIZE,)),
            keras.layers.Dense(32, activation="relu"),
            keras.layers.Dense(CLASSES, activation="softmax"),
        ]
    )
    lines: list[str] = []
    result = fit_keras(
        model, x, y, epochs=3, batch_size=32, validation_split=0.2, seed=0, log=lines.append
    )
    frame = result.history
    assert list(frame.columns[:5]) == ["epoch", "loss", "accuracy", "val_loss", "val_accuracy"]
    assert list(frame["epoch"]) == [1, 2, 3]
    assert frame["accuracy"].iloc[-1] > 0.8 and frame["val_accuracy"].iloc[-1] > 0.8
    assert frame["loss"].iloc[-1] < frame["loss"].iloc[0]
    assert result.seconds > 0 and result.device in ("CPU", "/GPU:0")
    assert lines and "3 epochs" in lines[0]
    # Keras' own per-step output is off: only the tqdm bar (stderr) reports progress
    assert "Epoch 1/3" not in capsys.readouterr().out

    import matplotlib

    matplotlib.use("Agg")
    fig = result.plot()
    assert len(fig.axes) == 2
    import matplotlib.pyplot as plt

    plt.close("all")

    devices = tensorflow_devices()
    assert isinstance(devices["built_with_rocm"], bool)
    assert isinstance(devices["gpus"], list) and devices["version"] == tf.__version__


def test_native_bf16_detection_from_cpu_flags():
    from rocm_dl_guide.core import device

    assert device.cpu_has_native_bf16({"avx2", "avx512f", "avx512_bf16"})
    assert device.cpu_has_native_bf16({"amx_bf16", "amx_tile"})
    assert not device.cpu_has_native_bf16({"avx2", "fma", "avx512f"})


def test_the_run_record_carries_the_epoch_history_for_both_frameworks():
    """`train --json` records the history itself, so pages read numbers from data,
    not from log lines; a Keras history (a DataFrame) gets the same keys."""
    import pandas as pd

    from rocm_dl_guide.core import runs

    rows = [
        EpochMetrics(1, 2.0, 0.25, 1.5, 0.5, 100.0, 1.0, 0.1),
        EpochMetrics(2, 1.0, 0.5, float("nan"), None, 110.0, 1.0, 0.1),
    ]
    torch_run = type("Run", (), {"result": TrainResult(rows, "cpu", None), "test_accuracy": 0.6})
    record = runs.run_record("cifar10", torch_run, "fixtures")
    assert json.loads(json.dumps(record))["history"] == record["history"]
    assert [h["epoch"] for h in record["history"]] == [1, 2]
    assert record["history"][0]["train_loss"] == 2.0 and record["history"][1]["val_loss"] is None
    assert runs.losses_text(record["history"][0]) == (
        "train loss 2.0000 acc 0.2500 | val loss 1.5000 acc 0.5000"
    )
    frame = pd.DataFrame({"epoch": [1], "loss": [0.7], "accuracy": [0.6], "val_loss": [0.8]})
    keras = type("Keras", (), {"history": frame})()
    (epoch,) = runs.epoch_history(keras)
    assert epoch == {
        "epoch": 1,
        "train_loss": 0.7,
        "train_accuracy": 0.6,
        "val_loss": 0.8,
        "val_accuracy": None,
    }


def test_checkpoint_listing_hides_lock_files_and_never_shows_zero_megabytes(tmp_path):
    from rocm_dl_guide.training.checkpoints import listing

    (tmp_path / ".lock").write_bytes(b"")
    (tmp_path / "last.pt.lock").write_bytes(b"")
    (tmp_path / "best.pt").write_bytes(b"x" * 2_500_000)
    (tmp_path / "note.txt").write_bytes(b"x" * 12)
    (tmp_path / "sharded-epoch-1").mkdir()
    (tmp_path / "sharded-epoch-1" / "0.distcp").write_bytes(b"x" * 3000)
    shown = listing(tmp_path)
    assert shown == [("best.pt", "2.5 MB"), ("note.txt", "12 B"), ("sharded-epoch-1/", "3.0 KB")]
    assert not any("lock" in name or size.startswith("0.0") for name, size in shown)
