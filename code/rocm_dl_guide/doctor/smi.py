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
- ``rocm-smi --showtopo``: the ``Link Type between two GPUs`` table (XGMI, PCIE; the
  table without its title and ``XXXX`` cells of rocm-smi 6.1 in TPX mode)
- ``rocm-smi --showhw``: the ``Concise Hardware Info`` table (DID, GFX VER, BUS,
  PARTITION ID)

``amd-smi --json`` is not read: no real sample of its partition fields was found.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from .rules import INFO, OK, WARN, Check
from .smi_read import (
    BLOG,
    MI300X_CUS_PER_XCD,
    MI300X_HBM_GB,
    MI300X_XCDS,
    MODES,
    NA_BUG,
    NA_BUG_FIX,
    OVERVIEW,
    PARTITION_NA_BUG,
    QUICK_START,
    ROCM_SMI_NA_BUG,
    SOURCES,
    TOPO_TPX_BUG,
    TROUBLESHOOTING,
    Device,
    Mode,
    SmiReport,
    read,
)
from .words import counted

MODES_BY_COUNT = {m.logical_per_gpu: m.name for m in MODES.values()}

__all__ = ["MODES", "SOURCES", "Device", "Mode", "SmiReport", "explain", "findings", "read"]
"""Reading is :mod:`~rocm_dl_guide.doctor.smi_read`'s; this module's users call
``smi.read`` as before the split."""


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
                f"rocminfo lists {counted(rocminfo_gpus, 'GPU agent')}, "
                f"smi {counted(n, 'logical device')}: ROCm's runtime sees a subset "
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
    if not_partitioned(report):
        return (
            f"{counted(report.na_partitions, 'device')} show N/A in {report.na_tool}'s "
            "output: unknown, not missing. These GPUs have no compute or memory partitions (only "
            "MI300-class Instinct GPUs do); an idle workstation or consumer GPU in runtime power "
            "management answers none of the tool's reads, so it prints N/A: read "
            "/sys/class/drm/card*/device/power/runtime_status, and wake the GPUs with echo on | "
            "sudo tee /sys/bus/pci/drivers/amdgpu/*/power/control before reading again."
        )
    if report.na_tool == "amd-smi partition":
        return (
            f"{counted(report.na_partitions, 'GPU')} show the accelerator type as N/A in amd-smi "
            "partition's table: unknown, not missing. A known reporting bug: where amd-smi "
            "cannot read the accelerator partition profile (AMDSMI_STATUS_NOT_SUPPORTED) it "
            "prints N/A; AMD answered that an amdsmi change fixes it in a later release, "
            "together with the kernel driver packaged for it."
        )
    words = (
        f"{counted(report.na_partitions, 'device')} show their partition mode as N/A in "
        f"{report.na_tool}'s output: unknown, not missing. A known reporting bug does this: "
        "amd-smi of ROCm 6.4.1 on MI300X in CPX/NPS4 shows the modes only for the first "
        "partition of each GPU (devices 0, 8, 16 ... 56) and N/A for the rest, because the "
        "driver's partition files answer only on each GPU's primary partition; a GPU's "
        "other partitions are in its first partition's mode"
    )
    if report.na_tool == "rocm-smi":
        words += "; rocm-smi of ROCm 6.4.1 shows N/A for most partition values on MI300A and MI300X"
    return words + "." + release_words(report.release, BUG_RELEASE)


BUG_RELEASE = "6.4.1"
"""The release the tools' partition-N/A bugs were reported for (:data:`NA_BUG`,
:data:`ROCM_SMI_NA_BUG`)."""


def release_words(release: str | None, reported: str) -> str:
    """The sentence that keys a tool's known bug to the release in the text: a bug
    reported for one release series (6.4.x) is not assumed in another."""
    series = ".".join(reported.split(".")[:2])
    if release is None:
        return (
            f" The text names no ROCm release; the bug is known in {reported}, so check the "
            "release (amd-smi version) before taking it as the cause."
        )
    if release.split(".")[:2] == series.split("."):
        return f" The text names ROCm {release}, of the {series} series it was reported for."
    return (
        f" The text names ROCm {release}, not the {series} series the bug was reported for, "
        "so it is not known to be the cause there: read the modes from the driver "
        "(cat /sys/bus/pci/devices/*/current_compute_partition and "
        "current_memory_partition)."
    )


PARTITIONED = ("gfx942", "gfx950")
"""The targets of the GPUs that have compute and memory partitions (MI300 and MI350)."""


def not_partitioned(report: SmiReport) -> bool:
    """Whether the devices the text identifies (by PCI ID or gfx) are all GPUs without
    partitions, so that an N/A there is no partition-reporting bug."""
    from . import chips

    targets = {d.gfx for d in report.devices if d.gfx}
    for d in report.devices:
        chip = chips.by_pci_id(d.did) if d.did and d.did != "N/A" else None
        if chip and chip.gfx:
            targets.add(chip.gfx)
    return bool(targets) and not targets & set(PARTITIONED)


def na_sources(report: SmiReport) -> tuple[str, ...]:
    if not report.na_partitions:
        return ()
    if not_partitioned(report):
        return ("https://github.com/ROCm/legacy-rocm-build/issues/4878",)
    if report.na_tool == "amd-smi partition":
        return (PARTITION_NA_BUG,)
    extra = (ROCM_SMI_NA_BUG,) if report.na_tool == "rocm-smi" else ()
    return (NA_BUG, NA_BUG_FIX) + extra


