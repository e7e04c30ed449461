"""Read the output of ``rocminfo``: which CPUs and GPUs the ROCm runtime can see.

``rocminfo`` prints a fixed, human-oriented layout::

    ROCk module is loaded                    <- or "ROCk module version 6.8.5 is loaded"
    =====================
    HSA System Attributes
    =====================
    Runtime Version:         1.14
    ...
    ==========
    HSA Agents
    ==========
    *******
    Agent 1
    *******
      Name:                    AMD EPYC 7452 32-Core Processor
      Device Type:             CPU
      Pool Info:
        Pool 1
          Segment:                 GLOBAL; FLAGS: FINE GRAINED
      ISA Info:
    *******
    Agent 2
    *******
      Name:                    gfx90a
      Marketing Name:          AMD Instinct MI210
      Compute Unit:            104
      ...
      ISA Info:
        ISA 1
          Name:                    amdgcn-amd-amdhsa--gfx90a:sramecc+:xnack-
    *** Done ***

:func:`parse` reads that text with a small line-oriented state machine and never
raises on odd input; :func:`run` runs the tool and turns every failure (not
installed, non-zero exit, timeout, garbage) into a report whose ``error`` says
what happened. What it reads is an
:class:`~rocm_dl_guide.doctor.agents.RocminfoReport`
(:mod:`~rocm_dl_guide.doctor.agents`); running a tool is
:func:`~rocm_dl_guide.doctor.tools.capture`'s job, and real outputs for
several machines ship with the package (:mod:`~rocm_dl_guide.doctor.samples`).
"""

from __future__ import annotations

import re

from .agents import Agent, RocminfoError, RocminfoReport
from .paste import clean
from .tools import Capture, capture, exit_status

__all__ = ["agents_table", "global_pool_kib", "parse", "report_from", "run"]


# ---------------------------------------------------------------------------
# Cleaning the text
# ---------------------------------------------------------------------------


def _clean_lines(text: str) -> list[str]:
    """Split into lines as rocminfo printed them (:func:`~rocm_dl_guide.doctor.paste.clean`:
    no colours, CR, control bytes, quote markers), without trailing blanks."""
    return [line.expandtabs(8).rstrip() for line in clean(text).split("\n")]


# ---------------------------------------------------------------------------
# Recognising lines
# ---------------------------------------------------------------------------

# "Name:   gfx90a", "WatchPts on Addr. Ranges:1", "Packet Processor uCode:: 138".
# The key has no colon; the value may (ISA names: "...gfx90a:sramecc+:xnack-").
_KEY_VALUE_RE = re.compile(r"^(?P<key>[^:]*[^:\s])\s*:+\s*(?P<value>.*)$")
_AGENT_HEADER_RE = re.compile(r"^\**\s*Agent\s+(?P<index>\d+)\s*\**$", re.IGNORECASE)
_RULE_RE = re.compile(r"^(?:=+|\*+)$")
_DONE_RE = re.compile(r"^\*+\s*Done\s*\*+$", re.IGNORECASE)
_MODULE_RE = re.compile(
    r"^(?:ROCk|hygon)\s+module\b(?:\s+version\s+(?P<version>\S+))?\s+is\s+(?P<not>NOT\s+)?loaded",
    re.IGNORECASE,
)
_GFX_NAME_RE = re.compile(r"^(gfx[0-9a-z]+)\b", re.IGNORECASE)
_ISA_GFX_RE = re.compile(r"--(gfx[0-9a-z]+(?:-[0-9a-z]+)*)", re.IGNORECASE)
_INT_RE = re.compile(r"^\s*(\d+)")

_KFD_RE = re.compile(r"Unable to open /dev/kfd read-write:\s*(?P<reason>.*)$", re.IGNORECASE)
_HSA_FAIL_RE = re.compile(r"hsa api call failure at:?\s*(?P<where>.*)$", re.IGNORECASE)
_HSA_STATUS_RE = re.compile(
    r"Call returned\s+(?P<status>HSA_STATUS_[A-Z0-9_]+)\s*:?\s*(?P<text>.*)$", re.IGNORECASE
)
# ROCm 7.x: "hsa_init Failed, possibly no supported GPU devices".
_HSA_INIT_RE = re.compile(r"hsa_init\s+failed[,:]?\s*(?P<text>.*)$", re.IGNORECASE)
_NOT_MEMBER_RE = re.compile(r'is not member of "?(?P<group>[\w-]+)"? group', re.IGNORECASE)
_MEMBER_RE = re.compile(r'^(?P<user>\S+) is member of "?(?P<group>[\w-]+)"? group', re.IGNORECASE)
_KMOD_RE = re.compile(r"could not get list of modules:\s*(?P<reason>.*)$", re.IGNORECASE)
_NOT_FOUND_RE = re.compile(r"rocminfo:?\s*(?:command )?not found", re.IGNORECASE)

