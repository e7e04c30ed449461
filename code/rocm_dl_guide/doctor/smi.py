"""GPU partitions and topology from ``amd-smi`` / ``rocm-smi`` output.

An AMD Instinct MI300X can present itself as 1, 2, 4 or 8 logical GPUs (compute
partition modes SPX, DPX, QPX, CPX) and split its memory into NUMA domains
(memory partition modes NPS1, NPS4). A reader who sees 64 GPUs on an 8-GPU
node, or a job that got "GPU 0-7" and finds them all on one card, is looking at
a partition mode. :func:`read` takes the text ``amd-smi`` or ``rocm-smi``
printed, in the formats below, and :func:`to_text` says what it means for
``torchrun --nproc-per-node`` and ``HIP_VISIBLE_DEVICES``.

``doctor`` and ``doctor --collect`` run the tools themselves where installed (on
PATH or in the ROCm tree; :func:`~rocm_dl_guide.doctor.system.collect_smi`):
``amd-smi static --partition`` and ``amd-smi list``, else ``rocm-smi --showbus
--showcomputepartition --showmemorypartition`` and ``rocm-smi --showtopo``, each
within 20 seconds, and read their outputs together. ``doctor --smi FILE`` reads
saved output instead (another node's, for example).

Formats read (each from a real sample; ``tests/test_smi.py`` quotes them):

- ``amd-smi static --partition``: ``GPU: N`` blocks with ``COMPUTE_PARTITION``,
  ``MEMORY_PARTITION``, ``PARTITION_ID``
- ``amd-smi list``: ``GPU: N`` blocks with ``BDF``, ``UUID``, ``KFD_ID``,
  ``NODE_ID``, ``PARTITION_ID``
- ``amd-smi partition``: its ``CURRENT_PARTITION:`` table (ROCm 6.4's layout)
- ``amd-smi topology``: the BDFs heading its tables (the physical GPUs)
- ``rocm-smi`` (``--showbus``, ``--showcomputepartition``,
  ``--showmemorypartition``, ``-a``): ``GPU[N] : PCI Bus: ...``,
  ``GPU[N] : Compute Partition: CPX``, ``GPU[N] : Memory Partition: NPS1``
- ``rocm-smi`` (no option): the concise table's ``Partitions (Mem, Compute, ID)``
  column (``NPS1, CPX, 0``)
- ``rocm-smi --showtopo``: the ``Link Type between two GPUs`` table (XGMI, PCIE)

``amd-smi --json`` is not read: no real sample of its partition fields was found.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

from .rules import INFO, OK, WARN, Check

_DOCS = "https://instinct.docs.amd.com/projects/amdgpu-docs/en/latest/gpu-partitioning/"
OVERVIEW = _DOCS + "mi300x/overview.html"
"""AMD Instinct MI300X GPU Partitioning Overview: SPX/CPX, NPS1/NPS4, 38 CUs and
24 GB per CPX partition, NPS4 only with CPX, mixed memory modes not recommended."""
QUICK_START = _DOCS + "mi300x/quick-start-guide.html"
"""Quick Start Guide to Partitioning MI300X GPUs: amd-smi set/static --partition,
64 logical GPUs on 8 MI300X in CPX/NPS4."""
TROUBLESHOOTING = _DOCS + "mi300x/troubleshooting.html"
"""Partitioning troubleshooting: fewer than 64 GPUs in CPX mode (the BMC's AST
video driver), NPS4 only compatible with CPX."""
COMPATIBILITY = _DOCS + "index.html"
"""The partitioning compatibility matrix (MI300X: SPX+NPS1, CPX+NPS4 from ROCm 6.4)."""
AMDSMI_PARTITION = (
    "https://rocm.docs.amd.com/projects/amdsmi/en/docs-10.2.0/conceptual/partition.html"
)
"""AMD SMI's GPU partitioning guide: MI300X has 8 XCDs (MI300A 6), 4 AIDs."""
AMDSMI_CHANGELOG = (
    "https://github.com/ROCm/amdsmi/blob/0ceca28f4139dced5e9b5739a3f393780d7add48/CHANGELOG.md"
)
"""amd_smi_lib's changelog: amdsmi_accelerator_partition_profile_t.num_partitions,
"On MI300X, SPX: 1, DPX: 2, QPX: 4, CPX: 8"; partition ID in the BDF's function bits."""
BLOG = "https://rocm.blogs.amd.com/artificial-intelligence/gpu-partitioning-workloads/README.html"
"""ROCm blog, Applying Compute Partitioning for Workloads on MI300X GPUs: 8 XCDs,
CPX shows each as a GPU, "up to 64 'separate' GPUs visible ... on a node of 8"."""

