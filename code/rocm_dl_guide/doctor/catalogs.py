"""Error catalogs derived from upstream sources: HIP's error codes, the HSA
runtime's statuses, ROCr's and the HIP runtime's fault messages, and the amdgpu
kernel driver's messages, each with the family it belongs to, what that family
means and what to collect next.

The catalog (``data/error-catalog.json``) is generated from exact excerpts of
upstream files stored under ``data/upstream/`` (each folder's ``SOURCES.json``
gives repository, commit, path, URL and line range):

- HIP: ``projects/hip/include/hip/hip_runtime_api.h`` (the ``hipError_t`` enum)
  and ``projects/clr/hipamd/src/hip_error.cpp`` (``ihipGetErrorString``), from
  ROCm/rocm-systems;
- the HIP runtime (ROCm/clr): ``rocclr/device/rocm/rocdevice.cpp`` (the queue
  abort message) and ``rocclr/utils/flags.hpp`` (its logging switches);
- ROCr (ROCm/rocm-systems, ``projects/rocr-runtime/runtime/hsa-runtime/``):
  ``inc/hsa.h`` and ``inc/hsa_ext_amd.h`` (``hsa_status_t``),
  ``core/runtime/hsa.cpp`` (``hsa_status_string``) and ``core/runtime/runtime.cpp``
  (the memory-fault and hardware-exception messages and fault reasons);
- Linux (torvalds/linux): ``drivers/gpu/drm/amd/amdgpu/`` ``amdgpu_job.c``,
  ``amdgpu_device.c``, ``amdgpu_kms.c``, ``amdgpu_discovery.c``, ``mes_v11_0.c``,
  ``gmc_v9_0.c``, ``gmc_v11_0.c``, ``amdgpu_psp.c``,
  ``drivers/gpu/drm/amd/amdkfd/kfd_device.c`` and
  ``drivers/base/firmware_loader/main.c``;
- Linux 6.11's amdgpu as FreeBSD's drm-kmod carries it (freebsd/drm-kmod):
  ``gmc_v9_0.c``, ``gfxhub_v3_0.c``, ``mes_v12_0.c`` and ``soc15.c``, for
  message formats newer than the torvalds/linux versions the file index held.

What each family means and what to collect is written by hand in
:mod:`~rocm_dl_guide.doctor.catalog_families`.

``python -m rocm_dl_guide.doctor.catalogs --write`` regenerates the JSON;
``--check`` exits with 1 and names the entries that differ when the JSON is
not what the stored excerpts generate. The doctor uses :func:`lookup` (which
catalog entry a log line shows) and :func:`classify_source` (which layer an
unknown line comes from).
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
import sys
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

from . import catalog_families as fam
from . import catalog_parse as parse

DATA = Path(__file__).resolve().parent.parent / "data"
UPSTREAM = DATA / "upstream"
CATALOG_FILE = "data/error-catalog.json"
FOLDERS = ("hip", "clr", "rocr", "linux-amdgpu", "drm-kmod")
"""The folders under data/upstream/ that hold this catalog's excerpts."""
SECTIONS = ("hip", "hsa", "runtime", "kernel")
"""The catalog's entry lists; each entry has a unique ``name`` within its list."""
MIN_LITERAL = 12
"""A kernel message with less fixed text than this is only matched on a kernel line."""


class CatalogError(ValueError):
    """The stored excerpts do not make a valid catalog."""


def load_sources(upstream: Path = UPSTREAM) -> dict[str, dict]:
    """Every stored excerpt's record (from the folders' SOURCES.json), by key,
    after checking each excerpt still has the recorded SHA-256."""
    sources: dict[str, dict] = {}
    for folder in FOLDERS:
        listing = json.loads((upstream / folder / "SOURCES.json").read_text(encoding="utf-8"))
        for entry in listing["sources"]:
            path = upstream / folder / entry["file"]
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            if digest != entry["sha256"]:
                raise CatalogError(
                    f"{folder}/{entry['file']}: not the excerpt SOURCES.json "
                    "records (its sha256 differs)"
                )
            sources[entry["key"]] = {**entry, "excerpt": path}
    return sources


def cite(source: dict, line: int | None) -> dict:
    """The citation an entry carries: repository, commit, path and line."""
    return {
        "repo": source["repo"],
        "commit": source["commit"],
        "path": source["path"],
        "line": line,
    }


