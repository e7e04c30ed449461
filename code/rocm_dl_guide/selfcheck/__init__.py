"""``selfcheck``: verify the guide's PyTorch path on this machine in one command.

``python -m rocm_dl_guide selfcheck --gpu`` (``make gpu-check``) refuses at once
where PyTorch sees no GPU; on a GPU machine it runs, offline, on generated
fixtures at the ``gpu`` profile's sizes (``--data-source fixtures``; random
weights):

- every PyTorch case study of the registry (:mod:`rocm_dl_guide.core.casestudies`:
  MNIST, Inception v3, CIFAR-10) for a bounded number of steps per epoch
  through the shared loop, checking that the work ran on the
  GPU (the loop's device, and the memory the GPU allocated);
- each case study's training step swept over batch sizes and variants (float32,
  autocast bf16 and fp16, channels-last, torch.compile, graphs, fused optimizers;
  :func:`rocm_dl_guide.training.training_speed.sweep`), with FLOP/s as a fraction
  of the device's peak, the fraction of the time the GPU is busy and peak memory,
  and the case study's real loaders against the model (``lm:mfu``: tiny-lm at
  GPT-2 small's shape, its model FLOPs utilisation);
- DataLoader workers with pinned memory, a checkpoint and a resume;
- the ONNX export and the inference backends that are importable (MIGraphX,
  ONNX Runtime with its execution providers), compared with PyTorch;
- DDP over every local GPU when there are several (``nccl``, RCCL on ROCm);
- ``torch.profiler`` on two training steps, with the GPU's kernel times, and
  PyTorch's TunableOp tuning one GEMM and writing its results file;
- the language-model chapter (``lm:*``): pretraining under autocast, LoRA and
  QLoRA, GRPO with TRL (where TRL is installed), FSDP, the attention kernels,
  generation and speculative decoding;
- the kernels chapter's Triton kernels compiled for the GPU (``kernels:*``):
  each checked against PyTorch and timed, with the chapter's targets as figures.

It writes a report (``selfcheck.json`` and a readable ``selfcheck.txt``). Without
``--gpu`` the same checks run on the CPU at the ``smoke`` sizes, the GPU-only
ones reported as skipped with the reason. ``--record`` writes the verification
record the book shows ("Last verified on a GPU"), and only from a GPU run in
which every check passed.

The subpackage, one idea a module:

- :mod:`.runner`: which checks there are and in what order (``CHECK_NAMES``),
  the sizes they run at, and :func:`~.runner.run`, which runs them into a report;
- :mod:`.checks`: what every check gets (:class:`~.checks.Setup`) and the
  checks of the training, inference and optimisation chapters;
- :mod:`.lm_checks`: the language-model checks (bf16 pretraining, LoRA, QLoRA,
  FSDP, attention kernels, generation);
- :mod:`.kernel_checks`: the kernels chapter's Triton kernels (``kernels:*``);
- :mod:`.report`: each check's :class:`~.report.Outcome`, the
  :class:`~.report.Report` (the machine, the versions, every check) and its files;
- :mod:`.record`: the verification record the book shows, and its stamp.
"""
