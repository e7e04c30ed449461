"""Inception v3: the pretrained evaluation (weights API, preprocessing, top-5,
no silent fallback offline), the tiny-imagenet-200 validation reorganisation (correct,
idempotent, safe when interrupted) and fine-tuning in the smoke profile."""

from __future__ import annotations

import math
import os
import shutil
import urllib.error
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from rocm_dl_guide.casestudies import inception, inception_pretrained, tiny_imagenet  # noqa: E402
from rocm_dl_guide.core import casestudies, datasets, profiles  # noqa: E402

SMOKE = profiles.current("smoke")
GPU = profiles.current("gpu")

# --------------------------------------------------------------------------- evaluation


def test_categories_come_from_the_weights_metadata():
    cats = inception_pretrained.categories()
    assert len(cats) == 1000
    assert cats[0] == "tench" and cats[652] == inception_pretrained.SAMPLE_PHOTO_CLASS


def test_smoke_profile_uses_random_weights_and_says_so():
    loaded = inception_pretrained.load_pretrained(SMOKE)
    assert not loaded.pretrained
    assert loaded.note.startswith("random weights") and "fixtures" in loaded.note
    assert "mean nothing" in loaded.note and "=real" in loaded.note
    assert not loaded.model.training


def test_offline_weights_are_an_error_not_random_weights(monkeypatch):
    import torchvision.models._api as api

    def offline(*args, **kwargs):
        raise urllib.error.URLError("[Errno -3] Temporary failure in name resolution")

    monkeypatch.setattr(api, "load_state_dict_from_url", offline)
    for call in (
        lambda: inception_pretrained.load_pretrained(SMOKE, pretrained=True),
        lambda: inception_pretrained.load_pretrained(GPU),
    ):
        with pytest.raises(datasets.DataUnavailableError) as err:
            call()
        message = str(err.value)
        assert "name resolution" in message and inception_pretrained.weights_enum().url in message
        assert "Two ways out" in message and "--data-source fixtures" in message


def test_a_corrupt_weights_file_is_not_hidden(monkeypatch):
    import torchvision.models._api as api

    def corrupt(*args, **kwargs):
        raise RuntimeError("invalid hash value (expected '0cc3c7bd', got 'deadbeef')")

    monkeypatch.setattr(api, "load_state_dict_from_url", corrupt)
    with pytest.raises(RuntimeError, match="invalid hash"):
        inception_pretrained.load_pretrained(SMOKE, pretrained=True)


def test_preprocess_and_top5_on_the_photo():
    photo = inception_pretrained.open_image(inception_pretrained.sample_photo())
    x = inception_pretrained.preprocess(photo)
    assert x.shape == (3, 299, 299) and x.dtype == torch.float32
    # normalised: roughly zero-centred, not in [0, 1]
    assert float(x.min()) < 0 < float(x.max())
    loaded = inception_pretrained.load_pretrained(SMOKE)
    prediction = inception_pretrained.classify(loaded.model, photo, loaded.categories, device="cpu")
    assert prediction.device == "cpu"
    top = prediction.frame
    assert list(top["rank"]) == [1, 2, 3, 4, 5]
    probs = list(top["probability"])
    assert probs == sorted(probs, reverse=True) and 0 < sum(probs) <= 1 + 1e-6
    assert all(
        loaded.categories[i] == c for i, c in zip(top["index"], top["category"], strict=True)
    )
    with pytest.raises(ValueError, match="3 x H x W"):
        inception_pretrained.classify(loaded.model, torch.zeros(1, 299, 299), loaded.categories)


def test_not_an_image_gives_one_clear_error(tmp_path):
    bad = tmp_path / "photo.jpg"
    bad.write_text("this is not a JPEG")
    with pytest.raises(inception_pretrained.ImageError, match="not a readable image"):
        inception_pretrained.open_image(bad)
    with pytest.raises(inception_pretrained.ImageError, match="no such file"):
        inception_pretrained.open_image(tmp_path / "missing.jpg")