# Top-level agent keys with their own Agent field.
_FIELD_KEYS = {
    "name": "name",
    "marketing name": "marketing_name",
    "vendor name": "vendor",
    "device type": "device_type",
    "compute unit": "compute_units",
    "uuid": "uuid",
}
_MISSING = {"", "n/a", "na", "none", "unknown"}

# Parser states.
_PREAMBLE, _SYSTEM, _AGENTS = "preamble", "system", "agents"


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _missing(value: str | None) -> bool:
    return value is None or value.strip().lower() in _MISSING


def _to_int(value: str | None) -> int | None:
    """``"104"`` or ``"104(0x68)"`` -> 104; ``"N/A"``/garbage -> None."""
    if _missing(value):
        return None
    match = _INT_RE.match(value or "")
    return int(match.group(1)) if match else None


def _gfx_from(name: str, isas: list[str]) -> str | None:
    """The gfx target: from a ``gfxNNN`` Name, else from the first specific ISA name."""
    match = _GFX_NAME_RE.match(name.strip())
    if match:
        return match.group(1).lower()
    found = [m.group(1).lower() for isa in isas if (m := _ISA_GFX_RE.search(isa))]
    specific = [g for g in found if not g.endswith("-generic")]
    if specific:
        return specific[0]
    return found[0] if found else None


