"""The package behind the executable ROCm Deep Learning Guide.

Every example in the book calls into this package; the book's pages stay thin
narrative. Modules, one per concern:

- :mod:`rocm_dl_guide.profiles`   run profiles (smoke / gpu / full)
- :mod:`rocm_dl_guide.device`     the one device picker (ROCm/CUDA GPU or CPU)
- :mod:`rocm_dl_guide.rocminfo`   parsing ``rocminfo`` output
- :mod:`rocm_dl_guide.compat`     sourced ROCm compatibility data and verdicts
- :mod:`rocm_dl_guide.system`     what this machine has (GPUs, ROCm, frameworks)
- :mod:`rocm_dl_guide.doctor`     the setup report (``python -m rocm_dl_guide doctor``)
- :mod:`rocm_dl_guide.provenance` the note on every page: profile, device, versions
"""

__version__ = "0.1.0"
