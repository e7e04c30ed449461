"""The kernels chapter (``book/kernels``): GPU kernels written in Triton.

- :mod:`.engine`: where the kernels run (compiled for the GPU, or Triton's
  interpreter on the CPU, which it switches on before any kernel is defined),
  timing and the bandwidth and TFLOP/s arithmetic;
- :mod:`.vector_add`: the programming model's first kernel;
- :mod:`.softmax`: a fused row softmax against PyTorch's unfused operators,
  ``torch.softmax`` and ``torch.compile``;
- :mod:`.matmul`: a tiled, autotuned matrix multiplication against ``torch.matmul``;
- :mod:`.ops`: the softmax registered with ``torch.library``, with a backward,
  for autograd and ``torch.compile``;
- :mod:`.bench`: every kernel checked and timed (``bench kernels``, ``kernels:*``
  checks of ``make gpu-check``).
"""

# First, before any module of the chapter imports Triton: without a GPU, the
# engine switches Triton's interpreter on, which only works before Triton's own
# library is imported.
from rocm_dl_guide.kernels import engine  # noqa: E402,F401
