"""Everything the doctor learns about this machine, in one :class:`SystemReport`.

:func:`collect` gathers it: ROCm, the kernel driver and the PCI GPUs
(:mod:`~rocm_dl_guide.doctor.installed`), ``rocminfo``'s agents
(:mod:`~rocm_dl_guide.doctor.rocminfo`), the frameworks, probed in child
processes (:mod:`~rocm_dl_guide.doctor.frameworks`), device nodes, groups and
other host facts (:mod:`~rocm_dl_guide.doctor.hostfacts`), the real workload's
result (:mod:`~rocm_dl_guide.doctor.workload`) and the output of
``amd-smi``/``rocm-smi`` (:func:`collect_smi`). Every probe is defensive: a
missing tool, a tool that fails, a framework that crashes at import, or output
that makes no sense becomes a recorded ``error`` string, never an exception.
:func:`gpu_inventory` is the reader-facing view of the GPUs it found.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace

from . import agents, hostfacts, rocminfo, tools
from .frameworks import FRAMEWORKS, FrameworkInfo, probe_all
from .installed import KernelDriverInfo, RocmInfo, find_tool, kernel_driver, pci_gpus, rocm_version
from .words import counted

# The report ---------------------------------------------------------------


@dataclass
class SystemReport:
    rocm: RocmInfo
    kernel_driver: KernelDriverInfo
    rocminfo_source: str
    rocminfo: agents.RocminfoReport
    pci_gpus: list[dict]
    frameworks: dict[str, FrameworkInfo]
    host: hostfacts.HostFacts | None = None
    """Device nodes, groups, container, host settings (None: not collected)."""
    rocminfo_capture: tools.Capture | None = None
    """rocminfo's output verbatim, when it was run here or read from a snapshot."""
    gpu_workload: list[dict] | None = None
    """The real workload's result per visible GPU (:mod:`~rocm_dl_guide.doctor.workload`);
    ``None``: not run (PyTorch saw no GPU, or a snapshot from before the check)."""
    log: dict | None = None
    """The reader's own error text (``doctor --log``): ``{"source", "text"}``."""
    smi: dict | None = None
    """``amd-smi``/``rocm-smi`` output, read by :mod:`~rocm_dl_guide.doctor.smi`:
    ``{"source", "text"}`` from the reader (``doctor --smi``), or what :func:`collect_smi`
    ran here, with ``"error"`` (one line, or None); ``None``: not collected."""

    def with_rocminfo(self, text: str, source: str = "saved rocminfo output") -> SystemReport:
        """The same facts with ``text`` (a saved ``rocminfo`` output) in place of
        this machine's: what the checks see on another node, without probing
        every framework again."""
        cap = tools.Capture("rocminfo", text=text)
        return replace(
            self, rocminfo_source=source, rocminfo=rocminfo.report_from(cap), rocminfo_capture=cap
        )

    def gpus(self) -> list[dict]:
        """GPUs from ``rocminfo``; failing that, the GPUs PyTorch sees."""
        gpus = [
            {
                "gfx": a.gfx,
                "marketing_name": a.marketing_name or None,
                "compute_units": a.compute_units,
                "vendor": a.vendor or None,
                "source": self.rocminfo_source,
            }
            for a in self.rocminfo.gpus
        ]
        if gpus:
            return gpus
        torch_info = self.frameworks.get("pytorch")
        for dev in (torch_info.details.get("devices") or []) if torch_info else []:
            gpus.append(
                {
                    "gfx": dev.get("gfx"),
                    "marketing_name": dev.get("name"),
                    "compute_units": None,
                    "vendor": None,
                    "source": "pytorch",
                }
            )
        return gpus

    def to_dict(self) -> dict:
        return {
            "rocm": asdict(self.rocm),
            "kernel_driver": asdict(self.kernel_driver),
            "rocminfo": {
                "source": self.rocminfo_source,
                "runtime_version": self.rocminfo.runtime_version,
                "kernel_module_loaded": self.rocminfo.kernel_module_loaded,
                "agents": len(self.rocminfo.agents),
                "error": self.rocminfo.error,
            },
            "gpus": self.gpus(),
            "pci_gpus": self.pci_gpus,
            "frameworks": {k: asdict(v) for k, v in self.frameworks.items()},
            "gpu_workload": self.gpu_workload,
        }


def collect(
    rocminfo_text: str | None = None,
    rocminfo_source: str | None = None,
    python: str | None = None,
    frameworks: tuple[str, ...] = FRAMEWORKS,
    env: dict | None = None,
    run_smi: bool = True,
) -> SystemReport:
    """Gather everything. ``rocminfo_text`` replaces running ``rocminfo``;
    ``run_smi=False`` skips ``amd-smi``/``rocm-smi`` (:func:`collect_smi`)."""
    if rocminfo_text is None:
        cap = tools.capture(_find_rocminfo(env))
        source = "rocminfo"
    else:
        cap = tools.Capture("rocminfo", text=rocminfo_text)
        source = rocminfo_source or "saved rocminfo output"
    from . import workload

    found = probe_all(frameworks, python)
    torch_info = found.get("pytorch")
    seen = torch_info.details.get("devices") if torch_info and torch_info.installed else None
    return SystemReport(
        rocm=rocm_version(env),
        kernel_driver=kernel_driver(),
        rocminfo_source=source,
        rocminfo=rocminfo.report_from(cap),
        pci_gpus=pci_gpus(),
        frameworks=found,
        host=hostfacts.collect(env=env),
        rocminfo_capture=cap,
        gpu_workload=workload.run_all(len(seen), python) if seen else None,
        smi=collect_smi(env) if run_smi else None,
    )