NA_BUG = "https://github.com/ROCm/amdsmi/issues/100"
"""amd-smi 25.4 (ROCm 6.4.1) on 8 MI300X in CPX/NPS4: only GPUs 0, 8, 16 ... 56 show
CPX/NPS4, the other 56 ``COMPUTE_PARTITION: N/A`` and ``MEMORY_PARTITION: N/A``."""
NA_BUG_FIX = "https://github.com/ROCm/rocm-systems/pull/8491"
"""The amd-smi change for it: the partition files answer only on each device's primary
partition, so "only 8 of 64 logical GPUs reported info"; a sub-partition is read from its
primary (``partition_id == 0``) one."""
ROCM_SMI_NA_BUG = "https://github.com/ROCm/legacy-rocm-build/issues/4759"
"""rocm-smi 6.4.1 shows "N/A" for most partition-related values on MI300A and MI300X."""
PARTITION_NA_BUG = "https://github.com/ROCm/legacy-rocm-build/issues/4477"
"""``amd-smi partition`` (4 MI300A) shows N/A for the accelerator type, profile index and
partition ID; AMD's answer: an amdsmi change fixes it in a later release, which needs the
packaged kernel driver."""

SOURCES = (OVERVIEW, QUICK_START, TROUBLESHOOTING, AMDSMI_PARTITION, AMDSMI_CHANGELOG, BLOG)


@dataclass(frozen=True)
class Mode:
    """A compute partition mode on the MI300X."""

    name: str
    logical_per_gpu: int
    source: str


MI300X_XCDS = 8
"""XCDs (compute dies) of an MI300X; 38 CUs each, 304 in all (:data:`OVERVIEW`,
:data:`AMDSMI_PARTITION`)."""
MI300X_CUS_PER_XCD = 38
MI300X_HBM_GB = 192
MODES = {
    "SPX": Mode("SPX", 1, OVERVIEW),
    "DPX": Mode("DPX", 2, AMDSMI_CHANGELOG),
    "QPX": Mode("QPX", 4, AMDSMI_CHANGELOG),
    "CPX": Mode("CPX", MI300X_XCDS, OVERVIEW),
}
"""Logical GPUs per physical MI300X in each compute mode. (The MI300A, 6 XCDs,
has SPX, TPX and CPX: 1, 3 and 6.)"""
MEMORY_MODES = ("NPS1", "NPS2", "NPS4", "NPS8")
_COMPUTE = r"SPX|DPX|TPX|QPX|CPX"
_MEMORY = r"NPS[1248]"


@dataclass
class Device:
    """One device as smi numbers it: a logical GPU (a partition) where partitioned."""

    index: int
    bdf: str | None = None
    compute: str | None = None
    memory: str | None = None
    partition_id: int | None = None
    node_id: int | None = None


@dataclass
class SmiReport:
    """What the text says: its devices (by smi's index), the formats recognised,
    the physical GPUs the topology tables name, and the GPU-to-GPU link types."""

    devices: list[Device] = field(default_factory=list)
    formats: list[str] = field(default_factory=list)
    topology_bdfs: list[str] = field(default_factory=list)
    links: dict[str, int] = field(default_factory=dict)
    """Link type -> number of GPU pairs joined by it (``rocm-smi --showtopo``)."""
    na_partitions: int = 0
    """Devices whose partition mode the tool printed as ``N/A`` (a reporting bug of
    some amd-smi/rocm-smi versions, :data:`NA_BUG`): their mode is unknown, not absent."""
    na_tool: str = ""
    """The tool that printed them (``amd-smi`` or ``rocm-smi``)."""

    @property
    def empty(self) -> bool:
        return not (self.devices or self.topology_bdfs or self.links or self.na_partitions)


