"""The provenance note every executed page shows: profile, device, versions.

Versions come from the installed distributions' metadata, so producing the note
does not import a framework that the page itself does not use.

:func:`note` shows the note as prose for the reader and also records the same
facts as data: a value glued with MyST-NB's ``glue`` under the key
:data:`GLUE_KEY`, as a JSON object of the MIME type :data:`RECORD_MIME` (see
:meth:`Provenance.record`). The book's Sphinx extension (``_ext/guide_build/``)
reads it from the executed notebook's glue data to build the home page's
provenance table. The prose can change freely; the table does not parse it.
"""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib import metadata

from rocm_dl_guide import __version__
from rocm_dl_guide.core import profiles

GLUE_KEY = "guide-provenance"
"""The glue key under which :func:`note` records the provenance as data."""
RECORD_MIME = "application/vnd.rocm-dl-guide.provenance+json"
"""The record's MIME type. A ``+json`` type: notebook files store its value as a
JSON object (nbformat's schema allows objects only for JSON MIME types, also
under glue's ``application/papermill.record/`` prefix)."""
RECORD_KIND = "rocm_dl_guide.core.provenance"
RECORD_VERSION = 1
BUILD_THREADS_VAR = "ROCM_DL_GUIDE_BUILD_THREADS"
"""Set by the book build (``_ext/guide_build/``) for a page it executed next
to another: the CPU threads that page had, and the machine's (``"1/2"``)."""

# Distribution names under which each framework may be installed.
_DISTRIBUTIONS: dict[str, tuple[str, ...]] = {
    "PyTorch": ("torch",),
    "torchvision": ("torchvision",),
    "TensorFlow": ("tensorflow", "tensorflow-cpu", "tensorflow-rocm", "tensorflow-gpu"),
    "Keras": ("keras",),
    "ONNX Runtime": (
        "onnxruntime",
        "onnxruntime-migraphx",
        "onnxruntime-rocm",
        "onnxruntime-gpu",
    ),
    "MIGraphX": ("migraphx",),
    "ONNX": ("onnx",),
}


def installed_version(framework: str) -> str | None:
    """The installed version of ``framework`` (a key of the table above), or ``None``.

    MIGraphX ships with ROCm rather than as a pip distribution: when no
    distribution is found, an already imported ``migraphx`` module's version counts.
    """
    for dist in _DISTRIBUTIONS.get(framework, (framework,)):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    if framework == "MIGraphX" and "migraphx" in sys.modules:
        return str(getattr(sys.modules["migraphx"], "__version__", "installed"))
    return None


def library_versions(names: Iterable[str] | None = None) -> dict[str, str]:
    """The one collector of library versions: Python, ``rocm_dl_guide`` and each of
    ``names`` that is installed (default: every library of the table above), keyed
    by their display names (``PyTorch``, ``ONNX Runtime`` ...). Imports nothing."""
    versions = {"Python": platform.python_version(), "rocm_dl_guide": __version__}
    for name in _DISTRIBUTIONS if names is None else names:
        if name not in _DISTRIBUTIONS:
            raise ValueError(f"unknown library {name!r}: one of {', '.join(_DISTRIBUTIONS)}")
        ver = installed_version(name)
        if ver:
            versions[name] = ver
    return versions


FRAMEWORK_LIBRARIES: dict[str, tuple[str, ...]] = {
    "pytorch": ("PyTorch", "torchvision", "ONNX Runtime", "ONNX"),
    "tensorflow": ("TensorFlow", "Keras"),
}
"""The libraries a page's note names besides Python and ``rocm_dl_guide``, by the
page's framework (none for ``"none"``): those its outputs come from, not every
library installed."""


def _tensorflow_device() -> str:
    from rocm_dl_guide.core.device import import_tensorflow

    tf = import_tensorflow()

    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        return f"GPU via TensorFlow ({len(gpus)} visible: {', '.join(g.name for g in gpus)})"
    from rocm_dl_guide.core.device import cpu_name

    return f"CPU ({cpu_name()})"


