"""What ``rocminfo`` says about a machine: its HSA agents (CPUs and GPUs) and the report.

:class:`Agent` is one ``Agent N`` block (name, marketing name, device type,
compute units, gfx target, UUID, ISAs); :class:`RocminfoReport` is everything
one ``rocminfo`` output tells (the agents in HIP's order, the kernel module,
the runtime version, the error sentence when it failed).
:mod:`~rocm_dl_guide.doctor.rocminfo` reads these from the tool's text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .words import counted, listing


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
    global_kib: int | None = None
    """The largest ``GLOBAL`` pool's ``Size`` in KiB (a GPU's memory, a CPU agent's NUMA
    node's memory); None where no pool was printed."""

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


# --------------------------------------------------------------------------- topology

MI300X_OVERVIEW = (
    "https://instinct.docs.amd.com/projects/amdgpu-docs/en/latest/"
    "gpu-partitioning/mi300x/overview.html"
)
"""AMD's MI300X partitioning overview: 8 XCDs of 38 CUs (304), SPX/DPX/QPX/CPX,
each CPX partition one XCD with 1/8 of the memory."""
AMDSMI_PARTITION = (
    "https://rocm.docs.amd.com/projects/amdsmi/en/docs-10.2.0/conceptual/partition.html"
)
"""AMD SMI's partitioning guide: MI300X 8 XCDs, MI300A 6 (SPX/TPX/CPX)."""
MI250 = "https://rocm.docs.amd.com/en/docs-7.14.0/reference/gpu-arch/mi250.html"
"""AMD's MI250 microarchitecture: an MI250X is two GCDs (110 CUs each)."""
FRONTIER = "https://docs.olcf.ornl.gov/systems/frontier_user_guide.html"
"""OLCF's Frontier guide: each MI250X's two GCDs are separate GPUs to ROCm and Slurm."""
NUMA = "https://rocm.docs.amd.com/en/latest/how-to/system-optimization/mi300x.html"
"""AMD's MI300X system optimization: the EPYC BIOS's NUMA nodes per socket (NPS)."""

_PRODUCTS = {
    # product words -> (CUs of the whole GPU, {partitions per GPU: compute mode})
    "MI300X": (304, {1: "SPX", 2: "DPX", 4: "QPX", 8: "CPX"}),
    "MI325X": (304, {1: "SPX", 2: "DPX", 4: "QPX", 8: "CPX"}),
    "MI300A": (228, {1: "SPX", 3: "TPX", 6: "CPX"}),
}
_CORES = re.compile(r"(\d+)-Core Processor", re.IGNORECASE)


@dataclass(frozen=True)
class Note:
    """One thing the agents' layout says (partitions, GCDs, NUMA nodes, a blank name)."""

    id: str
    title: str
    message: str
    sources: tuple[str, ...] = ()


def _gib(kib: int | None) -> str:
    return f"{kib / 2**20:.1f} GiB" if kib else "an unprinted amount of memory"


def _mode(gpu: Agent) -> tuple[str, int, int, str] | None:
    """(product, CUs of the whole GPU, partitions per GPU, mode) for a gfx942 agent
    whose CUs are a partition's; None for a whole GPU or an unknown one."""
    if gpu.gfx != "gfx942" or not gpu.compute_units:
        return None
    named = [p for p in _PRODUCTS if p in gpu.marketing_name.upper()]
    found = set()
    for product in named or _PRODUCTS:
        whole, modes = _PRODUCTS[product]
        parts = whole // gpu.compute_units if whole % gpu.compute_units == 0 else 0
        if parts > 1 and parts in modes:
            found.add((product if named else "", whole, parts, modes[parts]))
    if len({f[3] for f in found}) != 1:
        return None  # no partition of a known GPU, or two readings that disagree
    return sorted(found)[0]