@pytest.mark.skipif(
    profiles.current().name != "gpu", reason="needs the gpu profile (pretrained weights)"
)
def test_gpu_profile_pretrained_top1_is_right():
    loaded = inception_pretrained.load_pretrained(GPU)
    assert loaded.pretrained, loaded.note
    top = inception_pretrained.classify(
        loaded.model,
        inception_pretrained.open_image(inception_pretrained.sample_photo()),
        loaded.categories,
    )
    assert top.top1 == inception_pretrained.SAMPLE_PHOTO_CLASS, top.frame.to_string()


# --------------------------------------------------------------------------- reorganisation


@pytest.fixture
def tiny(tmp_path) -> Path:
    """A private copy of the tiny-imagenet-200 fixture (not yet reorganised)."""
    src = datasets.prepare_fixture("tiny-imagenet-200").root / "tiny-imagenet-200"
    dest = tmp_path / "tiny-imagenet-200"
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns("*.JPEG"), dirs_exist_ok=True)
    # the fixture in the cache may already be reorganised: rebuild the original layout
    annotations = tiny_imagenet._read_annotations(src / "val" / "val_annotations.txt")
    for d in (dest / "val").iterdir():
        if d.is_dir():
            shutil.rmtree(d)
    (dest / "val" / ".reorganized").unlink(missing_ok=True)
    (dest / "val" / "images").mkdir()
    for name, wnid in annotations.items():
        flat = src / "val" / "images" / name
        nested = src / "val" / wnid / "images" / name
        shutil.copy2(flat if flat.exists() else nested, dest / "val" / "images" / name)
    for p in (src / "train").rglob("*.JPEG"):
        target = dest / p.relative_to(src)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(p, target)
    return dest


def _snapshot(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted((root / "val").rglob("*"))
        if p.is_file()
    }


def test_reorganisation_is_correct_and_idempotent(tiny):
    annotations = tiny_imagenet._read_annotations(tiny / "val" / "val_annotations.txt")
    originals = {n: (tiny / "val" / "images" / n).read_bytes() for n in annotations}
    moved = tiny_imagenet.reorganize_val(tiny)
    assert moved == len(annotations) > 0
    assert not (tiny / "val" / "images").exists()
    for name, wnid in annotations.items():
        assert (tiny / "val" / wnid / "images" / name).read_bytes() == originals[name]
    classes = sorted(d.name for d in (tiny / "val").iterdir() if d.is_dir())
    assert classes == sorted(d.name for d in (tiny / "train").iterdir() if d.is_dir())
    assert not any(p.name.startswith(".val-") for p in tiny.iterdir())  # no leftovers

    before = _snapshot(tiny)
    assert tiny_imagenet.reorganize_val(tiny) == 0  # second run: nothing to do
    assert _snapshot(tiny) == before


def test_interrupted_while_building_leaves_the_original_untouched(tiny, monkeypatch):
    before = _snapshot(tiny)
    calls = {"n": 0}
    real = tiny_imagenet._link_or_copy

    def dies_halfway(src, dst):
        calls["n"] += 1
        if calls["n"] == 7:
            raise KeyboardInterrupt  # Ctrl-C in the middle of the work
        real(src, dst)

    monkeypatch.setattr(tiny_imagenet, "_link_or_copy", dies_halfway)
    with pytest.raises(KeyboardInterrupt):
        tiny_imagenet.reorganize_val(tiny)
    assert _snapshot(tiny) == before
    assert not (tiny / ".val-reorganizing").exists()
    monkeypatch.setattr(tiny_imagenet, "_link_or_copy", real)
    assert tiny_imagenet.reorganize_val(tiny) > 0