# --------------------------------------------------------------------------- parsing

_AMD_GPU = re.compile(r"^GPU: (\d+)\s*$")
_AMD_FIELDS = {
    "bdf": re.compile(r"^\s+BDF: ([0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7])\s*$"),
    "compute": re.compile(rf"^\s+COMPUTE_PARTITION: ({_COMPUTE}|N/A)\s*$"),
    "memory": re.compile(rf"^\s+(?:MEMORY_PARTITION|CURRENT): ({_MEMORY}|N/A)\s*$"),
    "partition_id": re.compile(r"^\s+PARTITION_ID: (\d+)\s*$"),
    "node_id": re.compile(r"^\s+NODE_ID: (\d+)\s*$"),
}
_ROCM_LINE = re.compile(
    r"^GPU\[(\d+)\]\s*: (PCI Bus|Compute Partition|Memory Partition): (\S+)\s*$"
)
_ROCM_KEYS = {"PCI Bus": "bdf", "Compute Partition": "compute", "Memory Partition": "memory"}
_CONCISE = re.compile(rf"^(\d+)\s.*?\s({_MEMORY}|N/A), ({_COMPUTE}|N/A)(?:, (\d+|N/A))?\s")
_BARE_NA = re.compile(r"^COMPUTE_PARTITION: N/A\s*$")
"""amd-smi's N/A line quoted without its ``GPU: N`` block."""
_CURRENT_ROW = re.compile(
    rf"^(\d+)\s+({_MEMORY}|N/A)\s+({_COMPUTE}|N/A)\*?\s+(\S+)\s+(\d+|N/A)\s*$"
)
_BDF = r"[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]"
_BDF_HEADER = re.compile(rf"^\s+({_BDF})(\s+{_BDF})*\s*$")


def _device(found: dict[int, Device], index: int) -> Device:
    return found.setdefault(index, Device(index))


def _set(dev: Device, key: str, value: str) -> None:
    if value == "N/A":
        return  # unknown: the device stays without a mode
    if key in ("partition_id", "node_id"):
        setattr(dev, key, int(value))
    elif key == "bdf":
        dev.bdf = value.lower()
    else:
        setattr(dev, key, value.upper())


def _amd_blocks(lines: list[str], found: dict[int, Device], formats: list[str]) -> int:
    """``amd-smi static --partition``, ``amd-smi list`` and the per-GPU blocks of
    ``amd-smi partition``: ``GPU: N`` and its indented ``KEY: value`` lines. Returns how
    many devices show their compute partition as ``N/A``."""
    current = None
    kinds = set()
    na: set[int] = set()
    for line in lines:
        head = _AMD_GPU.match(line)
        if head:
            current = int(head.group(1))
            continue
        if current is None and _BARE_NA.match(line):
            na.add(-1 - len(na))  # a quoted N/A line of no numbered device
            continue
        if current is None or not line.startswith(" "):
            current = None if line.strip() else current
            continue
        for key, pattern in _AMD_FIELDS.items():
            hit = pattern.match(line)
            if hit:
                if key == "compute" and hit.group(1) == "N/A":
                    na.add(current)
                _set(_device(found, current), key, hit.group(1))
                kinds.add(key)
    if na:
        kinds.add("compute")
    if "compute" in kinds:
        formats.append("amd-smi static --partition")
    if "bdf" in kinds or "node_id" in kinds:
        formats.append("amd-smi list")
    return len(na)


def _amd_current_table(lines: list[str], found: dict[int, Device], formats: list[str]) -> int:
    """``amd-smi partition``'s ``CURRENT_PARTITION:`` table (GPU_ID, MEMORY,
    ACCELERATOR_TYPE, ACCELERATOR_PROFILE_INDEX, PARTITION_ID); returns how many of its
    GPUs show the accelerator type as ``N/A``."""
    inside = hit_any = False
    na = set()
    for line in lines:
        if line.strip() == "CURRENT_PARTITION:":
            inside, hit_any = True, False
            continue
        if not inside or line.startswith("GPU_ID"):
            continue
        row = _CURRENT_ROW.match(line)
        if not row:
            inside = False
            continue
        dev = _device(found, int(row.group(1)))
        if row.group(3) == "N/A":
            na.add(dev.index)
        for key, value in (("memory", row.group(2)), ("compute", row.group(3))):
            if value != "N/A":
                _set(dev, key, value)
        if row.group(5) != "N/A":
            dev.partition_id = int(row.group(5))
        if not hit_any:
            formats.append("amd-smi partition")
            hit_any = True
    return len(na)


