"""Real ``rocminfo`` outputs bundled with the package (``samples/rocminfo/*.txt``).

They come from several machines (see ``samples/rocminfo/README.md`` for their
origins): the setup chapter's pages show them, the tests parse them, and the
doctor's snapshot examples are built on them. They are package data, read
with :func:`importlib.resources.files` from the package root.
"""

from __future__ import annotations

from importlib import resources

_SAMPLES = ("samples", "rocminfo")


def _sample_dir():  # -> importlib.resources.abc.Traversable
    root = resources.files("rocm_dl_guide")  # the package root, not this subpackage
    for part in _SAMPLES:
        root = root.joinpath(part)
    return root


def sample_names() -> list[str]:
    """Names of the bundled real ``rocminfo`` outputs, e.g. ``"mi-instinct"``."""
    try:
        entries = list(_sample_dir().iterdir())
    except (FileNotFoundError, NotADirectoryError):  # pragma: no cover - broken install
        return []
    return sorted(e.name[: -len(".txt")] for e in entries if e.name.endswith(".txt"))


def load_sample(name: str) -> str:
    """The text of a bundled sample (see ``samples/rocminfo/README.md`` for origins).

    ``name`` may include the ``.txt`` suffix. An unknown name raises
    ``ValueError`` listing the available ones.
    """
    if not isinstance(name, str):
        raise ValueError(f"sample name must be a string, not {type(name).__name__}")
    stem = name[: -len(".txt")] if name.endswith(".txt") else name
    available = sample_names()
    if stem not in available:
        raise ValueError(
            f"unknown rocminfo sample {name!r}; available: {', '.join(available) or '(none)'}"
        )
    return _sample_dir().joinpath(stem + ".txt").read_text(encoding="utf-8")
