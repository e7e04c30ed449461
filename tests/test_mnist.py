"""The frameworks chapter's first training runs, on the MNIST fixture (smoke profile)."""

import os
import subprocess
import sys

import pytest

from rocm_dl_guide.casestudies import mnist
from rocm_dl_guide.core import profiles

SMOKE = profiles.current("smoke")


def test_pytorch_mnist_beats_chance_by_far():
    run = mnist.train_pytorch(profile=SMOKE, progress=False)
    assert run.data.kind == "fixture" and "fixture" in run.data.note
    assert run.test_accuracy > 0.8, run.summary()  # chance 0.1; seeds 1-3: 0.94, 0.96, 0.95
    frame = run.result.to_frame()
    assert list(frame["epoch"]) == [1, 2, 3]  # the smoke profile's epochs
    assert frame["images_per_second"].iloc[0] > 0
    assert "PyTorch MNIST: test accuracy" in run.summary()


def test_keras_mnist_beats_chance_by_far():
    run = mnist.train_keras(profile=SMOKE, progress=False)
    assert run.data.kind == "fixture"
    assert run.test_accuracy > 0.6, run.summary()  # chance 0.1; seeds 1-3: 0.77, 0.77, 0.77
    assert {"loss", "accuracy", "val_loss", "val_accuracy"} <= set(run.result.history.columns)


def test_epochs_must_be_positive():
    with pytest.raises(ValueError, match="epochs must be at least 1"):
        mnist.train_pytorch(profile=SMOKE, epochs=0, progress=False)


def _cli(*args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "rocm_dl_guide", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **(env or {})},
    )


def test_cli_train_and_resume(tmp_path):
    ckpt = tmp_path / "ckpt"
    first = _cli(
        "train",
        "mnist-pytorch",
        "--profile",
        "smoke",
        "--epochs",
        "1",
        "--checkpoint-dir",
        str(ckpt),
    )
    assert first.returncode == 0, first.stderr
    assert "test accuracy" in first.stdout
    assert (ckpt / "last.pt").exists()
    again = _cli(
        "train",
        "mnist-pytorch",
        "--profile",
        "smoke",
        "--epochs",
        "2",
        "--resume",
        "--checkpoint-dir",
        str(ckpt),
    )
    assert again.returncode == 0, again.stderr
    assert "after 2 epochs" in again.stdout


def test_cli_train_rejects_bad_input():
    bad = _cli("train", "mnist-pytorch", "--profile", "turbo")
    assert bad.returncode == 2 and "unknown profile 'turbo'" in bad.stderr
    assert "Traceback" not in bad.stderr
    zero = _cli("train", "mnist-pytorch", "--profile", "smoke", "--epochs", "0")
    assert zero.returncode == 1 and "epochs must be at least 1" in zero.stderr
    assert "Traceback" not in zero.stderr