def _rocm(lines: list[str], found: dict[int, Device], formats: list[str]) -> int:
    """``rocm-smi``'s ``GPU[N] : Key: value`` lines and its concise table; returns how
    many devices show their compute partition as ``N/A`` (counted, not read as a mode)."""
    line_kinds, concise, na = set(), False, 0
    for line in lines:
        hit = _ROCM_LINE.match(line)
        if hit:
            key = _ROCM_KEYS[hit.group(2)]
            value = hit.group(3)
            ok = {"bdf": _BDF, "compute": _COMPUTE, "memory": _MEMORY}[key]
            if key == "compute" and value == "N/A":
                _device(found, int(hit.group(1)))
                na += 1
                line_kinds.add(hit.group(2))
            elif re.fullmatch(ok, value):
                _set(_device(found, int(hit.group(1))), key, value)
                line_kinds.add(hit.group(2))
            continue
        row = _CONCISE.match(line)
        if row:
            dev = _device(found, int(row.group(1)))
            _set(dev, "memory", row.group(2))
            _set(dev, "compute", row.group(3))
            if row.group(4) not in (None, "N/A"):
                dev.partition_id = int(row.group(4))
            if row.group(3) == "N/A":
                na += 1
            concise = True
    options = {"PCI Bus": "--showbus", "Compute Partition": "--showcomputepartition"}
    options["Memory Partition"] = "--showmemorypartition"
    formats += [f"rocm-smi {options[k]}" for k in options if k in line_kinds]
    if concise:
        formats.append("rocm-smi (concise table)")
    return na


def _topology(lines: list[str], report: SmiReport) -> None:
    """The physical GPUs heading ``amd-smi topology``'s tables, and the link types
    of ``rocm-smi --showtopo``'s "Link Type between two GPUs" table."""
    in_links = False
    for line in lines:
        header = _BDF_HEADER.match(line)
        if header:
            for bdf in line.split():
                if bdf.lower() not in report.topology_bdfs:
                    report.topology_bdfs.append(bdf.lower())
            continue
        if "Link Type between two GPUs" in line:
            in_links = True
            continue
        if in_links:
            cells = line.split()
            if not cells or line.startswith("="):
                in_links = False if line.startswith("=") else in_links
                continue
            if re.fullmatch(r"GPU\d+", cells[0]) and not line[0].isspace():
                row = int(cells[0][3:])
                for col, kind in enumerate(cells[1:]):
                    if col > row and kind not in ("0", "N/A"):
                        report.links[kind] = report.links.get(kind, 0) + 1
    if report.topology_bdfs:
        report.formats.append("amd-smi topology")
    if report.links:
        report.formats.append("rocm-smi --showtopo")


def read(text: str) -> SmiReport:
    """Everything :mod:`smi` knows in ``text`` (several tools' outputs may be pasted
    together); :attr:`SmiReport.empty` when it knows nothing."""
    lines = text.replace("\r\n", "\n").splitlines()
    report = SmiReport()
    found: dict[int, Device] = {}
    amd_na = _amd_blocks(lines, found, report.formats)
    table_na = _amd_current_table(lines, found, report.formats)
    rocm_na = _rocm(lines, found, report.formats)
    _topology(lines, report)
    report.devices = [found[i] for i in sorted(found)]
    if amd_na:
        report.na_partitions, report.na_tool = amd_na, "amd-smi"
    elif rocm_na:
        report.na_partitions, report.na_tool = rocm_na, "rocm-smi"
    elif table_na:
        report.na_partitions, report.na_tool = table_na, "amd-smi partition"
    return report


# --------------------------------------------------------------------------- meaning


