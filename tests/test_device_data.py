"""The device-resident training loader and the input-speed measurements.

:class:`~rocm_dl_guide.core.device_data.DeviceLoader` on the CPU (the same code
runs on a GPU): every sample once per epoch, normalisation as torchvision's,
crops and flips per image that keep the pixels, an order fixed by (seed,
epoch), resumption inside an epoch and across a checkpoint of the shared
loop, and reading torchvision-style data sets. Then
:mod:`rocm_dl_guide.training.input_speed` on a tiny model, and CIFAR-10's
``load(on_device=True)`` training an epoch through the shared loop.
"""

from __future__ import annotations

import math
import time
from types import SimpleNamespace

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from rocm_dl_guide.casestudies import cifar10  # noqa: E402
from rocm_dl_guide.core import profiles  # noqa: E402
from rocm_dl_guide.core.device_data import DeviceLoader  # noqa: E402
from rocm_dl_guide.training import checkpoints, input_speed  # noqa: E402
from rocm_dl_guide.training import train as loop  # noqa: E402

CPU = torch.device("cpu")
SMOKE = profiles.current("smoke")


def images(n: int, c: int = 3, h: int = 6, w: int = 6, seed: int = 0) -> torch.Tensor:
    """Random uint8 images with no zero pixel, so zero padding is told apart."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(1, 256, (n, c, h, w), generator=g, dtype=torch.uint8)


def loader(n: int = 40, batch_size: int = 8, **kw) -> DeviceLoader:
    """A loader whose labels are the image indices, normalised to pixel / 255."""
    kw.setdefault("mean", 0.0)
    kw.setdefault("std", 1.0)
    return DeviceLoader(images(n), torch.arange(n), batch_size, CPU, **kw)


def pixels(x: torch.Tensor) -> torch.Tensor:
    """Back from mean 0, std 1 to uint8 pixels."""
    return (x * 255).round().to(torch.uint8)


def epoch(dl: DeviceLoader) -> tuple[torch.Tensor, torch.Tensor]:
    xs, ys = zip(*dl, strict=True)
    return torch.cat(xs), torch.cat(ys)


# --------------------------------------------------------------------------- batches


@pytest.mark.parametrize("drop_last", [False, True])
def test_every_sample_once_per_epoch(drop_last):
    dl = loader(n=43, batch_size=8, drop_last=drop_last)
    assert len(dl) == (5 if drop_last else 6) and dl.num_samples == 43 and dl.batch_size == 8
    sizes = [len(y) for _, y in dl]
    assert sizes == ([8] * 5 if drop_last else [8] * 5 + [3])
    _, y = epoch(dl)
    if drop_last:
        assert len(set(y.tolist())) == 40
    else:
        assert sorted(y.tolist()) == list(range(43))
        assert y.tolist() != list(range(43))  # shuffled


def test_dtypes_and_normalisation_match_torchvision():
    from torchvision.transforms import v2

    mean, std = (0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)
    raw = images(20)
    dl = DeviceLoader(raw, torch.arange(20) % 10, 8, CPU, mean, std, shuffle=False)
    x, y = epoch(dl)
    expected = v2.Normalize(mean, std)(v2.ToDtype(torch.float32, scale=True)(raw))
    assert x.dtype == torch.float32 and y.dtype == torch.int64
    assert x.shape == (20, 3, 6, 6) and x.device == CPU
    torch.testing.assert_close(x, expected, atol=1e-6, rtol=1e-6)
    assert y.tolist() == [i % 10 for i in range(20)]


def test_flip_is_per_image_and_keeps_the_pixels():
    dl = loader(n=64, flip=True)
    raw = dl.images
    flipped = []
    for x, y in dl:
        for out, i in zip(pixels(x), y.tolist(), strict=True):
            same, mirrored = torch.equal(out, raw[i]), torch.equal(out.flip(-1), raw[i])
            assert same != mirrored  # one or the other: flipped twice is the original
            flipped.append(mirrored)
    assert 10 < sum(flipped) < 54  # each image its own coin, not one for the batch
    assert len(set(flipped[:8])) == 2


def crops(image: torch.Tensor, p: int) -> dict[tuple[int, int], torch.Tensor]:
    """Every crop of ``image`` zero-padded by ``p``, by its (row, column) shift."""
    h, w = image.shape[-2:]
    padded = torch.nn.functional.pad(image, (p, p, p, p))
    return {
        (dy, dx): padded[:, p + dy : p + dy + h, p + dx : p + dx + w]
        for dy in range(-p, p + 1)
        for dx in range(-p, p + 1)
    }


def test_crop_is_per_image_and_keeps_the_pixels():
    p = 1
    dl = loader(n=160, batch_size=16, crop_padding=p, flip=True)
    raw = dl.images
    seen = []
    for x, y in dl:
        batch = []
        for out, i in zip(pixels(x), y.tolist(), strict=True):
            found = [
                (shift, mirror)
                for shift, crop in crops(raw[i], p).items()
                for mirror in (False, True)
                if torch.equal(out, crop.flip(-1) if mirror else crop)
            ]
            assert len(found) == 1, f"image {i} is no crop of itself: {found}"
            batch.append(found[0])
        assert len(set(batch)) > 1  # not one shift and flip for the whole batch
        seen += batch
    assert ((0, 0), False) in seen  # zero shift, no flip: the image itself
    assert len(set(seen)) == 18  # all nine shifts, with and without a flip


def test_unshifted_crop_is_the_image():
    dl = loader(n=30, crop_padding=0, flip=False, shuffle=False)
    assert torch.equal(pixels(epoch(dl)[0]), dl.images)


# --------------------------------------------------------------------------- order and resumption


def test_order_is_a_function_of_seed_and_epoch():
    a, b = loader(seed=3, crop_padding=1, flip=True), loader(seed=3, crop_padding=1, flip=True)
    a.set_epoch(5)
    b.set_epoch(5)
    xa, ya = epoch(a)
    xb, yb = epoch(b)
    assert torch.equal(ya, yb) and torch.equal(xa, xb)  # order and augmentation
    assert a.epoch == 6  # a pass moves on to the next epoch
    b.set_epoch(6)
    assert not torch.equal(epoch(b)[1], yb)
    other = loader(seed=4)
    other.set_epoch(5)
    assert not torch.equal(epoch(other)[1], ya)
    # Passes without set_epoch are epochs 0, 1, ...
    c, d = loader(seed=3), loader(seed=3)
    first, second = epoch(c)[1], epoch(c)[1]
    d.set_epoch(1)
    assert torch.equal(epoch(d)[1], second) and not torch.equal(first, second)


def test_state_dict_resumes_the_rest_of_the_epoch():
    """As the loop's train_one_epoch does: load_state_dict, iter, then the RNG states."""
    a = loader(n=50, crop_padding=1, flip=True, seed=7)
    epoch(a)  # epoch 0
    batches = iter(a)  # epoch 1
    for _ in range(3):
        next(batches)
    state, rng = a.state_dict(), checkpoints.rng_state(CPU, a)
    assert state["epoch"] == 1 and state["batches"] == 3
    rest = list(batches)
    after = epoch(a)

    b = loader(n=50, crop_padding=1, flip=True, seed=0)
    b.load_state_dict(state)  # the saved seed is adopted
    resumed = iter(b)
    checkpoints.set_rng_state(rng, b)
    again = list(resumed)
    assert len(again) == len(rest) == len(b) - 3
    for (x1, y1), (x2, y2) in zip(rest, again, strict=True):
        assert torch.equal(y1, y2) and torch.equal(x1, x2)
    assert b.state_dict()["epoch"] == 2 and b.state_dict()["batches"] == 0
    later = epoch(b)
    assert torch.equal(later[1], after[1]) and torch.equal(later[0], after[0])
    with pytest.raises(ValueError, match="batch_size"):
        loader(n=50, batch_size=5).load_state_dict(state)