def source_url(citation: dict) -> str:
    """The GitHub URL of a citation, at its line when it has one."""
    url = f"https://github.com/{citation['repo']}/blob/{citation['commit']}/{citation['path']}"
    return url + (f"#L{citation['line']}" if citation.get("line") else "")


def _family(table: dict[str, str], name: str) -> str:
    if name not in table:
        raise CatalogError(f"{name}: no family for it in catalog_families")
    return table[name]


def hip_entries(sources: dict[str, dict]) -> list[dict]:
    """HIP's error codes: name, number, the header's description, the runtime's
    string (hipGetErrorString), family and sources."""
    header, strings = sources["hip-runtime-api"], sources["hip-error-strings"]
    members = parse.enum_members(parse.read_excerpt(header["excerpt"]))
    texts = parse.switch_strings(parse.read_excerpt(strings["excerpt"]))
    primary: dict[int, str] = {}
    entries = []
    for member in members:
        if member.value is None:  # hipErrorTbd: the marker after the last code
            continue
        first = primary.setdefault(member.value, member.name)
        text, text_line = texts.get(member.name) or texts.get(first) or ("", None)
        entry = {
            "name": member.name,
            "number": member.value,
            "description": member.doc,
            "runtime_string": text,
            "family": _family(fam.HIP_FAMILY, member.name),
            "source": cite(header, member.line),
            "runtime_string_source": cite(strings, text_line) if text else None,
        }
        if member.deprecated or first != member.name:
            entry["alias_of"] = first
        entries.append(entry)
    return entries


def hsa_entries(sources: dict[str, dict]) -> list[dict]:
    """The HSA runtime's statuses (core and AMD's): name, number, the header's
    description, the string hsa_status_string gives, family and sources."""
    strings = sources["hsa-status-strings"]
    texts = parse.switch_strings(parse.read_excerpt(strings["excerpt"]))
    entries = []
    for key in ("hsa-status", "hsa-status-amd"):
        header = sources[key]
        for member in parse.enum_members(parse.read_excerpt(header["excerpt"])):
            text, text_line = texts.get(member.name, ("", None))
            entries.append(
                {
                    "name": member.name,
                    "number": member.value,
                    "hex": f"0x{member.value:x}" if member.value is not None else None,
                    "description": member.doc,
                    "runtime_string": text,
                    "family": _family(fam.HSA_FAMILY, member.name),
                    "source": cite(header, member.line),
                    "runtime_string_source": cite(strings, text_line) if text else None,
                }
            )
    return entries


def _message(key: str, source: dict, stmt: parse.Statement, family: str) -> dict:
    slug = re.sub(r"[^a-z0-9]+", "-", stmt.format.lower()).strip("-")[:60].strip("-")
    return {
        "name": f"{key}:{slug}",
        "format": stmt.format.rstrip("\n"),
        "regex": parse.format_regex(stmt.format),
        "literal_length": parse.literal_length(stmt.format),
        "call": stmt.call,
        "family": family,
        "source": cite(source, stmt.line),
    }


def _classify(rules: tuple[tuple[str, str], ...], fmt: str, where: str) -> str:
    for text, family in rules:
        if text in fmt:
            return family
    raise CatalogError(f"{where}: no family in catalog_families for {fmt!r}")


def message_entries(sources: dict[str, dict], keys, rules) -> list[dict]:
    """The print statements of the excerpts ``keys``, each as an entry with its
    format string, the regex that finds its line, and its family."""
    entries = []
    for key in keys:
        for stmt in parse.print_statements(parse.read_excerpt(sources[key]["excerpt"])):
            family = _classify(rules, stmt.format, key)
            entries.append(_message(key, sources[key], stmt, family))
    return entries


def fault_reasons(sources: dict[str, dict]) -> list[dict]:
    """The reasons ROCr's fault and exception messages end with, each cited."""
    source = sources["rocr-fault-messages"]
    rows = parse.read_excerpt(source["excerpt"])
    reasons = []
    for number, text in rows:
        match = re.search(r'reason \+= "([^"]*)";', text)
        if match:
            reasons.append(
                {
                    "message": "memory access fault",
                    "reason": match.group(1),
                    "source": cite(source, number),
                }
            )
    for stmt in parse.print_statements(rows):
        if stmt.format.startswith("HW Exception"):
            for reason in stmt.literals:
                reasons.append(
                    {"message": "HW exception", "reason": reason, "source": cite(source, stmt.line)}
                )
    return reasons