@dataclass
class Layout:
    """The devices grouped by physical GPU, and the modes in force."""

    groups: list[list[int]]
    """smi's device indices, one list per physical GPU (empty: not known)."""
    basis: str
    """How the grouping was found."""
    compute: dict[str, list[int]]
    memory: dict[str, list[int]]


def _physical(bdf: str) -> str:
    return bdf.rsplit(".", 1)[0]


def layout(report: SmiReport) -> Layout:
    """Which logical devices share a physical GPU: by their PCI address (the BDF
    without its function, where amd-smi puts the partition ID), else by the
    partition IDs (each physical GPU numbers its partitions from 0)."""
    devs = report.devices
    groups: list[list[int]] = []
    basis = ""
    if devs and all(d.bdf for d in devs):
        by_bus: dict[str, list[int]] = {}
        for d in devs:
            by_bus.setdefault(_physical(d.bdf), []).append(d.index)
        groups, basis = list(by_bus.values()), "PCI addresses"
    elif devs and all(d.partition_id is not None for d in devs):
        for d in devs:
            if d.partition_id == 0 or not groups:
                groups.append([])
            groups[-1].append(d.index)
        basis = "partition IDs, each GPU numbering its partitions from 0"
    compute: dict[str, list[int]] = {}
    memory: dict[str, list[int]] = {}
    for d in devs:
        if d.compute:
            compute.setdefault(d.compute, []).append(d.index)
        if d.memory:
            memory.setdefault(d.memory, []).append(d.index)
    return Layout(groups, basis, compute, memory)


def _span(indices: list[int]) -> str:
    """``0-7`` for a run, else the indices."""
    if len(indices) > 2 and indices == list(range(indices[0], indices[-1] + 1)):
        return f"{indices[0]}-{indices[-1]}"
    return ",".join(map(str, indices))


@dataclass
class Finding:
    """A mismatch the text shows."""

    id: str
    message: str
    sources: tuple[str, ...] = ()


def findings(report: SmiReport, rocminfo_gpus: int | None = None) -> list[Finding]:
    """Mismatches: mixed compute or memory modes, NPS4 without CPX, physical GPUs
    showing unequal numbers of partitions, rocminfo's GPU count against smi's."""
    lay = layout(report)
    out = []
    if len(lay.compute) > 1:
        where = "; ".join(f"{m} on devices {_span(ix)}" for m, ix in sorted(lay.compute.items()))
        out.append(
            Finding(
                "mixed-compute",
                f"GPUs in different compute modes ({where}): "
                "the logical devices differ in size, so ranks that get a small "
                "partition set the pace of a data-parallel job",
                (OVERVIEW,),
            )
        )
    if len(lay.memory) > 1:
        where = "; ".join(f"{m} on devices {_span(ix)}" for m, ix in sorted(lay.memory.items()))
        out.append(
            Finding(
                "mixed-memory",
                f"GPUs in different memory modes ({where}): AMD "
                "does not recommend mixed memory partitioning modes on one node",
                (OVERVIEW,),
            )
        )
    by_index = {d.index: d for d in report.devices}
    bad = {by_index[i].compute for i in lay.memory.get("NPS4", [])} - {"CPX", None}
    if bad:
        out.append(
            Finding(
                "nps4-without-cpx",
                "NPS4 with a compute mode other than CPX "
                f"({', '.join(sorted(bad))}): on the MI300X, NPS4 is only "
                "compatible with CPX (AMD's partitioning quick start guide)",
                (QUICK_START,),
            )
        )
    sizes = {}  # compute mode -> the group sizes seen in it
    for g in lay.groups:
        sizes.setdefault(by_index[g[0]].compute, set()).add(len(g))
    if any(len(s) > 1 for s in sizes.values()) and not report.na_partitions:
        out.append(
            Finding(
                "uneven-partitions",
                "the physical GPUs show unequal numbers of "
                f"logical devices ({', '.join(str(len(g)) for g in lay.groups)}): "
                "some partitions are missing; in CPX mode AMD names the BMC's "
                "AST video driver (modprobe -r ast, then reload amdgpu)",
                (TROUBLESHOOTING,),
            )
        )
    n = len(report.devices)
    if rocminfo_gpus and n and rocminfo_gpus != n:
        out.append(
            Finding(
                "rocminfo-count",
                f"rocminfo lists {rocminfo_gpus} GPU agent(s), "
                f"smi {n} logical device(s): ROCm's runtime sees a subset "
                "(HIP_VISIBLE_DEVICES/ROCR_VISIBLE_DEVICES, a container given only "
                "some /dev/dri render nodes), or the two outputs come from "
                "different machines or partition modes",
            )
        )
    return out


