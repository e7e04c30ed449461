"""The selfcheck runner: which checks run, in what order, at what sizes, into a report.

:data:`CHECK_NAMES` lists the checks (``--only`` picks among them);
:func:`run` refuses at once where ``--gpu`` finds no GPU, runs the checks on
the fixtures at the ``gpu`` (or ``smoke``) profile's sizes, and records each
check's outcome, a failure included, in the :class:`~rocm_dl_guide.selfcheck.report.Report`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from datetime import datetime, timezone
from functools import partial
from pathlib import Path

from rocm_dl_guide.core import preflight, profiles
from rocm_dl_guide.core.messages import one_line
from rocm_dl_guide.selfcheck import checks, kernel_checks, lm_checks
from rocm_dl_guide.selfcheck.checks import Setup
from rocm_dl_guide.selfcheck.report import (
    EXAMPLES,
    Outcome,
    Report,
    device_facts,
    git_commit,
    versions,
)

_CHECKS: tuple[tuple[str, Callable[[Setup], Outcome | list[Outcome]]], ...] = (
    *((f"train:{e}", partial(checks.check_case_study, example=e)) for e in EXAMPLES),
    *((f"speed:{e}", partial(checks.check_training_speed, example=e)) for e in EXAMPLES),
    ("dataloader", lambda ctx: checks.check_loader(ctx)),
    ("checkpoint-resume", lambda ctx: checks.check_resume(ctx)),
    ("inference", lambda ctx: checks.check_inference(ctx)),
    ("ddp", lambda ctx: checks.check_ddp(ctx)),
    ("profiler", lambda ctx: checks.check_profiler(ctx)),
    ("tunableop", lambda ctx: checks.check_tunableop(ctx)),
    ("lm:bf16", lambda ctx: lm_checks.check_lm_bf16(ctx)),
    ("lm:mfu", lambda ctx: lm_checks.check_lm_mfu(ctx)),
    ("lm:lora", lambda ctx: lm_checks.check_lm_lora(ctx)),
    ("lm:qlora", lambda ctx: lm_checks.check_lm_qlora(ctx)),
    ("lm:grpo", lambda ctx: lm_checks.check_lm_grpo(ctx)),
    ("lm:fsdp", lambda ctx: lm_checks.check_lm_fsdp(ctx)),
    ("lm:attention", lambda ctx: lm_checks.check_lm_attention(ctx)),
    ("lm:generate", lambda ctx: lm_checks.check_lm_generate(ctx)),
    ("lm:speculative", lambda ctx: lm_checks.check_lm_speculative(ctx)),
    *((n, partial(kernel_checks.check_kernel, name=n)) for n in kernel_checks.NAMES),
)
CHECK_NAMES = tuple(name for name, _ in _CHECKS)
"""The checks in the order they run (``--only`` picks among them)."""


def run_profile(gpu: bool, steps: int) -> profiles.Profile:
    """The sizes to check at: the ``gpu`` profile's on a GPU, ``smoke``'s on the CPU;
    always the fixtures (offline), with ``steps`` training batches per epoch."""
    base = profiles.get("gpu" if gpu else "smoke")
    sized = replace(base, max_train_batches=steps)
    return profiles.with_data_source(sized, "fixtures")


def run(
    gpu: bool,
    out_dir: str | os.PathLike,
    steps: int = 20,
    only: Iterable[str] | None = None,
    log: Callable[[str], None] = print,
    write_as_you_go: bool = False,
) -> Report:
    """Run the checks (all, or ``only`` these names) and return the report.

    ``gpu=True`` raises :class:`~rocm_dl_guide.core.preflight.NoGPUError` at once where
    PyTorch sees no GPU.
    Each check's failure is recorded in the report, not raised. With
    ``write_as_you_go`` the report is written to ``out_dir`` after every check.
    """
    import torch

    device = preflight.check(gpu)
    wanted = list(only) if only else list(CHECK_NAMES)
    unknown = sorted(set(wanted) - set(CHECK_NAMES))
    if unknown:
        raise ValueError(f"unknown check(s) {unknown}: choose from {', '.join(CHECK_NAMES)}")
    if steps < 1:
        raise ValueError(f"steps must be at least 1, got {steps}")
    out = Path(out_dir)
    ctx = Setup(device, run_profile(gpu, steps), out, steps, gpu)
    report = Report(
        mode="gpu" if gpu else "cpu",
        device=device_facts(device),
        versions=versions(),
        profile=ctx.profile.name,
        data_source=ctx.profile.data_source,
        steps=steps,
        started=datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        checks=[],
        commit=git_commit(),
    )
    for name, step in _CHECKS:
        if name not in wanted:
            continue
        log(f"selfcheck: {name} ...")
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats()
        start = time.perf_counter()
        try:
            got = step(ctx)
        except Exception as exc:  # noqa: BLE001 - a failed check is reported, not raised
            got = Outcome(name, "fail", f"{type(exc).__name__}: {one_line(exc)}"[:400])
        for check in got if isinstance(got, list) else [got]:
            if check.seconds is None:
                check.seconds = round(time.perf_counter() - start, 1)
            report.checks.append(check)
            log(f"  [{check.status}] {check.name}: {check.detail}")
        if write_as_you_go:
            report.write(out)  # a run cut short still leaves the checks it finished
    return report