def check_switches(sources: dict[str, dict]) -> None:
    """Fail unless each switch the advice names is in the stored flags excerpt."""
    text = sources["clr-flags"]["excerpt"].read_text(encoding="utf-8")
    for name in fam.SWITCHES:
        if not re.search(rf"release\(\w+, {name},", text):
            raise CatalogError(f"{name}: named in the advice, not in clr's flags.hpp excerpt")


def _unique(entries: list[dict], section: str) -> list[dict]:
    entries = sorted(entries, key=lambda e: e["name"])
    names = [e["name"] for e in entries]
    for a, b in zip(names, names[1:], strict=False):
        if a == b:
            raise CatalogError(f"{section}: two entries named {a}")
    return entries


def build(upstream: Path = UPSTREAM) -> dict:
    """The whole catalog, from the stored excerpts and the hand-written table."""
    sources = load_sources(upstream)
    check_switches(sources)
    kernel_keys = sorted(k for k in sources if k.startswith(("linux-", "drm-kmod-")))
    runtime = message_entries(
        sources, ("rocr-fault-messages", "clr-queue-callback"), fam.RUNTIME_FAMILY
    )
    catalog = {
        "about": "Generated by python -m rocm_dl_guide.doctor.catalogs --write from the "
        "excerpts under data/upstream/ (see each folder's SOURCES.json) and the families "
        "in rocm_dl_guide/doctor/catalog_families.py. Do not edit by hand.",
        "hip": _unique(hip_entries(sources), "hip"),
        "hsa": _unique(hsa_entries(sources), "hsa"),
        "runtime": _unique(runtime, "runtime"),
        "kernel": _unique(message_entries(sources, kernel_keys, fam.KERNEL_FAMILY), "kernel"),
        "fault_reasons": fault_reasons(sources),
        "families": {
            name: {"meaning": f["meaning"], "collect": list(f["collect"])}
            for name, f in fam.FAMILIES.items()
        },
        "source_collect": {k: list(v) for k, v in fam.SOURCE_COLLECT.items()},
        "sources": {
            key: {k: s[k] for k in ("repo", "commit", "path", "url", "lines")}
            for key, s in sources.items()
        },
    }
    used = {e["family"] for section in SECTIONS for e in catalog[section]}
    if used - set(fam.FAMILIES):
        raise CatalogError(f"families used but not described: {sorted(used - set(fam.FAMILIES))}")
    return catalog


