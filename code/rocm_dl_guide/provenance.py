"""The provenance note every executed page shows: profile, device, versions.

Versions come from the installed distributions' metadata, so producing the note
does not import a framework that the page itself does not use.
"""

from __future__ import annotations

import platform
from dataclasses import dataclass, field
from datetime import datetime, timezone
from importlib import metadata

from rocm_dl_guide import __version__, profiles

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
}


def installed_version(framework: str) -> str | None:
    """The installed version of ``framework`` (a key of the table above), or ``None``."""
    for dist in _DISTRIBUTIONS.get(framework, (framework,)):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
    return None


def _tensorflow_device() -> str:
    from rocm_dl_guide.keras_train import import_tensorflow

    tf = import_tensorflow()

    gpus = tf.config.list_physical_devices("GPU")
    if gpus:
        return f"GPU via TensorFlow ({len(gpus)} visible: {', '.join(g.name for g in gpus)})"
    from rocm_dl_guide.device import cpu_name

    return f"CPU ({cpu_name()})"


@dataclass
class Provenance:
    profile: str
    device: str
    versions: dict[str, str] = field(default_factory=dict)
    executed_at: str = ""

    def markdown(self) -> str:
        parts = [f"{name} {ver}" for name, ver in self.versions.items()]
        return (
            f"**Provenance.** Outputs on this page were produced with the "
            f"`{self.profile}` profile on {self.device}; "
            + ", ".join(parts)
            + f"; executed {self.executed_at}."
        )

    def _repr_markdown_(self) -> str:
        return self.markdown()

    def __str__(self) -> str:
        return self.markdown().replace("**", "").replace("`", "")


def collect(framework: str = "pytorch", profile: str | None = None) -> Provenance:
    """Gather the note. ``framework`` says whose view of the device to report
    (``"pytorch"``, ``"tensorflow"``, or ``"none"`` for pages that use neither)."""
    from rocm_dl_guide.device import cpu_name, describe

    prof = profiles.current(profile)
    if framework == "tensorflow":
        device = _tensorflow_device()
    elif framework == "pytorch":
        device = str(describe())
    else:
        device = f"CPU ({cpu_name()})"
    versions = {"Python": platform.python_version(), "rocm_dl_guide": __version__}
    for name in _DISTRIBUTIONS:
        ver = installed_version(name)
        if ver:
            versions[name] = ver
    when = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return Provenance(profile=prof.name, device=device, versions=versions, executed_at=when)


def note(framework: str = "pytorch", profile: str | None = None):
    """Display the provenance note in a notebook (returns an IPython Markdown object)."""
    from IPython.display import Markdown

    return Markdown(collect(framework, profile).markdown())
