"""Run profiles: how much work an example does.

One switch, the environment variable ``ROCM_DL_GUIDE_PROFILE``, picks the
profile; without it, the default is ``gpu`` when a GPU is visible to PyTorch and
``smoke`` otherwise. Every executed page prints which profile produced it.

- ``smoke``: offline fixtures or small subsets, a few short epochs (enough for
  a curve), small inputs.
  Each page runs in well under a minute on two CPU cores. The book's default.
- ``gpu``: real data sets and pretrained weights, bounded epochs; minutes per
  page on one Instinct-class GPU.
- ``full``: the guide's own hyperparameters (e.g. 90 epochs). Never used by the
  book build; run it from the command line.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

ENV_VAR = "ROCM_DL_GUIDE_PROFILE"


@dataclass(frozen=True)
class Profile:
    """A named amount of work. Case studies read their sizes from here."""

    name: str
    description: str
    use_fixtures: bool
    """Use the generated offline fixtures instead of downloading real data."""
    pretrained: bool
    """Try to load pretrained weights (falls back to random weights offline)."""
    max_epochs: int | None
    """Upper bound on epochs; ``None`` means the guide's own number."""
    max_train_batches: int | None
    """Upper bound on training batches per epoch; ``None`` means all."""
    image_size: int | None
    """Input size for models that accept several (Inception v3: 75 and up)."""
    in_book: bool
    """Whether the book build may run with this profile."""
    short_benchmarks: bool
    """Benchmarks use few timed runs at large batches (two CPU cores, a page under a
    minute) instead of a GPU's 10 warm-up and 100 timed runs at every batch size."""

    def epochs(self, full: int, override: int | None = None) -> int:
        """How many epochs to train: ``override`` if given, else the example's
        ``full`` number capped by :attr:`max_epochs`."""
        if override is not None:
            if override < 1:
                raise ValueError(f"epochs must be at least 1, got {override}")
            return override
        return min(full, self.max_epochs) if self.max_epochs else full


PROFILES: dict[str, Profile] = {
    "smoke": Profile(
        name="smoke",
        description="offline fixtures, a few short epochs, small inputs (CPU default)",
        use_fixtures=True,
        pretrained=False,
        max_epochs=3,
        max_train_batches=20,
        image_size=75,
        in_book=True,
        short_benchmarks=True,
    ),
    "gpu": Profile(
        name="gpu",
        description="real data sets and pretrained weights, bounded epochs (GPU default)",
        use_fixtures=False,
        pretrained=True,
        max_epochs=5,
        max_train_batches=None,
        image_size=None,
        in_book=True,
        short_benchmarks=False,
    ),
    "full": Profile(
        name="full",
        description="the guide's own hyperparameters (command line only)",
        use_fixtures=False,
        pretrained=True,
        max_epochs=None,
        max_train_batches=None,
        image_size=None,
        in_book=False,
        short_benchmarks=False,
    ),
}


ProfileLike = Profile | str | None
"""What functions taking a ``profile`` accept: a :class:`Profile`, a name, or
``None`` for the profile in force (see :func:`current`)."""


class ProfileError(ValueError):
    """An unknown profile name."""


def get(name: str) -> Profile:
    """Return the profile called ``name`` (case-insensitive)."""
    key = (name or "").strip().lower()
    try:
        return PROFILES[key]
    except KeyError:
        known = ", ".join(PROFILES)
        raise ProfileError(f"unknown profile {name!r}: choose one of {known}") from None


def default_name() -> str:
    """``gpu`` when PyTorch sees a GPU, else ``smoke``."""
    from rocm_dl_guide.device import gpu_available

    return "gpu" if gpu_available() else "smoke"


def current(override: Profile | str | None = None) -> Profile:
    """The profile in force: ``override``, else ``$ROCM_DL_GUIDE_PROFILE``, else the default.

    Entry points (the CLI, a case study's ``train``) resolve the profile once with
    this and pass the :class:`Profile` down; given a :class:`Profile`, this
    returns it unchanged.
    """
    if isinstance(override, Profile):
        return override
    name = override or os.environ.get(ENV_VAR) or default_name()
    return get(name)
