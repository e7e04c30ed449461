"""Fault injection for tests/test_preemption.py, loaded only where a test puts
this folder on PYTHONPATH: sends a real SIGTERM at an exact optimizer step.

With ``ROCM_DL_GUIDE_TEST_SIGTERM_AT_STEP=N`` the process that trains alone
(or rank 0 under torchrun) sends ``SIGTERM`` after its N-th optimizer step: to
itself, or to its parent, torchrun's agent, which forwards it to every worker
as it would a scheduler's. Nothing else is changed; the signal, its handler,
the checkpoint and the exit are the package's own.
"""

import os

_AT = os.environ.get("ROCM_DL_GUIDE_TEST_SIGTERM_AT_STEP")
if _AT and os.environ.get("RANK", "0") == "0":
    import signal

    from torch.optim.optimizer import register_optimizer_step_post_hook

    _steps = {"n": 0}
    _target = os.getppid() if "LOCAL_RANK" in os.environ else os.getpid()

    def _after_step(_optimizer, _args, _kwargs):
        _steps["n"] += 1
        if _steps["n"] == int(_AT):
            os.kill(_target, signal.SIGTERM)

    register_optimizer_step_post_hook(_after_step)