def _memory_words(memory: list[str], per_gpu: int) -> str:
    if memory == ["NPS4"]:
        return (
            " With NPS4 the memory is 4 NUMA domains of 2 HBM stacks (48 GB on an "
            "MI300X), each shared by 2 CPX partitions."
        )
    if memory == ["NPS1"] and per_gpu > 1:
        return " With NPS1 each partition's memory is interleaved across all HBM stacks."
    return ""


def na_words(report: SmiReport) -> str:
    """The sentence for partitions printed as ``N/A``: an unknown, and the tools' known
    reporting bug behind it (empty when there are none)."""
    if not report.na_partitions:
        return ""
    if report.na_tool == "amd-smi partition":
        return (
            f"{report.na_partitions} GPU(s) show the accelerator type as N/A in amd-smi "
            "partition's table: unknown, not missing. A known reporting bug: where amd-smi "
            "cannot read the accelerator partition profile (AMDSMI_STATUS_NOT_SUPPORTED) it "
            "prints N/A; AMD answered that an amdsmi change fixes it in a later release, "
            "together with the kernel driver packaged for it."
        )
    words = (
        f"{report.na_partitions} device(s) show their partition mode as N/A in "
        f"{report.na_tool}'s output: unknown, not missing. This is a known reporting bug: "
        "amd-smi of ROCm 6.4.1 on MI300X in CPX/NPS4 shows the modes only for the first "
        "partition of each GPU (devices 0, 8, 16 ... 56) and N/A for the rest, because the "
        "driver's partition files answer only on each GPU's primary partition; a GPU's "
        "other partitions are in its first partition's mode"
    )
    if report.na_tool == "rocm-smi":
        words += "; rocm-smi of ROCm 6.4.1 shows N/A for most partition values on MI300A and MI300X"
    return words + "."


def na_sources(report: SmiReport) -> tuple[str, ...]:
    if not report.na_partitions:
        return ()
    if report.na_tool == "amd-smi partition":
        return (PARTITION_NA_BUG,)
    extra = (ROCM_SMI_NA_BUG,) if report.na_tool == "rocm-smi" else ()
    return (NA_BUG, NA_BUG_FIX) + extra


def explain(report: SmiReport) -> list[str]:
    """What the partitioning means, in sentences (with :func:`na_words` where the tool
    printed partitions as ``N/A``)."""
    out = _explain(report)
    na = na_words(report)
    if na and out == [_NOTHING]:
        return [na]
    return out + ([na] if na else [])


_NOTHING = "no device, partition mode or topology table recognised in the text"