def test_killed_between_the_two_renames_is_repaired(tiny, monkeypatch):
    annotations = tiny_imagenet._read_annotations(tiny / "val" / "val_annotations.txt")
    real_replace = os.replace
    calls = {"n": 0}

    def dies_after_first_rename(src, dst):
        calls["n"] += 1
        if calls["n"] == 2:
            raise SystemExit("killed")  # stands in for a killed process
        real_replace(src, dst)

    monkeypatch.setattr(tiny_imagenet.os, "replace", dies_after_first_rename)
    with pytest.raises(SystemExit):
        tiny_imagenet.reorganize_val(tiny)
    assert not (tiny / "val").exists()  # the moment a kill would leave behind
    monkeypatch.setattr(tiny_imagenet.os, "replace", real_replace)
    assert tiny_imagenet.reorganize_val(tiny) == 0  # repaired: the finished tree is put in place
    for name, wnid in annotations.items():
        assert (tiny / "val" / wnid / "images" / name).is_file()
    assert not any(p.name.startswith(".val-") for p in tiny.iterdir())


def test_unlisted_image_refuses_and_moves_nothing(tiny):
    (tiny / "val" / "images" / "stray.JPEG").write_bytes(b"x")
    before = _snapshot(tiny)
    with pytest.raises(ValueError, match="not in val_annotations.txt.*nothing was moved"):
        tiny_imagenet.reorganize_val(tiny)
    assert _snapshot(tiny) == before


def test_transforms_follow_the_guide():
    train_tf, val_tf = tiny_imagenet.transforms_for(299)
    from PIL import Image

    img = Image.new("RGB", (64, 64), (120, 30, 200))
    assert train_tf(img).shape == (3, 299, 299)
    assert val_tf(img).shape == (3, 299, 299)
    resize = [t for t in val_tf.transforms if type(t).__name__ == "Resize"][0]
    assert resize.size == [342]
    with pytest.raises(ValueError, match="at least 75"):
        tiny_imagenet.transforms_for(64)


# --------------------------------------------------------------------------- fine-tuning


def test_each_profile_trains_with_its_settings():
    """smoke and full: the recipe (batch 32, no warm-up); gpu: batch 256, lr scaled to
    the global batch, a warm-up of one epoch, bfloat16 and channels-last on a GPU."""
    full = profiles.current("full")
    tiny = 100_000  # tiny-imagenet-200's training images

    smoke = inception.settings(SMOKE, train_images=500, pretrained=False)
    assert (smoke.batch_size, smoke.lr, smoke.warmup_steps) == (32, inception.RANDOM_INIT_LR, 0)
    assert smoke.steps_per_epoch == 16 and not (smoke.fused or smoke.amp or smoke.channels_last)

    recipe = inception.settings(full, train_images=tiny, pretrained=True, device="cuda")
    assert (recipe.batch_size, recipe.lr, recipe.warmup_steps) == (32, 0.1, 0)
    assert recipe.steps_per_epoch == 3125 and not (recipe.amp or recipe.channels_last)
    assert recipe.fused == inception.fused_supported("cuda")

    gpu = inception.settings(GPU, train_images=tiny, pretrained=True, device="cuda")
    assert (gpu.batch_size, gpu.lr) == (inception.GPU_BATCH_SIZE, 0.1) == (256, 0.1)
    assert gpu.warmup_steps == gpu.steps_per_epoch == 391  # the first epoch
    assert gpu.amp and gpu.channels_last and gpu.fused == inception.fused_supported("cuda")
    assert gpu.facts()["global_batch"] == 256
    assert "batch 256, lr 0.1 after a linear warm-up over 391 steps from 0.001" in gpu.describe()

    # Linear scaling: 0.1 for every 256 images a step, over all processes.
    eight = inception.settings(GPU, train_images=tiny, pretrained=True, device="cuda", world_size=8)
    assert eight.lr == pytest.approx(0.8) and eight.warmup_steps == 49  # 12,500 images a rank
    small = inception.settings(GPU, train_images=tiny, pretrained=True, batch_size=32)
    assert small.lr == pytest.approx(0.0125) and small.warmup_steps == 3125
    # On the CPU the gpu profile leaves autocast and channels-last off; the caller decides.
    cpu = inception.settings(GPU, train_images=tiny, pretrained=True, device="cpu")
    assert not (cpu.amp or cpu.channels_last)
    off = inception.settings(
        GPU, train_images=tiny, pretrained=True, device="cuda", amp=False, channels_last=False
    )
    assert not (off.amp or off.channels_last)
    assert not inception.settings(GPU, train_images=tiny, pretrained=True, fsdp=True).fused
    # Random weights keep the small rate in every profile.
    assert inception.settings(GPU, train_images=tiny, pretrained=False).lr == 0.001


