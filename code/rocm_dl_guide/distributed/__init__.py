"""The distributed chapter: torchrun jobs, fault tolerance and multi-node runs
(:mod:`.scaling`), and TensorFlow's distribution strategies
(:mod:`.tf_distributed`, which runs :mod:`.tf_tasks` in child processes). The
process-group helpers that the training loop uses are the core's
(:mod:`rocm_dl_guide.core.distributed`)."""
