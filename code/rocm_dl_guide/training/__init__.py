"""The one training loop (:mod:`.train`), its checkpoints and sharded (FSDP)
state, the Keras loop beside it, and the training-speed measurement. It uses
the core only."""