def _partition_note(gpus: tuple[Agent, ...]) -> Note | None:
    modes = {g.index: m for g in gpus if (m := _mode(g))}
    if not modes:
        return None
    product, whole, parts, mode = next(iter(modes.values()))
    by_uuid: dict[str, list[int]] = {}
    for g in gpus:
        if g.index in modes and g.uuid:
            by_uuid.setdefault(g.uuid, []).append(g.index)
    first = next(g for g in gpus if g.index in modes)
    name = product or "MI300-series GPU"
    msg = (
        f"{counted(len(modes), 'GPU agent')} with {first.compute_units} of the {whole} CUs of an "
        f"{name} and {_gib(first.global_kib)} each: {mode} mode, {parts} partitions per GPU "
        f"(one XCD of 38 CUs is the smallest); a partitioned GPU, not several GPUs or "
        "missing ones, and each program sees every partition as a GPU"
    )
    shared = [ix for ix in by_uuid.values() if len(ix) > 1]
    if shared:
        msg += (
            f"; agents {', '.join('/'.join(map(str, ix)) for ix in shared)} share one UUID "
            "(one physical GPU)"
        )
    groups = len(by_uuid) if by_uuid and not any(len(i) > parts for i in by_uuid.values()) else 0
    if groups and len(modes) < groups * parts:
        shown = f"{len(modes)} of {groups * parts} partitions of {counted(groups, 'GPU')}"
        msg += f"; {shown} {'is' if len(modes) == 1 else 'are'} visible here"
    return Note(
        "rocminfo-partitions",
        "GPU partitions (rocminfo)",
        msg + ".",
        (MI300X_OVERVIEW, AMDSMI_PARTITION),
    )


def _gcd_note(gpus: tuple[Agent, ...]) -> Note | None:
    gcds = [g for g in gpus if g.gfx == "gfx90a" and g.compute_units == 110]
    if not gcds:
        return None
    msg = (
        f"{counted(len(gcds), 'GPU agent')} with gfx90a and 110 CUs: "
        f"{listing(gcds, 'a GCD', 'GCDs')} of an AMD Instinct MI250X, "
        "which is two GCDs of 110 CUs, each its own GPU to ROCm and to a scheduler"
    )
    if len(gcds) % 2:
        msg += (
            f"; {counted(len(gcds), 'GCD')} means part of a card is visible here (a scheduler's "
            "allocation or a visible-devices setting), not a missing GPU"
        )
    return Note("rocminfo-gcd", "MI250X GCDs", msg + ".", (MI250, FRONTIER))


def _numa_note(cpus: tuple[Agent, ...]) -> Note | None:
    if len(cpus) < 2:
        return None
    cus = {c.compute_units for c in cpus}
    kib = [c.global_kib for c in cpus if c.global_kib]
    each = f", {_gib(min(kib))} to {_gib(max(kib))} each" if kib else ""
    msg = (
        f"{len(cpus)} CPU agents: the host has {len(cpus)} NUMA nodes (rocminfo lists one "
        f"CPU agent per node{each}); on AMD EPYC that is sockets x NPS, the BIOS's NUMA "
        "nodes per socket"
    )
    cores = _CORES.search(cpus[0].name or cpus[0].marketing_name)
    if cores and len(cus) == 1 and cus != {None}:
        threads = cus.pop() or 0
        per = int(cores.group(1))
        if threads == 2 * per:
            msg += f"; each node holds all {threads} threads of one {per}-core CPU: NPS1"
        elif threads == 4 * per:
            msg += f"; each node holds the {threads} threads of two {per}-core CPUs: NPS0"
    return Note("rocminfo-numa", "NUMA nodes", msg + ".", (NUMA,))


def _blank_cpu_note(cpus: tuple[Agent, ...]) -> Note | None:
    # A blank Marketing Name where rocminfo prints one (its versions with a Uuid line).
    blank = [c.index for c in cpus if not c.marketing_name.strip() and (c.uuid or not c.name)]
    if not blank:
        return None
    msg = (
        f"{listing(blank, 'CPU agent')} {', '.join(map(str, blank))} "
        f"{listing(blank, 'has', 'have')} a blank name: the runtime found no "
        "processor name to print (as inside some containers); cosmetic, not a fault, and "
        "it changes nothing for the GPU agents"
    )
    return Note("rocminfo-cpu-name", "CPU name", msg + ".")


def topology(report: RocminfoReport) -> list[Note]:
    """What the agents' layout says beyond the list: compute partitions of an MI300-series
    GPU (CUs a fraction of the GPU's, agents sharing a UUID), MI250X GCDs, the host's NUMA
    nodes, a CPU agent without a name. Each only where the output shows it."""
    notes = (
        _partition_note(report.gpus),
        _gcd_note(report.gpus),
        _numa_note(report.cpus),
        _blank_cpu_note(report.cpus),
    )
    return [n for n in notes if n is not None]