def test_the_gpu_schedule_warms_up_then_decays_every_30_epochs():
    gpu = inception.settings(GPU, train_images=2560, pretrained=True)  # 10 steps an epoch
    assert gpu.per_step and gpu.warmup_steps == gpu.steps_per_epoch == 10

    def rates(sched, opt, steps):
        out = []
        for _ in range(steps):
            out.append(opt.param_groups[0]["lr"])
            opt.step()
            sched.step()
        return out

    param = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([param], lr=gpu.lr)
    sched = gpu.scheduler(opt)
    lr = rates(sched, opt, 601)
    rising = [0.1 * (0.01 + 0.99 * k / 10) for k in range(11)]
    assert lr[:11] == pytest.approx(rising)  # from 0.001 up to 0.1 in 10 equal steps
    assert lr[10:300] == pytest.approx([0.1] * 290)
    assert lr[300:600] == pytest.approx([0.01] * 300) and lr[600] == pytest.approx(0.001)

    # Resumed as fit resumes (a new schedule, then the checkpoint's optimizer and
    # scheduler states), the schedule continues where it was.
    opt2 = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=gpu.lr)
    sched2 = gpu.scheduler(opt2)
    rates(sched2, opt2, 5)
    opt3 = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=gpu.lr)
    sched3 = gpu.scheduler(opt3)
    opt3.load_state_dict(opt2.state_dict())
    sched3.load_state_dict(sched2.state_dict())
    assert rates(sched3, opt3, 6) == pytest.approx(lr[5:11])

    # smoke and full: the recipe's StepLR, stepped once an epoch.
    recipe = inception.settings(SMOKE, train_images=500, pretrained=False)
    step = recipe.scheduler(torch.optim.SGD([param], lr=recipe.lr))
    assert not recipe.per_step and isinstance(step, torch.optim.lr_scheduler.StepLR)
    assert (step.step_size, step.gamma) == (30, 0.1)


def test_fused_sgd_only_where_this_pytorch_has_it():
    from torch.utils._foreach_utils import _get_fused_kernels_supported_devices

    assert inception.fused_supported("cuda")  # CUDA and ROCm: every PyTorch with fused SGD
    assert inception.fused_supported("cpu") == ("cpu" in _get_fused_kernels_supported_devices())
    assert not inception.fused_supported("meta")
    if inception.fused_supported("cpu"):  # the fused kernel runs and agrees with foreach
        params = [torch.nn.Parameter(torch.ones(3)) for _ in range(2)]
        for p, fused in zip(params, (True, False), strict=True):
            opt = torch.optim.SGD([p], lr=0.1, momentum=0.9, weight_decay=1e-4, fused=fused)
            for _ in range(3):
                p.grad = torch.full_like(p, 0.5)
                opt.step()
        assert torch.allclose(params[0], params[1])


def test_finetune_model_replaces_the_head():
    model, loaded = inception.finetune_model(10, SMOKE)
    assert model.fc.out_features == 10 and model.AuxLogits is None and not model.aux_logits
    assert not loaded.pretrained
    model.train()
    out = model(torch.randn(2, 3, 75, 75))
    assert isinstance(out, torch.Tensor) and out.shape == (2, 10)  # no aux output