def _explain(report: SmiReport) -> list[str]:
    lay = layout(report)
    n = len(report.devices)
    compute = sorted(lay.compute)
    memory = sorted(lay.memory)
    if not n and not report.topology_bdfs:
        return [_NOTHING]
    if not n:
        gpus = len(report.topology_bdfs)
        return [f"{gpus} physical GPU(s) in the topology tables; no partition mode in the text"]
    mode = compute[0] if len(compute) == 1 else None
    physical = len(lay.groups) or (len(report.topology_bdfs) or None)
    per_gpu = n // physical if physical and n % physical == 0 else None
    mem = f" (memory {', '.join(memory)})" if memory else ""
    if physical:
        head = f"{physical} physical GPU(s) in {mode or '/'.join(compute) or 'an unknown'} mode"
        out = [
            f"{head}{mem}: {n} logical device(s)" + (f", {per_gpu} per GPU." if per_gpu else ".")
        ]
    else:
        out = [f"{n} logical device(s) in {mode or '/'.join(compute) or 'an unknown'} mode{mem}."]
    out.append(
        f"Every program sees {n} GPU(s): torch.cuda.device_count() is {n}, and "
        f"torchrun --nproc-per-node {n} starts one rank on each."
    )
    if per_gpu and per_gpu > 1:
        first = lay.groups[0] if lay.groups else list(range(per_gpu))
        where = "all on the first physical GPU" if physical <= per_gpu else "not one per GPU"
        out[-1] += f" --nproc-per-node {physical} would use devices 0-{physical - 1}, {where}."
        cus = MI300X_CUS_PER_XCD * MI300X_XCDS // per_gpu
        gb = MI300X_HBM_GB // per_gpu
        out.append(
            f"Each logical device has 1/{per_gpu} of its GPU's compute and memory "
            f"(on an MI300X: {cus} of 304 CUs, {gb} of {MI300X_HBM_GB} GB)."
            + _memory_words(memory, per_gpu)
        )
        out.append(
            "HIP_VISIBLE_DEVICES (and ROCR_VISIBLE_DEVICES) number logical devices: "
            f"devices {_span(first)} share one physical GPU"
            + (f", {_span(lay.groups[1])} the next" if len(lay.groups) > 1 else "")
            + f" (grouped by {lay.basis or 'count'}); give a job whole GPUs by "
            "giving it whole groups."
        )
    elif per_gpu == 1:
        out.append("Each device is a whole GPU; HIP_VISIBLE_DEVICES numbers them as smi does.")
    return out


def to_dict(
    report: SmiReport, source: str, rocminfo_gpus: int | None = None, error: str | None = None
) -> dict:
    """The report as JSON; ``error``: the commands that failed, where doctor ran them."""
    lay = layout(report)
    return {
        "source": source,
        "error": error,
        "formats": report.formats,
        "logical_devices": len(report.devices),
        "physical_gpus": len(lay.groups) or len(report.topology_bdfs) or None,
        "grouped_by": lay.basis or None,
        "compute_modes": {k: v for k, v in sorted(lay.compute.items())},
        "memory_modes": {k: v for k, v in sorted(lay.memory.items())},
        "links": dict(report.links),
        "topology_bdfs": list(report.topology_bdfs),
        "devices": [asdict(d) for d in report.devices],
        "explanation": explain(report),
        "findings": [asdict(f) for f in findings(report, rocminfo_gpus)],
    }


def to_text(
    report: SmiReport, source: str, rocminfo_gpus: int | None = None, error: str | None = None
) -> str:
    """The report's "GPU partitions" section; ``error``: the commands that failed
    (doctor ran them), said in one line."""
    out = [f"GPU partitions ({source}; read: {', '.join(report.formats) or 'nothing'}):"]
    if error:
        out.append(f"  {error}.")
    if not (report.empty and error):
        out += [f"  {line}" for line in explain(report)]
    if report.links:
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(report.links.items()))
        out.append(f"  Links between GPU pairs (rocm-smi --showtopo): {kinds}.")
    for f in findings(report, rocminfo_gpus):
        out.append(
            f"  [warn] {f.message}" + (f" (source: {', '.join(f.sources)})" if f.sources else "")
        )
    out.append(f"  sources: {', '.join((OVERVIEW, QUICK_START, BLOG) + na_sources(report))}")
    return "\n".join(out)


def check(report: SmiReport, rocminfo_gpus: int | None = None) -> Check:
    """The "GPU partitions" check: ok, or warn with the mismatches."""
    found = findings(report, rocminfo_gpus)
    head = explain(report)[0]
    na = na_words(report)
    if na and na != head:
        head += " " + na
    if not found:
        status = INFO if report.na_partitions or not report.devices else OK
        return Check("GPU partitions", status, head, (OVERVIEW,) + na_sources(report), "partitions")
    sources = tuple(dict.fromkeys(s for f in found for s in f.sources)) or (OVERVIEW,)
    sources += na_sources(report)
    return Check(
        "GPU partitions",
        WARN,
        head + " " + "; ".join(f.message for f in found),
        sources,
        "partitions",
    )


KNOWN_FORMATS = (
    "amd-smi static --partition",
    "amd-smi list",
    "amd-smi partition",
    "amd-smi topology",
    "rocm-smi --showbus / --showcomputepartition / --showmemorypartition / -a",
    "rocm-smi (concise table)",
    "rocm-smi --showtopo",
)
