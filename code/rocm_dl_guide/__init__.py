"""The package behind the executable ROCm Deep Learning Guide.

Every example in the book calls into this package; the book's pages stay thin
narrative. The modules form tiers, and a module imports only from its own tier
and the tiers above it (``tests/test_architecture.py`` enforces this map, on
every import, also those inside functions):

**Core** (imports nothing below it)
    :mod:`~rocm_dl_guide.profiles` (run profiles: smoke, gpu, full),
    :mod:`~rocm_dl_guide.casestudies` (the one registry of training examples),
    :mod:`~rocm_dl_guide.device` (the one device picker and CPU-flag reader),
    :mod:`~rocm_dl_guide.datasets` and :mod:`~rocm_dl_guide.fixtures` (the data
    layer: downloads, imports, offline fixtures in the upstream formats),
    :mod:`~rocm_dl_guide.train` (the one PyTorch training loop),
    :mod:`~rocm_dl_guide.checkpoints` (its checkpoint files),
    :mod:`~rocm_dl_guide.preemption` (a clean stop on SIGTERM/SIGINT),
    :mod:`~rocm_dl_guide.training_speed` (the loop's step timed by precision
    and memory format), :mod:`~rocm_dl_guide.distributed` and
    :mod:`~rocm_dl_guide.sharded` (torchrun, DDP, FSDP2 and DCP),
    :mod:`~rocm_dl_guide.keras_train` (the Keras counterpart),
    :mod:`~rocm_dl_guide.runs` (a run's result, JSON record and folder),
    :mod:`~rocm_dl_guide.provenance` (the note on every page and the one
    collector of library versions), and small helpers (``files``: the atomic
    writes; ``messages``, ``plots``, ``ports``, ``progress``, ``tables``).

**The doctor** (:mod:`rocm_dl_guide.doctor`, a subpackage; uses the core)
    What this machine has and whether it fits together: ``rocminfo`` parsing,
    host facts, the sourced compatibility data (``compat``), the rules that
    explain real setup failures (``diagnose``), snapshots, and the check of the
    cited sources (``freshness``). Only the command line and the inference
    chapter import it.

**Case studies** (use the core only)
    :mod:`~rocm_dl_guide.mnist`, :mod:`~rocm_dl_guide.inception`,
    :mod:`~rocm_dl_guide.cifar10`, :mod:`~rocm_dl_guide.fashion_mnist`,
    :mod:`~rocm_dl_guide.imdb`: one module per training example, each with a
    ``train`` function that the registry names.

**Chapters** (use the core and the case studies they build on)
    Inference: :mod:`~rocm_dl_guide.inference` (ONNX export, MIGraphX and ONNX
    Runtime), :mod:`~rocm_dl_guide.bench`, :mod:`~rocm_dl_guide.precision`
    (inference precision: fp32, bf16, int8), :mod:`~rocm_dl_guide.profiling`
    (torch.profiler), :mod:`~rocm_dl_guide.tuning` (MIOpen, TunableOp).
    Others: :mod:`~rocm_dl_guide.scaling` (the distributed chapter's torchrun
    experiments), :mod:`~rocm_dl_guide.tf_distributed`,
    :mod:`~rocm_dl_guide.recipes` (the full profile's hyperparameters) and
    :mod:`~rocm_dl_guide.selfcheck` (``make gpu-check``).

**Entry points** (may import anything)
    :mod:`rocm_dl_guide.cli`, a subpackage with one module per command group,
    the only place that builds an argparse parser, and ``__main__``.
"""

__version__ = "0.1.0"
