"""The language-model chapter: a small Llama-style decoder trained from scratch
on a real English corpus, by the guide's one training loop.

:mod:`~rocm_dl_guide.lm.corpus` (the text and its byte-level BPE tokenizer,
cached like every other artefact), :mod:`~rocm_dl_guide.lm.model` (the model's
configuration per profile, the wrapper the loop trains, FSDP units per
transformer block) and :mod:`~rocm_dl_guide.lm.pretrain` (the ``tiny-lm``
case study: pretraining, held-out perplexity against an untrained model and a
unigram model, samples before and after).
"""

from rocm_dl_guide.core.messages import quiet_torchao_notices

# ``transformers`` imports torchao, which makes PyTorch log notices about its
# own internals (see :func:`~rocm_dl_guide.core.messages.quiet_torchao_notices`).
quiet_torchao_notices()

CACHES = ("none", "dynamic", "static")
"""The KV caches :mod:`~rocm_dl_guide.lm.generation` compares: none (recompute
every step), ``transformers``' default growing cache, and the static,
preallocated one. Here, not in ``generation``, so that the command line lists
them without importing PyTorch."""
