"""The package behind the executable ROCm Deep Learning Guide.

Every example in the book calls into this package; the book's pages stay thin
narrative. The subpackages follow the book's parts, in layers; a module
imports only its own subpackage and the layers below it
(``tests/test_architecture.py`` enforces this on every import, also those
inside functions; ``code/README.md`` is the map):

``core``
    Run profiles, the device picker, files and atomic writes, data sets and
    their fixtures, the case-study registry, runs, provenance, preemption and
    small helpers. Imports nothing above it.
``training`` and ``doctor``
    The one training loop with its checkpoints and sharded state; the setup
    checks. Each uses the core only.
``casestudies``, ``distributed``, ``lm``, ``optimization``
    The chapters. Each uses the core and the training loop, and a sibling
    chapter only through an edge listed with its reason in the architecture test.
``selfcheck``, ``cli``, ``__main__``
    The entry points, on top: they may import anything.
"""

__version__ = "0.1.0"
