"""A training loader that keeps a small image data set on the device.

For MNIST, Fashion-MNIST and CIFAR-10 the whole training set fits in GPU
memory many times over (CIFAR-10 is 150 MB as ``uint8``), and a small network
trains faster than a ``DataLoader`` can decode, transform, collate and copy
images one by one. :class:`DeviceLoader` holds the images (``uint8``,
N x C x H x W) and labels (``int64``) on the device once, and every batch is a
few batched operations there: gather the batch's images, augment them (random
crop with zero padding, horizontal flip, each drawn per image) and normalise
them to ``float32``. Nothing goes through the host per batch.

Order and resumption
    The shuffling generator is a ``torch.Generator`` on the device (CPU or
    CUDA; on other devices a CPU one), reseeded at the start of every pass with
    a seed that encodes ``(seed, epoch)``, so the order and augmentation of an
    epoch depend on those two only. The generator is named ``generator``, as a
    ``DataLoader``'s is, so the shared loop's checkpoints save its state: after
    a pass it is seeded for the next epoch, and a run resumed from an epoch's
    checkpoint continues with the next epoch's order even without
    :meth:`DeviceLoader.set_epoch`. :meth:`DeviceLoader.state_dict` records the
    position inside an epoch, and :meth:`DeviceLoader.load_state_dict` makes the
    next pass draw exactly the batches that were not drawn yet.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import torch
from torch.nn import functional as F

_MASK = 2**64 - 1


def _mix(seed: int) -> int:
    """splitmix64 of ``seed``: the base of a loader's per-epoch seeds.

    Seeds ``seed`` and ``seed + 1`` would otherwise give the same orders one
    epoch apart, since epoch ``e`` is seeded with ``base + e``.
    """
    z = (seed + 0x9E3779B97F4A7C15) & _MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return z ^ (z >> 31)


def _generator(device: torch.device) -> torch.Generator:
    """A generator on ``device`` where PyTorch has one (CPU, CUDA), else on the CPU."""
    if device.type in ("cpu", "cuda"):
        return torch.Generator(device=device)
    try:
        return torch.Generator(device=device)
    except RuntimeError:
        return torch.Generator()


def _per_channel(values: Sequence[float] | float, channels: int, name: str) -> torch.Tensor:
    """``values`` as one float per channel (a single value serves every channel)."""
    t = torch.as_tensor(values, dtype=torch.float64).flatten()
    if t.numel() == 1:
        t = t.expand(channels)
    if t.numel() != channels:
        raise ValueError(
            f"DeviceLoader: {name} needs {channels} value(s), one per channel; got {t.tolist()}"
        )
    return t


class DeviceLoader:
    """Shuffled, augmented and normalised batches ``(x, y)`` of a data set kept on ``device``.

    ``images`` is a ``uint8`` tensor N x C x H x W, ``labels`` N class indices;
    both are copied to ``device`` once. Each pass yields ``x`` as ``float32``
    N x C x H x W normalised with ``mean`` and ``std`` (per channel or one
    value for all, on the [0, 1] scale, as ``torchvision.transforms.Normalize`` after ``ToTensor``)
    and ``y`` as ``int64``, both on ``device``. ``crop_padding=p`` pads each
    image with ``p`` zero pixels and crops it back at a random offset (per
    image, like ``RandomCrop(size, padding=p)``); ``flip=True`` mirrors each
    image with probability one half. ``len()`` is the number of batches per pass.
    """

    def __init__(
        self,
        images: torch.Tensor,
        labels: torch.Tensor | Sequence[int],
        batch_size: int,
        device: str | torch.device,
        mean: Sequence[float] | float,
        std: Sequence[float] | float,
        crop_padding: int = 0,
        flip: bool = False,
        shuffle: bool = True,
        drop_last: bool = False,
        seed: int = 0,
    ) -> None:
        if not isinstance(images, torch.Tensor) or images.dtype != torch.uint8 or images.dim() != 4:
            raise ValueError(
                "DeviceLoader: images must be a uint8 tensor N x C x H x W, got "
                + (
                    f"{images.dtype} of shape {tuple(images.shape)}"
                    if isinstance(images, torch.Tensor)
                    else type(images).__name__
                )
            )
        labels = torch.as_tensor(labels, dtype=torch.int64).flatten()
        if labels.numel() != images.shape[0]:
            raise ValueError(f"DeviceLoader: {images.shape[0]} images but {labels.numel()} labels")
        if images.shape[0] == 0:
            raise ValueError("DeviceLoader: the data set is empty")
        if batch_size < 1 or crop_padding < 0:
            raise ValueError(
                f"DeviceLoader: batch_size must be at least 1 and crop_padding at least 0, "
                f"got {batch_size} and {crop_padding}"
            )
        self.device = torch.device(device)
        channels = images.shape[1]
        mean_t, std_t = _per_channel(mean, channels, "mean"), _per_channel(std, channels, "std")
        if bool((std_t <= 0).any()):
            raise ValueError(f"DeviceLoader: std must be positive, got {std_t.tolist()}")
        self.images = images.to(self.device).contiguous()
        self.labels = labels.to(self.device)
        self.num_samples = int(images.shape[0])
        self.batch_size = int(batch_size)
        self.crop_padding, self.flip = int(crop_padding), bool(flip)
        self.shuffle, self.drop_last = bool(shuffle), bool(drop_last)
        self.seed = int(seed)
        # x_float = (x / 255 - mean) / std = x * scale + shift, per channel.
        shape = (1, channels, 1, 1)
        self._scale = (1 / (255 * std_t)).to(torch.float32).view(shape).to(self.device)
        self._shift = (-mean_t / std_t).to(torch.float32).view(shape).to(self.device)
        self._rows = torch.arange(images.shape[2], device=self.device)
        self._cols = torch.arange(images.shape[3], device=self.device)
        self.generator = _generator(self.device)
        self._base = _mix(self.seed & _MASK)
        self._skip = 0  # batches the next pass leaves out (after load_state_dict)
        self._position: list[int] | None = None  # [epoch, batches drawn] of the latest pass
        self._seed_epoch(0)
        if len(self) == 0:
            raise ValueError(
                f"DeviceLoader: {self.num_samples} samples make no full batch of "
                f"{self.batch_size} (drop_last=True)"
            )

    @classmethod
    def from_dataset(
        cls,
        dataset: Any,
        batch_size: int,
        device: str | torch.device,
        mean: Sequence[float] | float,
        std: Sequence[float] | float,
        **options: Any,
    ) -> DeviceLoader:
        """A loader over a torchvision-style data set's raw arrays, not its per-image transform.

        Reads ``dataset.data`` (``uint8``: N x H x W as MNIST and Fashion-MNIST
        hold it, N x H x W x C as CIFAR-10's numpy array, or N x C x H x W) and
        ``dataset.targets``. ``options`` are the constructor's other keywords
        (``crop_padding``, ``flip``, ``shuffle``, ``drop_last``, ``seed``).
        Raises ``ValueError`` for a data set without such arrays (an
        ``ImageFolder``, a ``Subset``): build the tensors and call the
        constructor instead.
        """
        data, targets = getattr(dataset, "data", None), getattr(dataset, "targets", None)
        if data is None or targets is None:
            raise ValueError(
                f"DeviceLoader.from_dataset: {type(dataset).__name__} has no .data and .targets "
                "arrays (as torchvision's MNIST, FashionMNIST and CIFAR10 have); pass "
                "uint8 images N x C x H x W and labels to DeviceLoader(...) instead"
            )
        images = torch.from_numpy(data) if not isinstance(data, torch.Tensor) else data
        if images.dtype != torch.uint8:
            raise ValueError(
                f"DeviceLoader.from_dataset: {type(dataset).__name__}.data holds "
                f"{images.dtype}, not uint8 pixels"
            )
        if images.dim() == 3:  # N x H x W: one channel
            images = images.unsqueeze(1)
        elif images.dim() == 4 and images.shape[-1] in (1, 3) and images.shape[1] not in (1, 3):
            images = images.permute(0, 3, 1, 2)  # N x H x W x C to N x C x H x W
        elif images.dim() != 4 or images.shape[1] not in (1, 3):
            raise ValueError(
                f"DeviceLoader.from_dataset: cannot tell the channels of "
                f"{type(dataset).__name__}.data of shape {tuple(images.shape)}"
            )
        labels = torch.as_tensor(targets, dtype=torch.int64)
        return cls(images.contiguous(), labels, batch_size, device, mean, std, **options)

    def __len__(self) -> int:
        """Batches per pass."""
        whole, rest = divmod(self.num_samples, self.batch_size)
        return whole + (1 if rest and not self.drop_last else 0)

    # ------------------------------------------------------------------ epochs and state

    @property
    def epoch(self) -> int:
        """The epoch the next pass draws (read from the generator's seed)."""
        return (self.generator.initial_seed() - self._base) & _MASK

    def _seed_epoch(self, epoch: int) -> None:
        self.generator.manual_seed((self._base + epoch) & _MASK)

    def set_epoch(self, epoch: int) -> None:
        """Make the next pass draw epoch ``epoch``'s order and augmentation."""
        if epoch != self.epoch:
            self._skip = 0
        self._position = None
        self._seed_epoch(epoch)

    def state_dict(self) -> dict[str, int]:
        """Where the loader stands: the epoch and the batches of it already drawn."""
        if self._position is not None:
            epoch, done = self._position
            if done >= len(self):
                epoch, done = epoch + 1, 0
        else:
            epoch, done = self.epoch, self._skip
        return {
            "seed": self.seed,
            "epoch": epoch,
            "batches": done,
            "num_samples": self.num_samples,
            "batch_size": self.batch_size,
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue from :meth:`state_dict`'s position: the next pass draws the
        batches of its epoch not drawn yet, in the same order.

        The saved seed replaces this loader's. Raises ``ValueError`` if the
        state belongs to a data set of another size or another batch size.
        """
        for key in ("num_samples", "batch_size"):
            if int(state[key]) != getattr(self, key):
                raise ValueError(
                    f"DeviceLoader.load_state_dict: the state is for {key}={state[key]}, "
                    f"this loader has {getattr(self, key)}"
                )
        batches = int(state["batches"])
        if not 0 <= batches <= len(self):
            raise ValueError(f"DeviceLoader.load_state_dict: no batch {batches} in an epoch")
        self.seed = int(state["seed"])
        self._base = _mix(self.seed & _MASK)
        self._position = None
        self._seed_epoch(int(state["epoch"]))
        self._skip = batches

    # ------------------------------------------------------------------ batches

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        """One pass: the epoch's order and augmentation are drawn now, on the device."""
        epoch, n, g = self.epoch, self.num_samples, self.generator
        draw = g.device
        if self.shuffle:
            order = torch.randperm(n, generator=g, device=draw)
        else:
            order = torch.arange(n, device=draw)
        shifts = flips = None
        p = self.crop_padding
        if p:
            shifts = torch.randint(-p, p + 1, (n, 2), generator=g, device=draw).to(self.device)
        if self.flip:
            flips = (torch.rand(n, generator=g, device=draw) < 0.5).to(self.device)
        order = order.to(self.device)
        first, self._skip = self._skip, 0
        self._seed_epoch(epoch + 1)  # what a checkpoint taken during this pass saves
        self._position = position = [epoch, first]
        return self._batches(order, shifts, flips, first, position)

    def _batches(self, order, shifts, flips, first: int, position: list[int]):
        b = self.batch_size
        for k in range(first, len(self)):
            rows = slice(k * b, min((k + 1) * b, self.num_samples))
            idx = order[rows]
            x = self.images.index_select(0, idx)
            if shifts is not None or flips is not None:
                x = self._augment(
                    x,
                    shifts[rows] if shifts is not None else None,
                    flips[rows] if flips is not None else None,
                )
            x = x.to(torch.float32).mul_(self._scale).add_(self._shift)
            position[1] = k + 1
            yield x, self.labels.index_select(0, idx)

    def _augment(
        self, x: torch.Tensor, shifts: torch.Tensor | None, flips: torch.Tensor | None
    ) -> torch.Tensor:
        """Each image cropped at its own offset from its zero-padded self, then
        mirrored if its flip says so: two gathers of pixel indices, no loop."""
        n, c, h, w = x.shape
        cols = self._cols.expand(n, w)
        if flips is not None:
            cols = torch.where(flips[:, None], self._cols.flip(0), cols)
        if shifts is not None:
            p = self.crop_padding
            x = F.pad(x, (p, p, p, p))
            rows = self._rows + (p + shifts[:, :1])  # n x h
            cols = cols + (p + shifts[:, 1:])  # n x w
            x = x.gather(2, rows[:, None, :, None].expand(n, c, h, w + 2 * p))
        return x.gather(3, cols[:, None, None, :].expand(n, c, h, w))

    def __repr__(self) -> str:
        c, h, w = self.images.shape[1:]
        return (
            f"DeviceLoader({self.num_samples} images {c}x{h}x{w} on {self.device}, "
            f"batch_size={self.batch_size}, crop_padding={self.crop_padding}, flip={self.flip}, "
            f"shuffle={self.shuffle}, {len(self)} batches, epoch {self.epoch})"
        )
