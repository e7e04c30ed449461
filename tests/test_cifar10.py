"""The CIFAR-10 case study: the corrected network, training on the fixture,
saving and reloading, per-class accuracy, and the command line killed and resumed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from conftest import hang_limit  # noqa: E402
from rocm_dl_guide.casestudies import cifar10  # noqa: E402
from rocm_dl_guide.core import profiles  # noqa: E402
from rocm_dl_guide.training import checkpoints  # noqa: E402

SMOKE = profiles.current("smoke")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    ckpt = tmp_path_factory.mktemp("cifar10-ckpt")
    return cifar10.train(profile=SMOKE, checkpoint_dir=ckpt, progress=False)


def test_net_is_the_guides_network():
    net = cifar10.Net()
    out = net(torch.zeros(2, 3, 32, 32))
    assert out.shape == (2, 10)
    # conv1 456 + conv2 2,416 + fc1 48,120 + fc2 10,164 + fc3 850
    assert sum(p.numel() for p in net.parameters()) == 62006
    assert [n for n, _ in net.named_children()] == ["conv1", "pool", "conv2", "fc1", "fc2", "fc3"]


def test_trains_well_above_chance(run):
    assert run.data.prepared.kind == "fixture"
    assert run.epochs == 2  # the guide's two epochs (the smoke profile allows 3)
    assert [m.epoch for m in run.result.history] == [1, 2]
    # chance is 0.10. AMD's recipe (SGD, lr 0.001) starts slowly, and after two
    # epochs the seed decides much: on the fixture with every label right, seeds
    # 0-9 gave 0.67, 0.81, 0.34, 0.67, 0.72, 0.24, 0.58, 0.71, 0.49, 0.41
    # (2026-11-26, AVX512 EPYC), while the training loss fell for every one. So
    # the seed is the page's own, 0, fixed by cifar10.train. The fixture now
    # moves 15% of its labels (fixture_formats.LABEL_AGREEMENT), so that it
    # reads like the real set (about half right after two epochs): seed 0 gave
    # 0.47 (2026-11-28, Xeon with AVX-512).
    assert run.test_accuracy > 0.25, run.summary()
    first, last = run.result.history[0], run.result.history[-1]
    assert last.train_loss < first.train_loss
    assert "fixture" in run.summary() and "chance 10%" in run.summary()


def test_per_class_accuracy_adds_up(run):
    frame = run.per_class.frame
    assert list(frame["class"]) == cifar10.load(SMOKE).classes
    assert frame["class"].iloc[0] == "airplane" and len(frame) == 10
    assert frame["total"].sum() == len(run.data.test_set)
    overall = frame["correct"].sum() / frame["total"].sum()
    assert overall == pytest.approx(run.per_class.overall) == pytest.approx(run.test_accuracy)
    assert ((frame["accuracy"] >= 0) & (frame["accuracy"] <= 1)).all()
    assert run.per_class.best() == frame.loc[frame["accuracy"].idxmax(), "class"]
    fig = run.per_class.plot()
    bars = fig.axes[0].patches
    assert len(bars) == 10
    assert [b.get_width() for b in bars] == pytest.approx(list(100 * frame["accuracy"]))


def test_saved_weights_reload_to_the_same_predictions(run):
    assert run.weights is not None and run.weights.name == "cifar_net.pt"
    fresh = cifar10.Net()
    checkpoints.load_weights(fresh, run.weights)
    before, labels = cifar10.predict(run.model, run.data.test_loader, "cpu")
    after, labels2 = cifar10.predict(fresh, run.data.test_loader, "cpu")
    assert torch.equal(before, after) and torch.equal(labels, labels2)
    assert float((after == labels).float().mean()) == pytest.approx(run.test_accuracy)


def test_sample_batch_is_unnormalised_images(run):
    images, labels = cifar10.sample_batch(run.data, n=8)
    assert images.shape == (8, 3, 32, 32) and labels.shape == (8,)
    assert float(images.min()) >= 0.0 and float(images.max()) <= 1.0
    fig = cifar10.plot_samples(run.data, n=8)
    assert len([ax for ax in fig.axes if ax.images]) == 8


# --------------------------------------------------------------------------- kill and resume


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "rocm_dl_guide", "train", "cifar10", "--profile", "smoke", *args]


def _read(path: Path) -> dict:
    return torch.load(path, map_location="cpu", weights_only=True)


def _env() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "ROCM_DL_GUIDE_PROGRESS": "0"}


def test_cli_killed_after_an_epoch_resumes_without_gap_or_repeat(tmp_path):
    epochs = "4"
    killed_dir, clean_dir = tmp_path / "killed", tmp_path / "clean"
    proc = subprocess.Popen(
        _cli("--epochs", epochs, "--checkpoint-dir", str(killed_dir)),
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    ckpt = killed_dir / checkpoints.CHECKPOINT_NAME
    seen_epochs = []
    deadline = time.monotonic() + hang_limit(40)  # for the first epoch's checkpoint
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if ckpt.exists():
                # Read whatever is there while the trainer keeps writing: it must
                # always be a complete checkpoint (atomic replace), never half a file.
                state = _read(ckpt)
                assert state["format"] == "rocm_dl_guide.checkpoint/1"
                assert len(state["history"]) == state["epoch"]
                seen_epochs.append(state["epoch"])
                if state["epoch"] >= 1:
                    proc.send_signal(signal.SIGKILL)
                    break
            time.sleep(0.02)
    finally:
        proc.wait(timeout=hang_limit(20))
        stderr = proc.stderr.read()
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL, f"not killed mid-run ({proc.returncode}): {stderr}"
    done = _read(ckpt)["epoch"]
    assert 1 <= done < int(epochs)

    resumed = subprocess.run(
        _cli("--epochs", epochs, "--checkpoint-dir", str(killed_dir), "--resume"),
        env=_env(),
        capture_output=True,
        text=True,
        timeout=hang_limit(100),
    )
    assert resumed.returncode == 0, resumed.stderr
    log = resumed.stdout
    assert f"epoch {done} of {epochs} done" in log
    assert f"epoch {done + 1}/{epochs}:" in log
    assert f"epoch {done}/{epochs}:" not in log  # nothing trained twice
    assert "test accuracy" in resumed.stdout

    clean = subprocess.run(
        _cli("--epochs", epochs, "--checkpoint-dir", str(clean_dir)),
        env=_env(),
        capture_output=True,
        text=True,
        timeout=hang_limit(100),
    )
    assert clean.returncode == 0, clean.stderr
    got = _read(ckpt)["history"]
    want = _read(clean_dir / checkpoints.CHECKPOINT_NAME)["history"]
    assert [row["epoch"] for row in got] == [1, 2, 3, 4]
    for a, b in zip(got, want, strict=True):  # same data order, same weights: same numbers
        for key in ("train_loss", "train_accuracy", "val_loss", "val_accuracy", "lr"):
            assert a[key] == pytest.approx(b[key], rel=1e-5, abs=1e-7), (a["epoch"], key)
    assert (killed_dir / "cifar_net.pt").is_file()