def _find_rocminfo(env: dict | None = None) -> str:
    """``rocminfo`` on PATH, else the copy in the ROCm tree, else the bare name."""
    return find_tool("rocminfo", env) or "rocminfo"


SMI_TIMEOUT_S = 20.0
SMI_COMMANDS = (
    ("amd-smi", (("static", "--partition"), ("list",))),
    (
        "rocm-smi",
        (("--showbus", "--showcomputepartition", "--showmemorypartition"), ("--showtopo",)),
    ),
)
"""The commands :func:`collect_smi` runs, tool by tool: ``amd-smi`` (ROCm 6.x and
later), else (not installed, or every command failed) ``rocm-smi`` (older installs)."""


def _smi_run(path: str, args: tuple[str, ...], timeout: float) -> tuple[str, str | None]:
    """One smi command: what it printed (may be empty) and, where it failed, one line."""
    cap = tools.capture(path, timeout, args)
    if cap.text is None:
        return "", cap.error
    if not cap.returncode:
        return cap.text, None
    last = [line for line in cap.text.splitlines() if line.strip()][-1:] or ["no output"]
    shown = " ".join((path, *args))
    return cap.text, f"{shown} {tools.exit_status(cap.returncode)}: {tools.short(last[0], 160)}"


def collect_smi(env: dict | None = None, timeout: float = SMI_TIMEOUT_S) -> dict | None:
    """Run :data:`SMI_COMMANDS` where the tool is on PATH or in the ROCm tree (each
    within ``timeout`` seconds) and keep their outputs one after another, each under
    a ``$ command`` line: ``{"source", "text", "error"}``, ``error`` one line naming
    the commands that failed or timed out (None when none did). None: neither tool
    is installed."""
    ran, texts, errors = [], [], []
    for name, commands in SMI_COMMANDS:
        path = find_tool(name, env)
        if path is None:
            continue
        worked = False
        for args in commands:
            text, error = _smi_run(path, args, timeout)
            shown = " ".join((name, *args))
            ran.append(shown)
            if text.strip():
                texts.append(f"$ {shown}\n{text.rstrip()}\n")
            errors += [error.rstrip(".")] if error else []
            worked = worked or error is None
        if worked:
            break
    if not ran:
        return None
    return {
        "source": "; ".join(ran) + " (run by doctor)",
        "text": "\n".join(texts),
        "error": "; ".join(errors) or None,
    }


# A reader-facing view of the GPUs ------------------------------------------


def gpu_inventory(sysrep: SystemReport | None = None) -> list[dict]:
    """Every GPU this machine shows, one row per (source, device).

    Three independent views are listed side by side because each can fail on
    its own: the PCI bus (hardware present), ``rocminfo`` (ROCm's runtime sees
    it) and PyTorch (the framework can compute on it).
    """
    if sysrep is None:
        sysrep = collect(frameworks=("pytorch",), run_smi=False)
    rows = []
    for dev in sysrep.pci_gpus:
        rows.append(
            {
                "seen by": "PCI bus (sysfs)",
                "device": f"{dev['vendor']} device {dev['device_id']}",
                "detail": f"PCI {dev['address']}, class {dev['class']}",
            }
        )
    for agent in sysrep.rocminfo.gpus:
        cu = f", {agent.compute_units} CUs" if agent.compute_units else ""
        rows.append(
            {
                "seen by": "ROCm runtime (rocminfo)",
                "device": agent.marketing_name or agent.name,
                "detail": f"{agent.gfx or 'gfx unknown'}{cu}",
            }
        )
    torch_info = sysrep.frameworks.get("pytorch")
    if torch_info and torch_info.installed:
        for dev in torch_info.details.get("devices") or []:
            arch = dev.get("gfx") or ""
            rows.append(
                {
                    "seen by": "PyTorch",
                    "device": dev.get("name"),
                    "detail": ", ".join(x for x in (arch, f"{dev.get('memory_gib')} GiB") if x),
                }
            )
    return rows


def gpu_inventory_summary(sysrep: SystemReport, rows: list[dict]) -> str:
    """One plain paragraph about :func:`gpu_inventory`'s rows."""
    if rows:
        seen: dict[str, int] = {}
        for r in rows:
            seen[r["seen by"]] = seen.get(r["seen by"], 0) + 1
        parts = [f"{who}: {counted(n, 'GPU')}" for who, n in sorted(seen.items())]
        return "GPUs found by each view. " + "; ".join(parts) + "."
    torch_info = sysrep.frameworks.get("pytorch")
    if torch_info and torch_info.installed:
        torch_says = "PyTorch sees no GPU"
    else:
        why = torch_info.error if torch_info else "not checked"
        torch_says = f"PyTorch could not be asked ({why})"
    return (
        "No GPU was found on this machine. The PCI bus shows no display controller or "
        f"accelerator. ROCm: {sysrep.rocminfo.error or 'rocminfo lists no GPU agent.'} "
        f"{torch_says}. The examples in this build ran on the CPU."
    )
