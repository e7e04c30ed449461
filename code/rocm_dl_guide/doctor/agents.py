"""What ``rocminfo`` says about a machine: its HSA agents (CPUs and GPUs) and the report.

:class:`Agent` is one ``Agent N`` block (name, marketing name, device type,
compute units, gfx target, UUID, ISAs); :class:`RocminfoReport` is everything
one ``rocminfo`` output tells (the agents in HIP's order, the kernel module,
the runtime version, the error sentence when it failed).
:mod:`~rocm_dl_guide.doctor.rocminfo` reads these from the tool's text.
"""

from __future__ import annotations

from dataclasses import dataclass, field


class RocminfoError(Exception):
    """Raised only when the rocminfo functions are misused (wrong argument types or values:
    :func:`~rocm_dl_guide.doctor.rocminfo.parse`, :func:`~rocm_dl_guide.doctor.tools.capture` ...).

    Odd, truncated or failed ``rocminfo`` output is never an exception: it is a
    :class:`RocminfoReport` whose ``error`` explains the problem.
    """


@dataclass(frozen=True)
class Agent:
    """One HSA agent (a CPU or a GPU) as listed by ``rocminfo``."""

    index: int
    """The number in the ``Agent N`` header."""
    name: str
    """``Name:``, e.g. ``gfx90a`` for a GPU or the processor name for a CPU."""
    marketing_name: str
    """``Marketing Name:``, e.g. ``AMD Instinct MI210`` (empty if not printed)."""
    vendor: str
    """``Vendor Name:`` (``AMD`` for GPUs; rocminfo prints ``CPU`` for CPUs)."""
    device_type: str
    """``Device Type:`` as printed: ``CPU`` or ``GPU`` (``DSP`` exists too)."""
    compute_units: int | None
    """``Compute Unit:`` (CUs for a GPU, cores/threads for a CPU); None if absent."""
    gfx: str | None
    """The GPU's gfx target (``gfx90a``, ``gfx942``, ``gfx1100`` ...); None for CPUs."""
    uuid: str | None
    """``Uuid:`` (``GPU-21e4cb94e63377ab``; CPUs print ``CPU-XX``); None if absent."""
    extra: dict[str, str] = field(default_factory=dict, hash=False)
    """Every other top-level ``Key: value`` of the agent (not Cache/Pool/ISA sub-keys)."""
    isas: tuple[str, ...] = ()
    """The ISA names under ``ISA Info``, e.g. ``amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-``."""

    @property
    def is_gpu(self) -> bool:
        """True for a GPU agent."""
        kind = self.device_type.strip().upper()
        if kind:
            return kind == "GPU"
        # Device Type missing (truncated paste): a gfx name still means a GPU.
        return self.gfx is not None

    @property
    def is_cpu(self) -> bool:
        """True for a CPU agent."""
        return self.device_type.strip().upper() == "CPU"


@dataclass(frozen=True)
class RocminfoReport:
    """Everything :func:`parse` could read from one ``rocminfo`` output."""

    runtime_version: str | None
    """``Runtime Version:`` from ``HSA System Attributes`` (e.g. ``1.14``)."""
    kernel_module_loaded: bool | None
    """From the ``ROCk module ... is loaded`` / ``is NOT loaded`` line; None if absent."""
    agents: tuple[Agent, ...]
    error: str | None
    """A plain-language sentence if the output shows a failure, else None."""
    kernel_module_version: str | None = None
    """The version in ``ROCk module version 6.8.5 is loaded`` (newer rocminfo only)."""
    system: dict[str, str] = field(default_factory=dict, hash=False)
    """All ``HSA System Attributes`` as printed (``Machine Model``, ``Mwaitx`` ...)."""
    notes: tuple[str, ...] = ()
    """Lines outside the structured sections (warnings, group checks, WSL notice ...)."""
    complete: bool = False
    """True if the output ended with rocminfo's ``*** Done ***`` marker."""
    group_membership: tuple[str, bool] | None = None
    """rocminfo's own line on the user's group: ``("render", True)`` for "USER is member
    of render group", ``False`` for "is not member of"; None where it printed none."""

    @property
    def gpus(self) -> tuple[Agent, ...]:
        """The GPU agents, in rocminfo's order (which is also HIP's device order)."""
        return tuple(a for a in self.agents if a.is_gpu)

    @property
    def cpus(self) -> tuple[Agent, ...]:
        """The CPU agents."""
        return tuple(a for a in self.agents if a.is_cpu)

    @property
    def ok(self) -> bool:
        """True if no error was found and at least one agent was listed."""
        return self.error is None and bool(self.agents)
