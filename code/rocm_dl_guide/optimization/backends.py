"""Which inference backends this machine has: MIGraphX, ONNX Runtime, or both.

- ``migraphx``: AMD's graph compiler, used whenever ``import migraphx`` works
  (:func:`migraphx_status` also looks in ``$ROCM_PATH/lib``,
  ``/opt/rocm/core-N.N/lib`` and ``/opt/rocm/lib``, where the ROCm packages put
  the module).
- ``onnxruntime``: ONNX Runtime, with its ``MIGraphXExecutionProvider`` when the
  installed build has one, else on the CPU.

:func:`select_backend` turns a name (``auto``, ``migraphx``, ``onnxruntime``)
into one of the two, or raises :class:`BackendError`; :func:`backend_table`
shows both and what ``auto`` picks. Compiling and running a model with the
chosen backend is :mod:`rocm_dl_guide.optimization.inference`'s job.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rocm_dl_guide.core.messages import one_line
from rocm_dl_guide.optimization import onnx_files

if TYPE_CHECKING:  # pragma: no cover
    import pandas

BACKENDS = ("migraphx", "onnxruntime")
BACKEND_CHOICES = ("auto", *BACKENDS)
BACKEND_TITLES = {"migraphx": "MIGraphX", "onnxruntime": "ONNX Runtime"}


class BackendError(onnx_files.InferenceError):
    """An unknown backend name, or a backend that is not available here."""


@dataclass
class MigraphxStatus:
    """Whether MIGraphX's Python module can be used here, and how it was found."""

    module: Any
    """The imported ``migraphx`` module, or ``None``."""
    how: str
    """One sentence: where it was imported from, or why it could not be."""

    @property
    def available(self) -> bool:
        return self.module is not None


_MIGRAPHX: MigraphxStatus | None = None


def rocm_lib_dirs() -> list[Path]:
    """``lib`` of every ROCm tree to look in: ``$ROCM_PATH``, then the Core SDK's
    ``/opt/rocm/core-N.N`` (newest first) and ``/opt/rocm/core``, then the
    legacy ``/opt/rocm`` (see :func:`rocm_dl_guide.doctor.installed.rocm_roots`)."""
    from rocm_dl_guide.doctor import installed

    roots = installed.rocm_roots()
    if os.environ.get("ROCM_PATH"):
        roots += installed.rocm_roots(env={})
    dirs = []
    for root in roots:
        if root / "lib" not in dirs:
            dirs.append(root / "lib")
    return dirs


def _try_import_migraphx() -> tuple[Any, str]:
    try:
        import migraphx
    except ImportError as exc:
        return None, one_line(exc)
    except Exception as exc:  # a broken install (missing ROCm libraries) must not crash a page
        return None, f"import migraphx failed: {one_line(exc)}"
    if not hasattr(migraphx, "parse_onnx"):
        return None, (
            "the installed 'migraphx' module has no parse_onnx (the PyPI package of that "
            "name is an empty placeholder; MIGraphX comes with ROCm)"
        )
    return migraphx, f"import migraphx worked ({getattr(migraphx, '__file__', 'built in')})"


def migraphx_status(refresh: bool = False) -> MigraphxStatus:
    """Import MIGraphX's Python module if this machine has it.

    First a plain ``import migraphx`` (a pip-installed MIGraphX wheel is found
    this way); if that fails and ``$ROCM_PATH/lib``, a Core SDK's
    ``/opt/rocm/core-N.N/lib`` or ``/opt/rocm/core/lib``, or ``/opt/rocm/lib``
    holds the module, that directory is appended to
    ``sys.path``, as ``PYTHONPATH=/opt/rocm/lib`` would, and the import retried.
    The result is cached; ``refresh=True`` looks again.
    """
    global _MIGRAPHX
    if _MIGRAPHX is not None and not refresh:
        return _MIGRAPHX
    module, why = _try_import_migraphx()
    if module is not None:
        _MIGRAPHX = MigraphxStatus(module, why)
        return _MIGRAPHX
    for libdir in rocm_lib_dirs():
        # The ROCm package installs migraphx.cpython-3XX-<platform>.so there.
        if not any(libdir.glob("migraphx*")) or str(libdir) in sys.path:
            continue
        sys.path.append(str(libdir))
        module, again = _try_import_migraphx()
        if module is not None:
            _MIGRAPHX = MigraphxStatus(
                module, f"imported from {libdir} (added to sys.path, as PYTHONPATH={libdir} does)"
            )
            return _MIGRAPHX
        sys.path.remove(str(libdir))
        why = f"{libdir} has the module but importing it failed: {again}"
    _MIGRAPHX = MigraphxStatus(None, f"MIGraphX is not importable here ({why})")
    return _MIGRAPHX


def onnxruntime_version() -> str | None:
    try:
        import onnxruntime as ort
    except ImportError:
        return None
    return ort.__version__


def select_backend(name: str | None = None) -> str:
    """``"migraphx"`` or ``"onnxruntime"`` for ``name`` (``None`` means ``"auto"``).

    ``auto`` picks MIGraphX when it is importable and ONNX Runtime otherwise;
    naming a backend that is not available, or an unknown name, raises
    :class:`BackendError`.
    """
    key = (name or "auto").strip().lower().replace("-", "").replace("_", "")
    if key == "ort":
        key = "onnxruntime"
    if key not in BACKEND_CHOICES:
        raise BackendError(f"unknown backend {name!r}: choose one of {', '.join(BACKEND_CHOICES)}")
    mgx = migraphx_status()
    if key == "auto":
        if mgx.available:
            return "migraphx"
        key = "onnxruntime"
    if key == "migraphx" and not mgx.available:
        raise BackendError(f"{mgx.how}; use the onnxruntime backend (or auto) instead")
    if key == "onnxruntime" and onnxruntime_version() is None:
        raise BackendError("ONNX Runtime is not installed (pip install onnxruntime)")
    return key


@dataclass
class BackendTable:
    """What :func:`backend_table` returns."""

    frame: pandas.DataFrame
    """One row per backend: ``backend``, ``available``, ``version``, ``detail``."""
    auto: str
    """The title of the backend ``auto`` picks here."""


def backend_table() -> BackendTable:
    """One row per backend: available here or not, version; and what ``auto`` picks."""
    import pandas as pd

    mgx = migraphx_status()
    rows = [
        {
            "backend": "MIGraphX",
            "available": "yes" if mgx.available else "no",
            "version": getattr(mgx.module, "__version__", "") if mgx.available else "",
            "detail": mgx.how,
        }
    ]
    ver = onnxruntime_version()
    detail = "not installed"
    if ver:
        import onnxruntime as ort

        detail = "execution providers in this build: " + ", ".join(ort.get_available_providers())
    rows.append(
        {
            "backend": "ONNX Runtime",
            "available": "yes" if ver else "no",
            "version": ver or "",
            "detail": detail,
        }
    )
    return BackendTable(pd.DataFrame(rows), BACKEND_TITLES[select_backend("auto")])