def topo_sources(report: SmiReport) -> tuple[str, ...]:
    return (TOPO_TPX_BUG,) if report.xxxx_links else ()


def explain(report: SmiReport) -> list[str]:
    """What the partitioning means, in sentences (with :func:`na_words` where the tool
    printed partitions as ``N/A``)."""
    out = _explain(report)
    extra = [w for w in (na_words(report), topo_words(report)) if w]
    if extra and out == [_NOTHING]:
        return extra
    return out + extra


_NOTHING = "no device, partition mode or topology table recognised in the text"


def _pairs(report: SmiReport) -> int:
    return sum(report.links.values()) + report.xxxx_links


def _explain(report: SmiReport) -> list[str]:
    lay = layout(report)
    n = len(report.devices)
    compute = sorted(lay.compute)
    memory = sorted(lay.memory)
    if not n and not report.topology_bdfs and not (report.links or report.xxxx_links):
        return [_NOTHING]
    if not n and report.topology_bdfs:
        gpus = len(report.topology_bdfs)
        where = "in the topology tables; no partition mode in the text"
        return [f"{counted(gpus, 'physical GPU')} {where}"]
    if not n:
        return [
            f"{counted(_pairs(report), 'GPU pair')} in rocm-smi --showtopo; "
            "no partition mode in the text"
        ]
    mode = compute[0] if len(compute) == 1 else None
    physical = len(lay.groups) or (len(report.topology_bdfs) or None)
    per_gpu = n // physical if physical and n % physical == 0 else None
    mem = f" (memory {', '.join(memory)})" if memory else ""
    if physical:
        named = mode or "/".join(compute) or "an unknown"
        head = f"{counted(physical, 'physical GPU')} in {named} mode"
        out = [
            f"{head}{mem}: {counted(n, 'logical device')}"
            + (f", {per_gpu} per GPU." if per_gpu else ".")
        ]
    else:
        named = mode or "/".join(compute) or "an unknown"
        out = [f"{counted(n, 'logical device')} in {named} mode{mem}."]
    out.append(
        f"Every program sees {counted(n, 'GPU')}: torch.cuda.device_count() is {n}, and "
        f"torchrun --nproc-per-node {n} starts one rank on each."
    )
    if per_gpu and per_gpu > 1:
        first = lay.groups[0] if lay.groups else list(range(per_gpu))
        where = "all on the first physical GPU" if physical <= per_gpu else "not one per GPU"
        out[-1] += f" --nproc-per-node {physical} would use devices 0-{physical - 1}, {where}."
        out.append(_share_words(report, per_gpu, mode) + _memory_words(memory, per_gpu))
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


_PRODUCTS = {
    # PCI device ID -> (name, CUs, GB of HBM, {partitions per GPU: mode})
    "0x74a1": ("MI300X", MI300X_CUS_PER_XCD * MI300X_XCDS, MI300X_HBM_GB, MODES_BY_COUNT),
    "0x74a0": ("MI300A", 228, 128, {3: "TPX", 6: "CPX"}),
}


def _share_words(report: SmiReport, per_gpu: int, mode: str | None) -> str:
    """Each logical device's share of its GPU, with the product's numbers where the
    device ID names it (MI300X where nothing names another product and the count fits)."""
    dids = {d.did for d in report.devices if d.did}
    did = dids.pop() if len(dids) == 1 else None
    words = f"Each logical device has 1/{per_gpu} of its GPU's compute and memory"
    name, cus, gb, modes = _PRODUCTS.get(did or "0x74a1", (None, 0, 0, {}))
    if name is None or per_gpu not in modes or (mode and modes[per_gpu] != mode):
        return words + "."
    known = "" if mode else f"; {per_gpu} per GPU is {modes[per_gpu]} mode on an {name}"
    return (
        f"{words} (on an {name}: {cus // per_gpu} of {cus} CUs, {gb // per_gpu} of {gb} GB){known}."
    )


def topo_words(report: SmiReport) -> str:
    """The sentence for ``XXXX`` link types (empty where there are none)."""
    if not report.xxxx_links:
        return ""
    return (
        f"rocm-smi --showtopo printed {counted(report.xxxx_links, 'GPU pair')} as XXXX: the "
        "partitions of one GPU, a known rocm-smi bug (its 6.1.0 notes: --showtopo does not "
        "display correct information when the MI300 driver is in TPX mode), not a missing link."
        + release_words(report.release, TOPO_BUG_RELEASE)
    )


TOPO_BUG_RELEASE = "6.1.0"
"""The release whose notes list the ``--showtopo`` TPX bug (:data:`TOPO_TPX_BUG`)."""


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
    cites = (OVERVIEW, QUICK_START, BLOG) + na_sources(report) + topo_sources(report)
    out.append(f"  sources: {', '.join(cites)}")
    return "\n".join(out)


def check(report: SmiReport, rocminfo_gpus: int | None = None) -> Check:
    """The "GPU partitions" check: ok, or warn with the mismatches."""
    found = findings(report, rocminfo_gpus)
    head = explain(report)[0]
    for words in (na_words(report), topo_words(report)):
        if words and words != head:
            head += " " + words
    if not found:
        status = INFO if report.na_partitions or not report.devices else OK
        cites = (OVERVIEW,) + na_sources(report) + topo_sources(report)
        return Check("GPU partitions", status, head, cites, "partitions")
    sources = tuple(dict.fromkeys(s for f in found for s in f.sources)) or (OVERVIEW,)
    sources += na_sources(report) + topo_sources(report)
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
    "rocm-smi --showhw",
)
