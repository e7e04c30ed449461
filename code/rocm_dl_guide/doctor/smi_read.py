"""Reading ``amd-smi`` and ``rocm-smi`` output: devices, partition modes, topology.

:func:`read` turns the text (``amd-smi static``/``list``/``partition``, ``rocm-smi``
with ``--showcomputepartition``/``--showmemorypartition``, the concise table,
``--showtopo``) into an :class:`SmiReport`; :mod:`~rocm_dl_guide.doctor.smi`
says what it means. The sources of the partition facts are here too.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .paste import clean
from .wsl_text import release_in

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

TOPO_TPX_BUG = (
    "https://github.com/ROCm/rocm_smi_lib/blob/a1295714f2f6eefa5c55bf5779d17d163ed0e3d0/"
    "CHANGELOG.md#known-issues-1"
)
"""rocm_smi_lib's changelog, ROCm 6.1.0 known issues: "rocm-smi --showtopo option is not
displaying the correct information when the MI300 driver is loaded in TPX mode" (its
example: the link table under the weight title, ``XXXX`` between partitions of one GPU).
The 6.1.1 notes show ``--showhw``'s ``PARTITION ID`` column on 4 MI300A in TPX."""

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
    gfx: str | None = None
    """The GFX version (``rocm-smi --showhw``'s ``GFX VER``)."""
    did: str | None = None
    """The PCI device ID (``--showhw``'s ``DID``: ``0x74a1`` MI300X, ``0x74a0`` MI300A)."""


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
    release: str | None = None
    """The ROCm release the text names (an amd-smi header's "ROCm version", an
    issue form's field), which decides whether a tool's known bug can apply."""
    xxxx_links: int = 0
    """GPU pairs whose link type ``rocm-smi --showtopo`` printed as ``XXXX``: the pairs of
    partitions of one MI300 in TPX mode, a known rocm-smi 6.1 bug (:data:`TOPO_TPX_BUG`)."""

    @property
    def empty(self) -> bool:
        return not (
            self.devices
            or self.topology_bdfs
            or self.links
            or self.na_partitions
            or self.xxxx_links
        )


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


_HW_HEAD = re.compile(r"^GPU\s+(?:NODE\s+)?DID\s")
_HW_DID = re.compile(r"^(?:0x)?[0-9a-fA-F]{4}$|^N/A$")


def _showhw(lines: list[str], found: dict[int, Device], formats: list[str]) -> None:
    """``rocm-smi --showhw``'s "Concise Hardware Info" table: by its header's columns
    (``GPU [NODE] DID [GUID] [GFX VER] GFX RAS ... BUS [PARTITION ID]``, ROCm 6.1.1 on
    with NODE, GUID, GFX VER and PARTITION ID)."""
    columns: list[str] = []
    for line in lines:
        if _HW_HEAD.match(line):
            columns = re.split(r"\s{2,}", line.strip())
            continue
        cells = line.split()
        if not columns or not cells or not cells[0].isdigit():
            columns = [] if line.startswith("=") else columns
            continue
        if len(cells) != len(columns) or not _HW_DID.match(cells[columns.index("DID")]):
            continue
        row = dict(zip(columns, cells, strict=True))
        dev = _device(found, int(row["GPU"]))
        did = row["DID"].lower()
        dev.did = None if did == "n/a" else did if did.startswith("0x") else "0x" + did
        if re.fullmatch(_BDF, row.get("BUS", "")):
            _set(dev, "bdf", row["BUS"])
        if row.get("GFX VER", "").startswith("gfx"):
            dev.gfx = row["GFX VER"]
        if row.get("PARTITION ID", "").isdigit():
            dev.partition_id = int(row["PARTITION ID"])
        if "rocm-smi --showhw" not in formats:
            formats.append("rocm-smi --showhw")


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
            did = re.match(r"^\d+\s+\d+\s+(0x[0-9a-fA-F]{4}),", line)  # IDs (DID, GUID)
            if did and dev.did is None:
                dev.did = did.group(1)
            if row.group(3) == "N/A":
                na += 1
            concise = True
    options = {"PCI Bus": "--showbus", "Compute Partition": "--showcomputepartition"}
    options["Memory Partition"] = "--showmemorypartition"
    formats += [f"rocm-smi {options[k]}" for k in options if k in line_kinds]
    if concise:
        formats.append("rocm-smi (concise table)")
    return na


def _link_row(cells: list[str]) -> bool:
    """``GPU3   XGMI   XXXX   0 ...``: a row of a link-type table."""
    kinds = {"XGMI", "PCIE", "XXXX"}
    return bool(cells) and bool(re.fullmatch(r"GPU\d+", cells[0])) and bool(kinds & set(cells))


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
        cells = line.split()
        if not in_links and _link_row(cells):
            in_links = True  # a link table without its title (rocm-smi 6.1 in TPX mode)
        if in_links:
            if not cells or line.startswith("="):
                in_links = False if line.startswith("=") else in_links
                continue
            if re.fullmatch(r"GPU\d+", cells[0]) and not line[0].isspace():
                row = int(cells[0][3:])
                for col, kind in enumerate(cells[1:]):
                    if col > row and kind == "XXXX":
                        report.xxxx_links += 1
                    elif col > row and kind not in ("0", "N/A"):
                        report.links[kind] = report.links.get(kind, 0) + 1
    if report.topology_bdfs:
        report.formats.append("amd-smi topology")
    if report.links or report.xxxx_links:
        report.formats.append("rocm-smi --showtopo")


def read(text: str) -> SmiReport:
    """Everything :mod:`smi` knows in ``text`` (several tools' outputs may be pasted
    together); :attr:`SmiReport.empty` when it knows nothing."""
    lines = clean(text).splitlines()
    report = SmiReport()
    found: dict[int, Device] = {}
    amd_na = _amd_blocks(lines, found, report.formats)
    table_na = _amd_current_table(lines, found, report.formats)
    rocm_na = _rocm(lines, found, report.formats)
    _showhw(lines, found, report.formats)
    _topology(lines, report)
    report.devices = [found[i] for i in sorted(found)]
    report.release = release_in(text)
    if amd_na:
        report.na_partitions, report.na_tool = amd_na, "amd-smi"
    elif rocm_na:
        report.na_partitions, report.na_tool = rocm_na, "rocm-smi"
    elif table_na:
        report.na_partitions, report.na_tool = table_na, "amd-smi partition"
    return report


# --------------------------------------------------------------------------- meaning