def render(catalog: dict) -> str:
    """The catalog as the JSON text stored: sorted keys, one indent, newline at the end."""
    return json.dumps(catalog, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def differences(stored: dict, fresh: dict) -> list[str]:
    """What differs between a stored catalog and a freshly built one: each
    entry added, removed or changed, by section and name."""
    found = []
    for section in SECTIONS:
        old = {e["name"]: e for e in stored.get(section, [])}
        new = {e["name"]: e for e in fresh[section]}
        gone, added = sorted(old.keys() - new.keys()), sorted(new.keys() - old.keys())
        found += [f"{section}: {name}: not generated any more" for name in gone]
        found += [f"{section}: {name}: missing from the JSON" for name in added]
        for name in sorted(old.keys() & new.keys()):
            fields = sorted(
                k
                for k in old[name].keys() | new[name].keys()
                if old[name].get(k) != new[name].get(k)
            )
            if fields:
                found.append(f"{section}: {name}: differs in {', '.join(fields)}")
    for part in fresh.keys() - set(SECTIONS):
        if stored.get(part) != fresh[part]:
            found.append(f"{part}: differs")
    return found


def main(argv: list[str] | None = None) -> int:
    """``--write`` regenerates the catalog; ``--check`` says whether it is current."""
    args = sys.argv[1:] if argv is None else argv
    target = DATA / "error-catalog.json"
    if args == ["--write"]:
        target.write_text(render(build()), encoding="utf-8")
        print(f"wrote {target}")
        return 0
    if args == ["--check"]:
        fresh = build()
        stored = json.loads(target.read_text(encoding="utf-8")) if target.exists() else {}
        found = differences(stored, fresh)
        if not found and target.read_text(encoding="utf-8") != render(fresh):
            found = ["the JSON's text is not what --write writes (order or format)"]
        for line in found:
            print(line)
        if found:
            print(f"{target} is not current: python -m rocm_dl_guide.doctor.catalogs --write")
        else:
            print("error catalog is current")
        return 1 if found else 0
    print("usage: python -m rocm_dl_guide.doctor.catalogs --write | --check", file=sys.stderr)
    return 2


# ------------------------------------------------------------------ lookup


@dataclass(frozen=True)
class CatalogHit:
    """The catalog entry a log line shows, with what its family means."""

    kind: str
    """``hip``, ``hsa``, ``runtime`` or ``kernel``."""
    name: str
    number: int | None
    description: str
    """Upstream's words: the header's comment, or the message's format string."""
    family: str
    meaning: str
    collect: tuple[str, ...]
    source: dict
    """Where upstream says it: repo, commit, path, line, url."""
    runtime_string: str = ""
    fields: dict = field(default_factory=dict)
    """What the line adds: a fault's reason, the HSA status a queue aborted with."""


@functools.lru_cache(maxsize=1)
def catalog() -> dict:
    """The stored catalog (package data)."""
    text = resources.files("rocm_dl_guide").joinpath(CATALOG_FILE).read_text(encoding="utf-8")
    return json.loads(text)


@functools.lru_cache(maxsize=1)
def _compiled() -> dict[str, list[tuple[re.Pattern, dict, str]]]:
    """Each runtime and kernel entry's regex, with the longest word of its fixed text,
    which a line must contain before the regex is tried (the regexes of formats with
    several ``%s`` backtrack badly on long lines that do not match)."""
    data = catalog()
    return {
        s: [(re.compile(e["regex"]), e, _key_word(e)) for e in data[s]]
        for s in ("runtime", "kernel")
    }


def _key_word(entry: dict) -> str:
    fixed = re.sub(r"%[-+ #0-9.*]*(?:hh|h|ll|l|z|j|t|L)?[a-zA-Z%]", " ", entry.get("format", ""))
    words = re.findall(r"[A-Za-z_][A-Za-z_]{3,}", fixed)
    return max(words, key=len) if words else ""


MAX_LINE = 400
"""The longest part of a line the catalogs' regexes are tried on."""


def _hit(kind: str, entry: dict, **fields) -> CatalogHit:
    family = fields.pop("family", entry["family"])
    info = catalog()["families"][family]
    return CatalogHit(
        kind=kind,
        name=entry["name"],
        number=entry.get("number"),
        description=entry.get("description") or entry.get("format", ""),
        family=family,
        meaning=info["meaning"],
        collect=tuple(info["collect"]),
        source={**entry["source"], "url": source_url(entry["source"])},
        runtime_string=entry.get("runtime_string", ""),
        fields={k: v for k, v in fields.items() if v},
    )


def _by_name(section: str) -> dict[str, dict]:
    return {e["name"]: e for e in catalog()[section]}


def _best(section: str, line: str, kernel_line: bool) -> dict | None:
    line = line[:MAX_LINE]
    matches = [
        entry
        for regex, entry, word in _compiled()[section]
        if (kernel_line or entry.get("literal_length", MIN_LITERAL) >= MIN_LITERAL)
        and word in line
        and regex.search(line)
    ]
    return max(matches, key=lambda e: (e.get("literal_length", 0), e["name"]), default=None)


def _runtime_hit(line: str) -> CatalogHit | None:
    entry = _best("runtime", line, True)
    if entry is None:
        return None
    status = re.search(r"\b(HSA_(?:EXT_)?STATUS_\w+)", line)
    if entry["family"] == "queue-abort" and status and status.group(1) in _by_name("hsa"):
        family = _by_name("hsa")[status.group(1)]["family"]
        return _hit("runtime", entry, family=family, status=status.group(1))
    reason = re.search(r"[Rr]eason ?:\s*(.+?)\.?\s*$", line)
    return _hit("runtime", entry, reason=reason.group(1) if reason else "")


def _hip_by_text(line: str) -> CatalogHit | None:
    """A HIP error told by its runtime string ("HIP error: out of memory") or by
    its number in a HIP context ("HIP error ... (code 2)")."""
    said = re.search(
        r"\bhip(?:Error|GetErrorString)?\W.*?:\s*(.+)$|HIP error[^:]*:\s*(.+)$|"
        r"\b(?:ROCm|CUDA)(?: error)?[^:\n]{0,40}:\s*(.+)$",  # llama.cpp's, a wrapper's words
        line,
    )
    if said:
        text = next(g for g in said.groups() if g).strip().strip("'\"").lower()
        known = [
            e
            for e in catalog()["hip"]
            if e["runtime_string"]
            and "alias_of" not in e
            and text.startswith(e["runtime_string"].lower())
        ]
        if known:
            return _hit("hip", max(known, key=lambda e: len(e["runtime_string"])))
    if not re.search(r"\bhip|HIP", line):
        return None
    number = re.search(
        r"\bcode[\s:=]*(-?\d+)\b|\berror[\s:=]+(-?\d+)\b|'\((\d+)\)|\bHIP:(\d+)\b", line
    )
    if number:
        value = int(next(g for g in number.groups() if g is not None))
        for entry in catalog()["hip"]:
            if entry["number"] == value and "alias_of" not in entry:
                return _hit("hip", entry)
    return None


def lookup(line: str) -> CatalogHit | None:
    """The catalog entry ``line`` shows, or None: ROCr's and the HIP runtime's
    fault lines, a kernel message, an HSA status name, a HIP error name, or a
    HIP error told by its string or number."""
    hit = _runtime_hit(line)
    if hit:
        return hit
    entry = _best("kernel", line, classify_source(line) == "kernel")
    if entry:
        return _hit("kernel", entry)
    status = re.search(r"\b(HSA_(?:EXT_)?STATUS_[A-Z_]+)\b", line)
    if status and status.group(1) in _by_name("hsa"):
        return _hit("hsa", _by_name("hsa")[status.group(1)])
    name = re.search(r"\b(hip(?:Success|Error[A-Za-z]+))\b", line)
    if name and name.group(1) in _by_name("hip"):
        return _hit("hip", _by_name("hip")[name.group(1)])
    return _hip_by_text(line)


_LAYERS: tuple[tuple[str, re.Pattern], ...] = (
    (
        "package manager",
        re.compile(
            r"^\s*[EW]: |\b(?:dpkg|apt|apt-get|dnf|yum|zypper)\b|\bdkms\b|DKMS|"
            r"Errors were encountered while processing|[Uu]nmet dependencies|"
            r"Bad return status for module build|/var/lib/dkms"
        ),
    ),
    (
        "kernel",
        re.compile(
            r"^\s*(?:<\d>)?\[\s*\d+\.\d+\]|^\s*\[[A-Z][a-z]{2} [A-Z][a-z]{2} +\d|\bkernel: |"
            r"\[drm[:\]]|\bamdgpu [0-9a-f]{4}:|\bkfd kfd:|^\s*amdgpu: |\*ERROR\*"
        ),
    ),
    (
        "HSA",
        re.compile(
            r"\bHSA_(?:EXT_)?STATUS_|\bhsa api call|\bhsa_\w+\b|\bROCr\b|libhsa-runtime|"
            r"Memory access fault by GPU|HW Exception by GPU|\bHSA\b"
        ),
    ),
    ("HIP", re.compile(r"\bhipError|(?i:\bhip error)|libamdhip64|\bhip[A-Z]\w*\(|\bHIP_\w+")),
    (
        "rocBLAS/MIOpen/other ROCm library",
        re.compile(
            r"(?i)\b(?:rocblas|miopen|hipblaslt|hipblas|rccl|rocfft|rocsolver|rocsparse|"
            r"hipsparse|hipfft|rocrand|tensile|composable_kernel|migraphx)"
        ),
    ),
    (
        "PyTorch",
        re.compile(
            r"Traceback \(most recent call last\)|\btorch[./]|\bc10(?:::|/|\b)|"
            r"\b\w*(?:Runtime|OutOfMemory|Accelerator)Error\b|^\s*File \".*\", line \d+"
        ),
    ),
    ("kernel", re.compile(r"\bamdgpu\b|\bkfd\b|\bdrm\b")),
)


def classify_source(line: str) -> str | None:
    """Which layer an unrecognised line comes from: ``kernel``, ``HIP``, ``HSA``,
    ``PyTorch``, ``package manager`` or ``rocBLAS/MIOpen/other ROCm library``;
    None when nothing in it says. :func:`what_to_collect` says what to gather."""
    for name, pattern in _LAYERS:
        if pattern.search(line):
            return name
    return None


def what_to_collect(source: str) -> tuple[str, ...]:
    """What to collect next for a line from ``source`` (a classify_source answer)."""
    return tuple(catalog()["source_collect"].get(source, ()))


if __name__ == "__main__":
    sys.exit(main())
