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

The **data source** is a second, independent switch: ``real`` (the real data
sets and pretrained weights, downloaded once) or ``fixtures`` (generated
offline fixtures in the upstream formats, and random weights). Each profile
has a default (``smoke``: fixtures; ``gpu`` and ``full``: real);
``ROCM_DL_GUIDE_DATA_SOURCE`` (or the command line's ``--data-source``)
overrides it, so that, say, a GPU machine without network can run the ``gpu``
profile's sizes on fixtures. With ``real``, nothing falls back to fixtures or
random weights: what cannot be downloaded is an error.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace

ENV_VAR = "ROCM_DL_GUIDE_PROFILE"
DATA_SOURCE_VAR = "ROCM_DL_GUIDE_DATA_SOURCE"
DATA_SOURCES = ("real", "fixtures")


@dataclass(frozen=True)
class Profile:
    """A named amount of work. Case studies read their sizes from here."""

    name: str
    description: str
    data_source: str
    """``real`` (real data, pretrained weights) or ``fixtures`` (generated data,
    random weights): the profile's default, or what was asked for."""
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

    data_source_explicit: bool = False
    """True when the data source was asked for (environment or command line)
    rather than taken from the profile's default."""

    @property
    def use_fixtures(self) -> bool:
        """Use the generated offline fixtures instead of downloading real data."""
        return self.data_source == "fixtures"

    @property
    def pretrained(self) -> bool:
        """Load pretrained weights (never falls back to random ones)."""
        return self.data_source == "real"

    def source_note(self) -> str:
        """One line: which data source, and whether it was asked for or the default."""
        if self.data_source_explicit:
            how = f"asked for with {DATA_SOURCE_VAR} or --data-source"
        else:
            how = f"the {self.name} profile's default"
        what = (
            "real data sets and pretrained weights"
            if self.pretrained
            else "generated fixtures and random weights"
        )
        return f"data source {self.data_source} ({what}; {how})"

    def epochs(self, full: int, override: int | None = None, example: str | None = None) -> int:
        """How many epochs to train: ``override`` if given, else the example's
        ``full`` number capped by the case study's own cap for this profile
        (:attr:`rocm_dl_guide.core.casestudies.CaseStudy.epoch_caps`, ``example`` being
        its registry name), or else by :attr:`max_epochs`."""
        if override is not None:
            if override < 1:
                raise ValueError(f"epochs must be at least 1, got {override}")
            return override
        cap = self.max_epochs
        if example is not None:
            from rocm_dl_guide.core import casestudies

            cap = casestudies.get(example).epoch_caps.get(self.name) or cap
        return min(full, cap) if cap else full


PROFILES: dict[str, Profile] = {
    "smoke": Profile(
        name="smoke",
        description="offline fixtures, a few short epochs, small inputs (CPU default)",
        data_source="fixtures",
        max_epochs=3,
        max_train_batches=20,
        image_size=75,
        in_book=True,
        short_benchmarks=True,
    ),
    "gpu": Profile(
        name="gpu",
        description="real data sets and pretrained weights, bounded epochs (GPU default)",
        data_source="real",
        max_epochs=5,
        max_train_batches=None,
        image_size=None,
        in_book=True,
        short_benchmarks=False,
    ),
    "full": Profile(
        name="full",
        description="the guide's own hyperparameters (command line only)",
        data_source="real",
        max_epochs=None,
        max_train_batches=None,
        image_size=None,
        in_book=False,
        short_benchmarks=False,
    ),
}


class ProfileError(ValueError):
    """An unknown profile name or data source."""


def get(name: str) -> Profile:
    """Return the profile called ``name`` (case-insensitive)."""
    key = (name or "").strip().lower()
    try:
        return PROFILES[key]
    except KeyError:
        known = ", ".join(PROFILES)
        raise ProfileError(f"unknown profile {name!r}: choose one of {known}") from None


def default_name(gpu: bool | None = None) -> str:
    """``gpu`` when PyTorch sees a GPU, else ``smoke``. ``gpu`` is the answer
    where the caller has it already (the doctor asks PyTorch in a child process,
    so that a PyTorch that crashes at import cannot take it down); ``None`` asks
    PyTorch in this process."""
    if gpu is None:
        from rocm_dl_guide.core.device import gpu_available

        gpu = gpu_available()
    return "gpu" if gpu else "smoke"


def current(override: Profile | str | None = None) -> Profile:
    """The profile in force: ``override``, else ``$ROCM_DL_GUIDE_PROFILE``, else the default.

    Entry points (a command, through :func:`rocm_dl_guide.cli.common.run_profile`;
    a book page, in its first cell; a test) resolve the profile once with this and
    pass the :class:`Profile` down: the functions below them take a
    :class:`Profile`, never a name. Given a :class:`Profile`, this returns it
    unchanged.
    """
    if isinstance(override, Profile):
        return override
    name = override or os.environ.get(ENV_VAR) or default_name()
    return with_data_source(get(name), os.environ.get(DATA_SOURCE_VAR) or None)


def with_data_source(profile: Profile, source: str | None) -> Profile:
    """``profile`` with the data source ``source`` (``real`` or ``fixtures``)
    asked for explicitly; ``None`` keeps the profile's default."""
    if source is None:
        return profile
    key = source.strip().lower()
    if key not in DATA_SOURCES:
        raise ProfileError(
            f"unknown data source {source!r}: choose one of {', '.join(DATA_SOURCES)}"
        )
    return replace(profile, data_source=key, data_source_explicit=True)