@dataclass
class Provenance:
    profile: str
    device: str
    versions: dict[str, str] = field(default_factory=dict)
    executed_at: str = ""
    data_source: str = ""
    """``real`` or ``fixtures`` (see :mod:`rocm_dl_guide.core.profiles`)."""
    build_threads: str = ""
    """``"1/2"`` when the book build ran this page next to another with 1 of the
    machine's 2 CPU threads (``ROCM_DL_GUIDE_BUILD_THREADS``); empty otherwise."""

    def markdown(self) -> str:
        parts = [f"{name} {ver}" for name, ver in self.versions.items()]
        data = {"real": " on real data", "fixtures": " on generated fixtures"}.get(
            self.data_source, ""
        )
        shared = ""
        if self.build_threads:
            mine, _, total = self.build_threads.partition("/")
            shared = (
                f" (the book build ran it next to another page, with {mine} of the "
                f"{total} CPU threads)"
            )
        return (
            f"**Provenance.** Outputs on this page were produced with the "
            f"`{self.profile}` profile{data} on {self.device}{shared}; "
            + ", ".join(parts)
            + f"; executed {self.executed_at}."
        )

    def record(self) -> dict:
        """The note as data (what the provenance table is built from)."""
        return {
            "kind": RECORD_KIND,
            "version": RECORD_VERSION,
            "profile": self.profile,
            "data_source": self.data_source,
            "device": self.device,
            "executed_at": self.executed_at,
            "versions": dict(self.versions),
            "build_threads": self.build_threads,
        }

    def _repr_markdown_(self) -> str:
        return self.markdown()

    def __str__(self) -> str:
        return self.markdown().replace("**", "").replace("`", "")


def collect(
    profile: profiles.Profile, framework: str = "pytorch", data: str | None = None
) -> Provenance:
    """Gather the note of a page run with ``profile``. ``framework`` says whose view of
    the device to report (``"pytorch"``, ``"tensorflow"``, or ``"none"`` for pages
    that use neither). ``data``: the data set the page trains on, where the data
    layer may use the real one in place of the profile's fixture (an operating
    system's copy, :func:`rocm_dl_guide.core.datasets.system_copy`): the note
    then says real data."""
    from rocm_dl_guide.core.device import cpu_name, describe

    if framework == "tensorflow":
        device = _tensorflow_device()
    elif framework == "pytorch":
        device = str(describe())
    else:
        device = f"CPU ({cpu_name()})"
    versions = library_versions(FRAMEWORK_LIBRARIES.get(framework, ()))
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return Provenance(
        profile=profile.name,
        device=device,
        versions=versions,
        executed_at=when,
        data_source=_data_source(profile, data),
        build_threads=os.environ.get(BUILD_THREADS_VAR, ""),
    )


def _data_source(profile: profiles.Profile, data: str | None) -> str:
    if data and profile.use_fixtures and not profile.data_source_explicit:
        from rocm_dl_guide.core import datasets

        if datasets.system_copy(data):
            return "real"
    return profile.data_source


class _Record:
    """The value :func:`note` glues: the record as :data:`RECORD_MIME` (and plain text)."""

    def __init__(self, record: dict) -> None:
        self._record = record

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        return {RECORD_MIME: self._record, "text/plain": repr(self)}

    def __repr__(self) -> str:
        return f"provenance record {self._record!r}"


def record(prov: Provenance) -> None:
    """Glue ``prov`` as data (:data:`RECORD_MIME` under :data:`GLUE_KEY`), not shown.

    Does nothing outside an IPython kernel, or where MyST-NB is not installed:
    the record only matters to the book build.
    """
    try:
        from IPython.core.interactiveshell import InteractiveShell
        from myst_nb import glue
    except ImportError:
        return
    if InteractiveShell.initialized():
        glue(GLUE_KEY, _Record(prov.record()), display=False)


def note(profile: profiles.Profile, framework: str = "pytorch", data: str | None = None):
    """Display the provenance note of a page run with ``profile`` in a notebook
    (returns an IPython Markdown object).

    The same facts are recorded as data with :func:`record`, for the book's
    provenance table.
    """
    from IPython.display import Markdown

    prov = collect(profile, framework, data)
    record(prov)
    return Markdown(prov.markdown())
