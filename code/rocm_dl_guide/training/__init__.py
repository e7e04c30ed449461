"""The one training loop (:mod:`.train`), its set-up (:mod:`.setup`), what it
counts (:mod:`.metrics`), its checkpoints and resuming from them (:mod:`.resume`,
:mod:`.checkpoints`) and sharded (FSDP) state, the Keras loop beside it, and the
training-speed measurement. It uses the core only."""