def test_resumed_fit_shuffles_as_an_uninterrupted_one(tmp_path):
    """An epoch's checkpoint keeps the loader's generator, seeded for the next epoch."""
    g = torch.Generator().manual_seed(0)
    x = torch.randint(0, 256, (64, 1, 4, 4), generator=g, dtype=torch.uint8)
    y = (x.flatten(1).float().mean(1) > 128).long()

    def run(epochs: int, folder, resume: bool = False):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(16, 2))
        data = DeviceLoader(x, y, 8, CPU, 0.5, 0.25, crop_padding=1, flip=True, seed=1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        kw = {"checkpoint_dir": folder, "resume": resume} if folder else {}
        result = loop.fit(
            model, data, epochs=epochs, optimizer=opt, device=CPU, progress=False, log=None, **kw
        )
        return [m.train_loss for m in result.history]

    whole = run(3, None)
    run(1, tmp_path / "ckpt")
    resumed = run(3, tmp_path / "ckpt", resume=True)
    assert resumed == pytest.approx(whole, rel=1e-6)


# --------------------------------------------------------------------------- data sets


def test_from_dataset_reads_cifar10_and_mnist_arrays():
    rng = np.random.default_rng(0)
    hwc = rng.integers(0, 256, (10, 32, 32, 3), dtype=np.uint8)
    cifar_like = SimpleNamespace(data=hwc, targets=list(range(10)))
    dl = DeviceLoader.from_dataset(cifar_like, 4, CPU, (0.5,) * 3, (0.5,) * 3, shuffle=False)
    x, y = epoch(dl)
    assert x.shape == (10, 3, 32, 32) and y.tolist() == list(range(10))
    expected = torch.from_numpy(hwc).permute(0, 3, 1, 2).float() / 255 * 2 - 1
    torch.testing.assert_close(x, expected, atol=1e-6, rtol=1e-6)

    nhw = torch.randint(0, 256, (9, 28, 28), dtype=torch.uint8)
    mnist_like = SimpleNamespace(data=nhw, targets=torch.arange(9) % 3)
    dl = DeviceLoader.from_dataset(mnist_like, 4, CPU, (0.1307,), (0.3081,), seed=2)
    x, y = epoch(dl)
    assert x.shape == (9, 1, 28, 28) and sorted(y.tolist()) == sorted(
        (torch.arange(9) % 3).tolist()
    )


def test_from_dataset_says_what_it_cannot_read():
    with pytest.raises(ValueError, match=r"no \.data and \.targets"):
        DeviceLoader.from_dataset(SimpleNamespace(targets=[0]), 4, CPU, 0.5, 0.5)
    floats = SimpleNamespace(data=torch.zeros(4, 8, 8), targets=[0] * 4)
    with pytest.raises(ValueError, match="not uint8"):
        DeviceLoader.from_dataset(floats, 4, CPU, 0.5, 0.5)
    with pytest.raises(ValueError, match="3 images but 2 labels"):
        DeviceLoader(images(3), [0, 1], 2, CPU, 0.5, 0.5)
    with pytest.raises(ValueError, match="one per channel"):
        DeviceLoader(images(3), [0, 1, 2], 2, CPU, (0.5, 0.5), (0.5, 0.5))
    with pytest.raises(ValueError, match="uint8 tensor"):
        DeviceLoader(images(3).float(), [0, 1, 2], 2, CPU, 0.5, 0.5)


# --------------------------------------------------------------------------- input speed


def test_input_speed_measures_both_kinds_of_loader():
    from torch.utils.data import DataLoader, TensorDataset

    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 6 * 6, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    step = loop.step_function(model, opt, device=CPU)
    labels = torch.arange(256) % 10
    on_device = DeviceLoader(images(256), labels, 32, CPU, 0.5, 0.5, crop_padding=1, flip=True)
    x, y = next(iter(on_device))
    for _ in range(3):
        step(x, y)
    start = time.perf_counter()
    for _ in range(20):
        step(x, y)
    model_rate = 20 * 32 / (time.perf_counter() - start)

    dataset = TensorDataset(torch.rand(256, 3, 6, 6), torch.randint(0, 10, (256,)))
    workers = DataLoader(dataset, batch_size=32, num_workers=1, persistent_workers=True)
    for source in (on_device, workers):
        speed = input_speed.measure(source, step, CPU, model_rate, batches=10, warmup=2)
        rates = (speed.loader_samples_per_s, speed.end_to_end_samples_per_s)
        assert all(math.isfinite(r) and r > 0 for r in rates), speed
        assert 0 < speed.fraction <= 2, speed
        assert speed.limited_by_loader == (speed.fraction < input_speed.KEEPS_UP)
    with pytest.raises(ValueError, match="positive rate"):
        input_speed.measure(on_device, step, CPU, 0.0)
    with pytest.raises(ValueError, match="no batches"):
        input_speed.loader_throughput([], CPU, batches=1)


# --------------------------------------------------------------------------- CIFAR-10


def test_cifar10_trains_an_epoch_from_the_device_loader():
    data = cifar10.load(SMOKE, on_device=True, device=CPU)
    assert isinstance(data.train_loader, DeviceLoader)
    assert data.train_loader.num_samples == len(data.train_set)
    assert not isinstance(data.test_loader, DeviceLoader)
    # transform() has no augmentation, so the unshuffled batches are its images.
    plain = DeviceLoader.from_dataset(data.train_set, 4, CPU, cifar10.MEAN, cifar10.STD)
    plain.shuffle = False
    x, y = next(iter(plain))
    torch.testing.assert_close(x, torch.stack([data.train_set[i][0] for i in range(4)]))
    assert y.tolist() == [data.train_set[i][1] for i in range(4)]

    torch.manual_seed(0)
    model = cifar10.Net()
    opt = torch.optim.SGD(model.parameters(), lr=cifar10.LEARNING_RATE, momentum=cifar10.MOMENTUM)
    result = loop.fit(
        model, data.train_loader, epochs=1, optimizer=opt, device=CPU, progress=False, log=None
    )
    assert math.isfinite(result.final.train_loss)
    # On the CPU the default stays torchvision's DataLoader.
    assert not isinstance(cifar10.load(SMOKE, device=CPU).train_loader, DeviceLoader)


def test_mnist_device_loader_gives_torchvisions_tensors():
    """MNIST's loader on the device normalises as its torchvision transform does;
    on a CPU the default stays the DataLoader."""
    from rocm_dl_guide.casestudies import mnist

    on_device, _, _ = mnist.torch_loaders(SMOKE, CPU, on_device=True)
    plain, _, _ = mnist.torch_loaders(SMOKE, CPU)
    assert isinstance(on_device, DeviceLoader) and not isinstance(plain, DeviceLoader)
    everything = DeviceLoader.from_dataset(plain.dataset, len(plain.dataset), CPU,
                                           (0.1307,), (0.3081,), shuffle=False)  # fmt: skip
    x, y = next(iter(everything))
    for i in (0, len(plain.dataset) - 1):
        image, label = plain.dataset[i]
        assert torch.allclose(x[i], image, atol=1e-6) and int(y[i]) == label
