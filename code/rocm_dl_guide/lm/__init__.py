"""The language-model chapter: a small Llama-style decoder trained from scratch
on a real English corpus, by the guide's one training loop.

:mod:`~rocm_dl_guide.lm.corpus` (the text and its byte-level BPE tokenizer,
cached like every other artefact), :mod:`~rocm_dl_guide.lm.model` (the model's
configuration per profile, the wrapper the loop trains, FSDP units per
transformer block) and :mod:`~rocm_dl_guide.lm.pretrain` (the ``tiny-lm``
case study: pretraining, held-out perplexity against an untrained model and a
unigram model, samples before and after).
"""

from rocm_dl_guide.core.messages import quiet_log_notice, quiet_torchao_notices

# ``transformers`` imports torchao, which makes PyTorch log notices about its
# own internals (see :func:`~rocm_dl_guide.core.messages.quiet_torchao_notices`).
quiet_torchao_notices()
# On a CPU with AVX512-BF16, importing bitsandbytes (PEFT does) tries to fetch an
# optional 4-bit kernel from the Hugging Face Hub through the ``kernels`` package
# and logs a warning when it cannot; bitsandbytes then uses its own kernel, which
# is what QLoRA runs on here (:func:`~rocm_dl_guide.lm.qlora.qlora_support` checks it).
quiet_log_notice("bitsandbytes.backends.cpu.ops", "Failed to load CPU gemm_4bit_forward")

CACHES = ("none", "dynamic", "static")
"""The KV caches :mod:`~rocm_dl_guide.lm.generation` compares: none (recompute
every step), ``transformers``' default growing cache, and the static,
preallocated one. Here, not in ``generation``, so that the command line lists
them without importing PyTorch."""