def test_smoke_training_runs_and_learns(tmp_path):
    # no epochs asked for: the smoke profile's two (the page's run)
    run = inception.train(profile=SMOKE, checkpoint_dir=tmp_path, progress=False)
    hist = run.result.history
    assert run.epochs == casestudies.get("inception-v3").epoch_caps["smoke"] == 2
    assert [m.epoch for m in hist] == [1, 2]
    assert run.data.image_size == 75 and run.data.prepared.kind == "fixture"
    assert run.lr == inception.RANDOM_INIT_LR  # random weights: not the fine-tuning rate
    assert all(math.isfinite(m.train_loss) and math.isfinite(m.val_loss) for m in hist)
    # Random weights, 20 steps an epoch: the training loss falls from above
    # chance (ln 10 = 2.30) towards it. Seeds 0, 1, 2 (2026-11-26, AMD EPYC
    # with AVX512): 2.386 -> 2.303, 2.395 -> 2.302, 2.414 -> 2.288. Seed 0 on
    # one thread (2026-11-28, Xeon): 2.436 -> 2.276 with AVX-512, and
    # 2.373 -> 2.326 capped to AVX2 (make test-slow), the smallest fall seen.
    # The validation loss is not asserted: it moved 81 -> 49, 46 -> 69 and
    # 83 -> 24, since batch normalisation evaluates with running statistics
    # that lag behind weights changing this fast (the page says so).
    assert hist[-1].train_loss < hist[0].train_loss - 0.02
    assert run.weights == tmp_path / "trained_inception_v3.pt" and run.weights.is_file()
    assert (tmp_path / "last.pt").is_file()
    assert "tiny-imagenet-200 (10 classes, 75px)" in run.summary()
    assert "batch 32, lr 0.001, SGD;" in run.summary()  # the recipe's batch, no warm-up
    assert run.record_fields()["batch_size"] == 32 and not run.record_fields()["fused"]
    assert len(run.data.names) == 10 and all(run.data.names)


def test_cli_passes_amp_and_channels_last_to_the_loop(tmp_path):
    """The train command's --amp/--channels-last reach the shared loop (on the small
    CIFAR-10 network, so the test stays fast; Inception's own training is tested above)."""
    import subprocess
    import sys

    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "rocm_dl_guide",
            "train",
            "cifar10",
            "--profile",
            "smoke",
            "--epochs",
            "1",
            "--amp",
            "--channels-last",
            "--checkpoint-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "ROCM_DL_GUIDE_PROGRESS": "0"},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "amp on the CPU uses bfloat16 autocast" in proc.stdout  # the loop's own note
    assert "epoch 1/1:" in proc.stdout and "Traceback" not in proc.stderr
    assert (tmp_path / "cifar_net.pt").is_file()
    proc = subprocess.run(
        [sys.executable, "-m", "rocm_dl_guide", "train", "mnist-pytorch", "--amp"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 2 and "does not support --amp" in proc.stderr


def test_a_class_is_named_only_from_pretrained_weights():
    """One rule on every page (issue 56): random weights name no class."""
    from rocm_dl_guide.casestudies import inception_pretrained as ip

    assert ip.class_name(478, pretrained=True) == f"478 {ip.categories()[478]}"
    named = ip.class_name(478, pretrained=False)
    assert named == f"478 {ip.categories()[478]} (random weights: the name means nothing)"
    import pandas as pd

    frame = pd.DataFrame(
        {"rank": [1], "category": ["carton"], "index": [478], "probability": [1.0]}
    )
    html = ip.top5_table(frame, pretrained=False).to_html()
    assert "carton (random weights: the name means nothing)" in html  # in the row itself
    assert "from random weights" in html  # and the caption
    shown = ip.top5_table(frame, pretrained=True).to_html()
    assert "means nothing" not in shown and "100.00%" in shown and ">478<" not in shown