class _AgentBuilder:
    """Collects the lines of one ``Agent N`` block."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.fields: dict[str, str] = {}
        self.extra: dict[str, str] = {}
        self.isas: list[str] = []
        self.base_indent: int | None = None
        self.section: str | None = None  # the top-level key whose sub-lines we are in
        self.pending_header: str | None = None  # empty-valued key, maybe a section
        self.segment = ""  # the pool's "Segment:" while in Pool Info
        self.global_kib: int | None = None  # the largest GLOBAL pool

    def feed(self, line: str) -> None:
        indent = _indent(line)
        stripped = line.strip()
        if self.base_indent is None:
            self.base_indent = indent
        match = _KEY_VALUE_RE.match(stripped)

        if indent > self.base_indent:
            # A sub-section line (Cache Info / Pool Info / ISA Info / per-Dimension).
            if self.pending_header is not None:
                # The empty-valued key just before was a section header, not a field.
                if self.extra.get(self.pending_header) == "":
                    del self.extra[self.pending_header]
                self.section = self.pending_header
                self.pending_header = None
            self._sub_line(match)
            return

        # A top-level line of this agent.
        self.pending_header = None
        if match is None:
            return
        key, value = match.group("key").strip(), match.group("value").strip()
        lower = key.lower()
        self.section = None
        if lower in ("isa info", "pool info", "cache info"):
            self.pending_header = key
            self.section = key
            return
        if lower == "name" and _ISA_GFX_RE.search(value) and "name" in self.fields:
            # Indentation lost in a paste: an ISA name at the agent's level.
            self.isas.append(value)
            return
        if lower in _FIELD_KEYS:
            # First wins: a sub-section's key can never overwrite the agent's own.
            self.fields.setdefault(lower, value)
            return
        if key not in self.extra:
            self.extra[key] = value
        if value == "":
            self.pending_header = key

    def _sub_line(self, match: re.Match[str] | None) -> None:
        if match is None:
            return
        key, value = match.group("key").strip(), match.group("value").strip()
        if key == "Segment":
            self.segment = value
        elif key == "Size" and "GLOBAL" in self.segment and (kib := _to_int(value)) is not None:
            self.global_kib = max(self.global_kib or 0, kib)
        if key.lower() == "name" and (self.section or "").lower() == "isa info":
            self.isas.append(value)
        elif key.lower() == "name" and _ISA_GFX_RE.search(value):
            self.isas.append(value)

    def build(self) -> Agent:
        name = self.fields.get("name", "")
        device_type = self.fields.get("device type", "")
        uuid = self.fields.get("uuid")
        gfx = None if device_type.strip().upper() == "CPU" else _gfx_from(name, self.isas)
        return Agent(
            index=self.index,
            name=name,
            marketing_name=self.fields.get("marketing name", ""),
            vendor=self.fields.get("vendor name", ""),
            device_type=device_type,
            compute_units=_to_int(self.fields.get("compute unit")),
            gfx=gfx,
            uuid=None if _missing(uuid) else uuid,
            extra=dict(self.extra),
            isas=tuple(self.isas),
            global_kib=self.global_kib,
        )


def _lower_first(sentence: str) -> str:
    """Lower-case the first letter of a sentence unless it starts an acronym (ROCm)."""
    if len(sentence) > 1 and sentence[0].isupper() and sentence[1].islower():
        return sentence[0].lower() + sentence[1:]
    return sentence


def _kfd_error(reason: str, not_member: str | None, member: str | None = None) -> str:
    reason = reason.strip().rstrip(".") or "unknown reason"
    low = reason.lower()
    if ("permission" in low or "not permitted" in low) and member:
        hint = (
            f'rocminfo says the user is in the "{member}" group already, so adding it again '
            "changes nothing: the session may have started before it was added (log out and in), "
            "or a container lacks --device=/dev/kfd or --group-add for the group that owns it"
        )
    elif "permission" in low or "not permitted" in low:
        group = not_member or "render"
        hint = (
            f'the user must be in the "{group}" (and "video") group, and a container needs '
            "--device=/dev/kfd --device=/dev/dri plus --group-add for those groups"
        )
    elif "no such file" in low:
        hint = (
            "the amdgpu kernel driver is not loaded, or /dev/kfd was not passed into the "
            "container (--device=/dev/kfd)"
        )
    elif "cannot allocate memory" in low or "invalid argument" in low:
        hint = (
            "not a permission problem: the kernel driver refused to open the device; dmesg "
            "(grep -i kfd) says why"
        )
    else:
        hint = "check that the amdgpu driver is loaded and /dev/kfd is accessible"
    return f"Cannot open /dev/kfd ({reason}): {hint}."


def _hsa_error(status: str | None, text: str | None) -> str:
    if status is None:
        detail = (text or "").strip().rstrip(".;")
        if detail:
            return f"The ROCm runtime (HSA) failed to start ({detail})."
        return "The ROCm runtime (HSA) failed to start (rocminfo reported an hsa api call failure)."
    detail = (text or "").strip()
    first = detail.split(". ")[0].rstrip(".") if detail else ""
    if first:
        return f"The ROCm runtime (HSA) failed to start: {status} ({first})."
    return f"The ROCm runtime (HSA) failed to start: {status}."


class _Parser:
    """One :func:`parse` run: a line-oriented state machine over rocminfo's sections.

    Each non-blank line is tried, in order, as a status or failure line (these
    may appear anywhere), as a structural line (rules, section titles, ``Agent
    N`` headers, ``*** Done ***``), and finally as content of the section it
    is in: an agent's block, the system attributes, or a free-standing note.
    """

    def __init__(self) -> None:
        self.state = _PREAMBLE
        self.system: dict[str, str] = {}
        self.notes: list[str] = []
        self.agents: list[Agent] = []
        self.current: _AgentBuilder | None = None
        self.module_loaded: bool | None = None
        self.module_version: str | None = None
        self.saw_text = False
        self.saw_structure = False
        self.complete = False
        # Error evidence, collected wherever it appears.
        self.kfd_reason: str | None = None
        self.hsa_failed = False
        self.hsa_status: str | None = None
        self.hsa_text: str | None = None
        self.not_member: str | None = None
        self.member: str | None = None
        self.kmod_reason: str | None = None
        self.not_installed = False

    def feed(self, line: str) -> None:
        """Take one cleaned line of the output."""
        stripped = line.strip()
        if not stripped:
            return
        self.saw_text = True
        if self._module_line(stripped) or self._failure_line(stripped):
            return
        if self._structure_line(stripped):
            return
        if self.current is not None:
            self.current.feed(line)
        elif self.state == _SYSTEM:
            self._system_line(stripped)
        else:
            self.notes.append(stripped)

    def _module_line(self, stripped: str) -> bool:
        """``ROCk module [version X] is [NOT] loaded``."""
        module = _MODULE_RE.match(stripped)
        if not module:
            return False
        loaded = module.group("not") is None
        # "NOT loaded" wins if both appear (e.g. two runs pasted together).
        previous = self.module_loaded
        self.module_loaded = loaded if previous is None else (previous and loaded)
        self.module_version = module.group("version") or self.module_version
        self.saw_structure = True
        return True

    def _failure_line(self, stripped: str) -> bool:
        """A line that is evidence of a failure; kept as a note."""
        if (m := _KFD_RE.search(stripped)) is not None:
            self.kfd_reason = m.group("reason")
        elif _HSA_FAIL_RE.search(stripped) is not None:
            self.hsa_failed = True
        elif (m := _HSA_INIT_RE.search(stripped)) is not None:
            self.hsa_failed = True
            reason = m.group("text").strip() or "no reason given"
            self.hsa_text = self.hsa_text or f"hsa_init failed: {reason}"
        elif (m := _HSA_STATUS_RE.search(stripped)) is not None:
            self.hsa_status, self.hsa_text = m.group("status").upper(), m.group("text")
        elif (m := _NOT_MEMBER_RE.search(stripped)) is not None:
            self.not_member = m.group("group")
        elif (m := _MEMBER_RE.search(stripped)) is not None:
            self.member = m.group("group")
        elif (m := _KMOD_RE.search(stripped)) is not None:
            self.kmod_reason = m.group("reason").strip()
        elif _NOT_FOUND_RE.search(stripped) and self.state == _PREAMBLE:
            self.not_installed = True
        else:
            return False
        self.notes.append(stripped)
        return True

    def _structure_line(self, stripped: str) -> bool:
        """Separators, section titles, ``Agent N`` headers and the end marker."""
        if _RULE_RE.match(stripped):
            return True  # "=====" and "*******" separators
        lowered = stripped.lower()
        header = _AGENT_HEADER_RE.match(stripped)
        if _DONE_RE.match(stripped):
            self.complete = True
        elif lowered == "hsa system attributes":
            self.state = _SYSTEM
        elif lowered == "hsa agents" or header:
            self.state = _AGENTS
        else:
            return False
        self._finish_agent()
        self.saw_structure = True
        if header:
            self.current = _AgentBuilder(int(header.group("index")))
        return True

    def _system_line(self, stripped: str) -> None:
        """A line of ``HSA System Attributes``: ``Key: value`` (first wins) or a note."""
        kv = _KEY_VALUE_RE.match(stripped)
        if kv:
            self.system.setdefault(kv.group("key").strip(), kv.group("value").strip())
        else:
            self.notes.append(stripped)

    def _finish_agent(self) -> None:
        if self.current is not None:
            self.agents.append(self.current.build())
            self.current = None

    def _error(self) -> str | None:
        """The error sentence, most specific cause first (None if all is well)."""
        if self.kfd_reason is not None:
            return _kfd_error(self.kfd_reason, self.not_member, self.member)
        if self.hsa_failed or self.hsa_status is not None:
            return _hsa_error(self.hsa_status, self.hsa_text)
        if self.agents:
            return None
        if self.module_loaded is False:
            error = (
                "The amdgpu kernel driver (ROCk module) is not loaded, so ROCm cannot see any GPU"
            )
            if self.kmod_reason:
                error += f" (rocminfo could not read the kernel module list: {self.kmod_reason})"
            return error + "."
        if self.not_installed:
            return "rocminfo is not installed (the shell reported 'command not found')."
        if not self.saw_text:
            # Whether rocminfo ran is not known here (an empty saved file reads the same).
            return "No rocminfo output to read: the text is empty."
        if self.saw_structure:
            return "rocminfo listed no agents: the output has no 'Agent N' blocks (truncated?)."
        return (
            "The text does not look like rocminfo output "
            "(no 'HSA Agents' section or 'Agent N' blocks were found)."
        )

    def report(self) -> RocminfoReport:
        """End of input: close the last agent and build the report."""
        self._finish_agent()
        runtime_version = self.system.get("Runtime Version")
        return RocminfoReport(
            runtime_version=None if _missing(runtime_version) else runtime_version,
            kernel_module_loaded=self.module_loaded,
            agents=tuple(self.agents),
            error=self._error(),
            kernel_module_version=self.module_version,
            system=self.system,
            notes=tuple(self.notes),
            complete=self.complete,
            group_membership=(
                (self.member, True)
                if self.member
                else (self.not_member, False)
                if self.not_member
                else None
            ),
        )


def _as_text(text: object) -> str:
    """``bytes`` decoded as UTF-8 (with replacement characters); a non-text raises."""
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8", errors="replace")
    if not isinstance(text, str):
        raise RocminfoError(
            f"parse() needs the text printed by rocminfo, not {type(text).__name__}"
        )
    return text


def parse(text: str | bytes) -> RocminfoReport:
    """Parse the text printed by ``rocminfo`` (stdout, optionally with stderr).

    Never raises on odd input: garbled, truncated, empty or binary-looking text
    gives a report with whatever could be read, and ``error`` set when the text
    shows a failure or holds nothing recognisable. ``bytes`` are decoded as
    UTF-8 with replacement characters. Anything other than ``str``/``bytes``
    raises :class:`RocminfoError`.
    """
    parser = _Parser()
    for line in _clean_lines(_as_text(text)):
        parser.feed(line)
    return parser.report()


# ---------------------------------------------------------------------------
# Running the tool
# ---------------------------------------------------------------------------


def _failed(error: str, **kwargs: object) -> RocminfoReport:
    return RocminfoReport(
        runtime_version=None, kernel_module_loaded=None, agents=(), error=error, **kwargs
    )


def report_from(cap: Capture) -> RocminfoReport:
    """Parse a :class:`Capture` as :func:`run` does, exit status included."""
    if cap.text is None:
        return _failed(cap.error or f"Not collected: {cap.executable} did not run here.")
    report = parse(cap.text)
    code = cap.returncode
    if not cap.text.strip() and code == 0:
        return _failed(f"{cap.executable} ran and printed nothing (exit status 0).")
    if code in (0, None):
        return report
    what = exit_status(code)
    reason = report.error or "no agents could be listed"
    return RocminfoReport(
        runtime_version=report.runtime_version,
        kernel_module_loaded=report.kernel_module_loaded,
        agents=(),
        error=f"{cap.executable} {what}: {_lower_first(reason.rstrip('.'))}.",
        kernel_module_version=report.kernel_module_version,
        system=report.system,
        notes=report.notes,
        complete=report.complete,
    )


def run(executable: str = "rocminfo", timeout: float = 30) -> RocminfoReport:
    """Run ``rocminfo`` and parse what it prints. Never raises for a failed run.

    A missing executable, a non-zero exit status, a timeout or output that is
    not text give a report with ``agents=()`` and ``error`` saying what
    happened in one sentence. ``executable`` may be a name looked up on PATH or
    a path. Only misuse (an empty name, a non-positive timeout) raises
    :class:`RocminfoError`. (:func:`capture`, then :func:`report_from`.)
    """
    return report_from(capture(executable, timeout))


def agents_table(report: RocminfoReport | str) -> list[dict]:
    """One row per agent, for a table on a page (a text is parsed first).

    Keys: ``agent``, ``type``, ``name``, ``marketing_name``, ``gfx``, ``compute_units``.
    """
    if isinstance(report, str):
        report = parse(report)
    if not isinstance(report, RocminfoReport):
        raise RocminfoError(
            f"agents_table() needs a RocminfoReport or rocminfo text, not {type(report).__name__}"
        )
    return [
        {
            "agent": a.index,
            "type": a.device_type,
            "name": a.name,
            "marketing_name": a.marketing_name,
            "gfx": a.gfx,
            "compute_units": a.compute_units,
        }
        for a in report.agents
    ]


_AGENT_HEADER = re.compile(r"^\s*Agent\s+(\d+)\s*$")
_POOL_SIZE = re.compile(r"^\s*Size:\s*(\d+)\(0x[0-9a-fA-F]+\)\s*KB\s*$")


def global_pool_kib(text: str | None) -> dict[int, int]:
    """The largest ``GLOBAL`` memory pool of each agent, in KiB, keyed by the ``Agent N``
    number: for a CPU agent that is the system memory, for an APU's integrated GPU the
    system memory the driver lets it use. Agents without such a pool are left out."""
    sizes: dict[int, int] = {}
    agent, segment = None, ""
    for line in _clean_lines(text or ""):
        header = _AGENT_HEADER.match(line)
        if header:
            agent, segment = int(header.group(1)), ""
            continue
        stripped = line.strip()
        if stripped.startswith("Segment:"):
            segment = stripped
            continue
        size = _POOL_SIZE.match(line)
        if size and agent is not None and "GLOBAL" in segment:
            sizes[agent] = max(sizes.get(agent, 0), int(size.group(1)))
    return sizes
