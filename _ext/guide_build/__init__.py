"""Sphinx extension for the guide's own build needs (loaded from ``_config.yml``).

One module per feature; :func:`setup` wires them:

- :mod:`guide_build.inputs`: **execution inputs**. A page is re-executed when
  the ``rocm_dl_guide`` modules it imports (directly, through other modules or
  through subpackages) or the pinned requirements change, and only then. The
  imports are read by :mod:`guide_build.imports`, which the package's
  architecture test uses too.
- :mod:`guide_build.notebooks`: **notebook downloads**. Every executable page
  is offered as an ``.ipynb`` that starts with how to install the package.
- :mod:`guide_build.gpu_stamp`: **GPU verification stamp**. The
  ``{guide-gpu-stamp}`` directive: when the PyTorch path last passed ``make
  gpu-check`` on a GPU.
- :mod:`guide_build.provenance_table`: **provenance table**. The
  ``{guide-provenance}`` directive: the profile, device, time and cache status
  of every executed page, from the records the pages glue.
- :mod:`guide_build.parallel`: **parallel execution**. ``GUIDE_BUILD_JOBS``
  pages executed at once, the timed pages alone.
- :mod:`guide_build.page_scripts`: each page's scripts once (sphinx-thebe
  registers its configuration twice).
- :mod:`guide_build.page_times`: **page times**. ``_build/page-times.json``,
  every page's execution time slowest first, and the five slowest in the log.
- :mod:`guide_build.mathjax_local`: **MathJax from the site**, not a CDN, so
  that math renders offline.

The features share only :mod:`guide_build.envdata` (per-page data kept in the
Sphinx environment) and the reading of pages in :mod:`guide_build.imports`.
"""

from __future__ import annotations

from . import (
    gpu_stamp,
    inputs,
    mathjax_local,
    notebooks,
    page_scripts,
    page_times,
    parallel,
    provenance_table,
)

FEATURES = (
    inputs,
    notebooks,
    gpu_stamp,
    provenance_table,
    parallel,
    page_scripts,
    page_times,
    mathjax_local,
)


def setup(app):
    for feature in FEATURES:
        feature.setup(app)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
