"""The GPUs a program sees, the GPU targets its PyTorch carries, and the checks on them.

Three of the doctor's checks, each reading a
:class:`~rocm_dl_guide.doctor.system.SystemReport`: every visible GPU's target
against the targets the PyTorch build has kernels for (``arch-mismatch``),
``HSA_OVERRIDE_GFX_VERSION``: whether one is set, what it maps onto, whether
one would help and for which GPUs (``hsa-override``), and an APU's integrated
GPU enumerated next to a discrete one (``igpu``). The helpers that say which
GPUs a HIP program sees (:func:`visible_gpus`, :func:`gpus_seen`) and which
targets the build has (:func:`arch_list`) are shared with
:mod:`~rocm_dl_guide.doctor.diagnose`. The facts behind the checks are
:mod:`~rocm_dl_guide.doctor.rules`'.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from . import compat_data, premises, products, target_options
from .paste import clean
from .rules import (
    FAIL,
    IGPU_TARGETS,
    INFO,
    NO_OVERRIDE,
    OK,
    OVERRIDE_FAMILIES,
    OVERRIDE_FAMILY_SOURCES,
    UNKNOWN,
    WARN,
    Check,
    cite,
    override_target,
)
from .target_options import native_build_fix

if TYPE_CHECKING:  # pragma: no cover
    from .agents import Agent
    from .system import SystemReport


# --------------------------------------------------------------------------- helpers


def torch_info(sysrep: SystemReport):
    """The report's PyTorch facts (a ``FrameworkInfo``), or None when it is not installed."""
    info = sysrep.frameworks.get("pytorch")
    return info if info and info.installed else None


def arch_list(sysrep: SystemReport) -> list[str]:
    """The gfx targets the installed PyTorch carries kernels for
    (``gfx90a:xnack-`` -> ``gfx90a``)."""
    info = torch_info(sysrep)
    raw = (info.details.get("arch_list") or []) if info else []
    return sorted({str(a).split(":")[0] for a in raw if str(a).startswith("gfx")})


def host_env(sysrep: SystemReport) -> dict[str, str]:
    """The environment variables the host facts recorded (``{}`` without host facts)."""
    return dict(sysrep.host.env) if sysrep.host else {}


def is_integrated(agent: Agent) -> bool:
    """An APU's integrated GPU: rocminfo says ``Memory Properties: APU``, or its
    target is an APU target (the compatibility data's or :data:`IGPU_TARGETS`)."""
    if "APU" in (agent.extra.get("Memory Properties") or "").upper():
        return True
    apu_targets = {a["gfx"] for a in compat_data.apus()} | IGPU_TARGETS
    return (agent.gfx or "") in apu_targets


def _indices(value: str) -> list[int] | None:
    parts = [p.strip() for p in value.split(",") if p.strip()]
    return [int(p) for p in parts] if all(p.isdigit() for p in parts) else None


def visible_gpus(sysrep: SystemReport) -> list[tuple[int, Agent]]:
    """(HIP device number, agent) for the rocminfo GPUs a HIP program would see.

    rocminfo already obeys ``ROCR_VISIBLE_DEVICES``; ``HIP_VISIBLE_DEVICES`` (or
    ``CUDA_VISIBLE_DEVICES``) then selects by index among what is left.
    """
    gpus = list(sysrep.rocminfo.gpus)
    env = host_env(sysrep)
    chosen = env.get("HIP_VISIBLE_DEVICES", env.get("CUDA_VISIBLE_DEVICES"))
    if chosen is None:
        return list(enumerate(gpus))
    idx = _indices(chosen)
    if idx is None:
        return []
    picked = [gpus[i] for i in idx if 0 <= i < len(gpus)]
    return list(enumerate(picked))


def gpu_label(n: int, agent: Agent) -> str:
    """``GPU 0 (AMD Radeon RX 7900 XTX, gfx1100)``: how the checks name a GPU."""
    return f"GPU {n} ({agent.marketing_name or agent.name}, {agent.gfx or 'gfx unknown'})"


# --------------------------------------------------------------------------- 1 + 2: targets


def _sibling_override(gfx: str, built: list[str]) -> str | None:
    """The documented override value that maps ``gfx`` onto a target in ``built``
    (never for a target of :data:`NO_OVERRIDE`)."""
    if gfx in NO_OVERRIDE:
        return None
    for value, family in OVERRIDE_FAMILIES.items():
        if gfx in family and override_target(value) in built:
            return value
    return None


def gpus_seen(sysrep: SystemReport) -> list[tuple[int, Agent]]:
    """:func:`visible_gpus`; when rocminfo lists no GPU, the GPUs PyTorch sees, with the
    target its ``gcnArchName`` gave (a snapshot without rocminfo)."""
    if sysrep.rocminfo.gpus:
        return visible_gpus(sysrep)
    from .agents import Agent

    info = torch_info(sysrep)
    devices = (info.details.get("devices") or []) if info else []
    return [
        (i, Agent(i, d["gfx"], d.get("name") or "", "AMD", "GPU", None, d["gfx"], None))
        for i, d in enumerate(devices)
        if isinstance(d, dict) and d.get("gfx")
    ]


def known_targets(sysrep: SystemReport) -> tuple[list[str], str, tuple[str, ...]]:
    """(targets, where they come from, sources): the PyTorch build's arch list; without
    one (no ROCm PyTorch, e.g. TensorFlow only), the targets the compatibility data lists
    for the installed ROCm release."""
    built = arch_list(sysrep)
    if built:
        return built, "this PyTorch build", cite("get-arch-list")
    version = sysrep.rocm.version if sysrep.rocm else None
    res = compat_data.resolve(version, "gfx") if version else None
    if not res or res.unknown or not res.rel.get("gfx"):
        return [], "", ()
    urls = tuple(compat_data.sources().get(k, {}).get("url", k) for k in res.sources)
    basis = f"ROCm {version}'s supported targets (no PyTorch arch list)"
    return sorted(res.rel["gfx"]), basis, urls


def _hip_index(sysrep: SystemReport, n: int, agent: Agent) -> int:
    """The number to give HIP_VISIBLE_DEVICES for ``agent`` (its place among rocminfo's
    GPUs; ``n`` when rocminfo does not list it)."""
    for i, a in enumerate(sysrep.rocminfo.gpus):
        if a is agent:
            return i
    return n


def override_plan(sysrep: SystemReport, gfx: str, built: list[str]):
    """For a GPU of target ``gfx`` that ``built`` lacks: (value, the visible GPUs it
    suits, the visible GPUs it would also run as another chip), or None."""
    value = _sibling_override(gfx, built)
    if not value:
        return None
    family = set(OVERRIDE_FAMILIES[value]) | {override_target(value)}
    gpus = gpus_seen(sysrep)
    suits = [(n, a) for n, a in gpus if a.gfx in family]
    others = [(n, a) for n, a in gpus if a.gfx not in family]
    return value, suits, others


def _override_fix(sysrep: SystemReport, plan) -> str:
    """How to use the override of ``plan`` (see :func:`override_plan`), naming the GPUs."""
    value, suits, others = plan
    target = override_target(value)
    if not others:
        return (
            f"export HSA_OVERRIDE_GFX_VERSION={value} before starting Python: it runs "
            f"{', '.join(gpu_label(n, a) for n, a in suits)} as {target} (unsupported by AMD)"
        )
    keep = ",".join(str(_hip_index(sysrep, n, a)) for n, a in suits)
    rest = ",".join(str(_hip_index(sysrep, n, a)) for n, a in others)
    return (
        f"HSA_OVERRIDE_GFX_VERSION applies to every GPU the process sees, so to use "
        f"{', '.join(gpu_label(n, a) for n, a in suits)} with it hide the others: export "
        f"HIP_VISIBLE_DEVICES={keep} HSA_OVERRIDE_GFX_VERSION={value} (unsupported by AMD); "
        f"to use {', '.join(gpu_label(n, a) for n, a in others)} instead, leave it unset and "
        f"export HIP_VISIBLE_DEVICES={rest}"
    )


def arch_checks(sysrep: SystemReport) -> list[Check]:
    """Each visible GPU's target (after any override) against the PyTorch build's targets."""
    info = torch_info(sysrep)
    gpus = gpus_seen(sysrep)
    if not info or not info.details.get("hip") or not gpus:
        return []
    built = arch_list(sysrep)
    name = "GPU targets in PyTorch"
    if not built:
        why = info.details.get("arch_list_error") or "torch.cuda.get_arch_list() returned nothing"
        return [
            Check(
                name,
                UNKNOWN,
                f"could not read this build's GPU targets ({why})",
                id="arch-mismatch",
            )
        ]
    override = override_target(host_env(sysrep).get("HSA_OVERRIDE_GFX_VERSION"))
    missing, fine = [], []
    for n, agent in gpus:
        runs_as = override or agent.gfx
        (fine if runs_as in built else missing).append((n, agent, runs_as))
    if not missing:
        shown = ", ".join(f"{gpu_label(n, a)} as {t}" for n, a, t in fine) or "no visible GPU"
        return [Check(name, OK, f"{shown}: in this build's targets", id="arch-mismatch")]
    n, agent, runs_as = missing[0]
    keys = ("get-arch-list", "wheel-lacks-arch", "tensile-missing", "tensile-then-nobinary")
    sources = cite(*keys, "nobinary-gfx1032")
    plan = override_plan(sysrep, agent.gfx or "", built)
    fix = (
        f"install a PyTorch wheel or rocm/pytorch image built for {agent.gfx} (check with "
        "python -c 'import torch; print(torch.cuda.get_arch_list())'), or build PyTorch from "
        f"source with PYTORCH_ROCM_ARCH={agent.gfx}"
    )
    if agent.gfx in NO_OVERRIDE:
        fix = native_build_fix(agent.gfx)
        sources += cite(*NO_OVERRIDE[agent.gfx][2])
    elif plan and not override:
        fix += "; unofficially: " + _override_fix(sysrep, plan)
    runs = f" (run as {runs_as} by HSA_OVERRIDE_GFX_VERSION)" if override else ""
    message = (
        f"{gpu_label(n, agent)}{runs} is not among the targets this PyTorch was built for "
        f"({', '.join(built)}): its first kernel fails with 'HIP error: invalid device "
        "function' or 'hipErrorNoBinaryForGpu', and rocBLAS with 'Cannot read "
        "TensileLibrary.dat'"
    )
    if len(missing) > 1:
        message += f" ({len(missing)} GPUs affected)"
    return [Check(name, FAIL, message, sources, "arch-mismatch", fix)]


def _unset_override_check(sysrep: SystemReport) -> Check:
    """``HSA_OVERRIDE_GFX_VERSION`` not set: would one help, which GPUs, or nothing will."""
    name, cid = "HSA_OVERRIDE_GFX_VERSION", "hsa-override"
    built, basis, basis_sources = known_targets(sysrep)
    lacking = [(n, a) for n, a in gpus_seen(sysrep) if a.gfx and a.gfx not in built]
    if not built or not lacking:
        return Check(name, OK, "not set", id=cid)
    blocked = [(n, a) for n, a in lacking if a.gfx in NO_OVERRIDE]
    if blocked:
        n, a = blocked[0]
        why, _, keys = NO_OVERRIDE[a.gfx]
        msg = (
            f"not set, and no value would help: {gpu_label(n, a)} has no kernels in {basis}, "
            f"and for {a.gfx} {why}"
        )
        return Check(name, WARN, msg, basis_sources + cite(*keys), cid, native_build_fix(a.gfx))
    plans = [override_plan(sysrep, a.gfx or "", built) for _, a in lacking]
    plans = [p for p in plans if p]
    if not plans:
        return Check(name, OK, "not set", id=cid)
    value, suits, others = plans[0]
    target = override_target(value)
    msg = (
        f"not set; {', '.join(gpu_label(n, a) for n, a in suits)}: no kernels in {basis}, but "
        f"{target} of the same family has them: HSA_OVERRIDE_GFX_VERSION={value} is the "
        "documented, unofficial workaround"
    )
    if others:
        msg += (
            f"; it applies to every GPU the process sees, so it would also run "
            f"{', '.join(gpu_label(n, a) for n, a in others)} as {target}, "
            "with another chip's kernels"
        )
    caveat, caveat_src = target_options.override_caveat(suits[0][1].gfx or "")
    msg += f"; {caveat}" if caveat else ""
    sources = cite("override-what", "override-gfx1031", "override-unofficial-780m")
    sources += basis_sources + cite("override-gfx1036", "override-gfx1151") + caveat_src
    return Check(name, INFO, msg, sources, cid, _override_fix(sysrep, plans[0]))


def override_check(sysrep: SystemReport) -> list[Check]:
    """``HSA_OVERRIDE_GFX_VERSION``: set or not (or not collected), what it maps onto, and
    the risk; then, while it is not set, what the ROCm release data says about each GPU's
    target (:func:`support_checks`)."""
    name, cid = "HSA_OVERRIDE_GFX_VERSION", "hsa-override"
    value = host_env(sysrep).get("HSA_OVERRIDE_GFX_VERSION")
    built = arch_list(sysrep)
    gpus = [a for _, a in gpus_seen(sysrep)]
    if value is None and sysrep.host is None:
        msg = "not collected: this process's environment was not read"
        shown = _log_env(sysrep).get("HSA_OVERRIDE_GFX_VERSION")
        named = _text_targets(sysrep) if shown and override_target(shown) else []
        if named and not gpus:  # judged against the GPUs the text names
            checks = target_options.override_set(shown, named, built, "your error text sets it to")
            return checks + support_checks(sysrep)
        if shown:
            target = override_target(shown)
            msg += f"; your error text sets it to {shown}" + (f" ({target})" if target else "")
        return [Check(name, UNKNOWN, msg, id=cid)] + support_checks(sysrep)
    if value is None:
        return [_unset_override_check(sysrep)] + support_checks(sysrep)
    natives = sorted({products.real_gfx(a) for a in gpus if products.real_gfx(a)})
    return target_options.override_set(value, natives, built)


# --------------------------------------------------------------------------- 3: iGPU


def _gib(kib: int) -> str:
    return f"{kib / 1024**2:.1f} GiB"


def apu_memory(sysrep: SystemReport, igpu: Agent) -> str:
    """What decides what fits on an APU's integrated GPU, with the sizes rocminfo shows."""
    from .rocminfo import global_pool_kib

    facts = (
        "it has no memory of its own: it uses system RAM, the UMA frame buffer set in the "
        "BIOS plus GTT, which the amdgpu driver sizes by default to half of system RAM "
        "(amdgpu.gttsize, or the ttm module's pages_limit, changes it)"
    )
    cap = sysrep.rocminfo_capture
    pools = global_pool_kib(cap.text if cap else None)
    ram = max((pools.get(c.index, 0) for c in sysrep.rocminfo.cpus), default=0)
    mine = pools.get(igpu.index, 0)
    if ram and mine:
        facts += f"; rocminfo shows {_gib(ram)} of system memory and {_gib(mine)} for this GPU"
    elif ram:
        facts += f"; rocminfo shows {_gib(ram)} of system memory"
    return facts


def igpu_check(sysrep: SystemReport) -> list[Check]:
    """An APU's integrated GPU enumerated next to a discrete GPU."""
    name, cid = "Integrated GPU", "igpu"
    gpus = list(sysrep.rocminfo.gpus)
    integrated = [(i, a) for i, a in enumerate(gpus) if is_integrated(a)]
    if not integrated:
        return []
    sources = cite("igpu-prerequisites", "igpu-hip-visible", "igpu-device0", "gpu-isolation")
    sources += cite("apu-gttsize", "apu-uma-gtt", "no-override-gfx1151")
    discrete = [(i, a) for i, a in enumerate(gpus) if not is_integrated(a)]
    i, igpu = integrated[0]
    if not discrete:
        msg = (
            f"the only GPU is an APU's integrated GPU ({igpu.gfx}); check that ROCm supports "
            f"it; {apu_memory(sysrep, igpu)}"
        )
        return [Check(name, INFO, msg, sources, cid)]
    visible = {id(a) for _, a in visible_gpus(sysrep)}
    keep = ",".join(str(j) for j, _ in discrete)
    if id(igpu) not in visible:
        msg = f"integrated GPU {i} ({igpu.gfx}) is hidden from HIP programs by HIP_VISIBLE_DEVICES"
        return [Check(name, OK, msg, sources, cid)]
    first = " as device 0, so cuda:0 is the iGPU" if i == 0 else ""
    msg = (
        f"an integrated GPU ({igpu.marketing_name or igpu.name}, {igpu.gfx}) is enumerated "
        f"next to the discrete {discrete[0][1].marketing_name or discrete[0][1].gfx}{first}: "
        "ROCm does not support most integrated GPUs, and programs that touch it fail ('invalid "
        "device function', 'No HIP GPUs are available') or crash; if you use it, "
        + apu_memory(sysrep, igpu)
    )
    fix = (
        f"disable the integrated GPU in the BIOS (AMD's advice), or hide it: export "
        f"HIP_VISIBLE_DEVICES={keep} (ROCR_VISIBLE_DEVICES={keep} hides it from every ROCm "
        "program) before starting Python"
    )
    return [Check(name, WARN, msg, sources, cid, fix)]


# --------------------------------------------------------------------------- 4: the GPU alone


def _log_env(sysrep: SystemReport) -> dict[str, str]:
    """The environment variables the reader's error text sets (``{}`` without one)."""
    from . import logs

    text = clean((sysrep.log or {}).get("text") or "")
    return dict(logs.facts(text).env) if text else {}


def _text_targets(sysrep: SystemReport) -> list[str]:
    """The GPUs' own targets the error text shows: device lines and products named
    (:func:`_targets`), else any target the reader's own words name."""
    from .setup_text import gpu_targets_shown

    return _targets(sysrep)[0] or gpu_targets_shown(clean((sysrep.log or {}).get("text") or ""))


def _targets(sysrep: SystemReport) -> tuple[list[str], str]:
    """The GPUs' own targets (their chips', not an override's) and where they come
    from: rocminfo (or PyTorch's device list), else the reader's error text: the lines
    that name a GPU's target, and the GPUs it names by product or PCI ID."""
    from . import logs

    seen = [products.real_gfx(a) for _, a in gpus_seen(sysrep)]
    if any(seen):
        return list(dict.fromkeys(g for g in seen if g)), ""
    text = clean((sysrep.log or {}).get("text") or "")
    found = products.real_targets(logs.device_targets(text), text) if text else []
    return found, " (named in your error text)" if found else ""


def listing_releases(gfx: str) -> list[dict]:
    """The releases whose GPU target list in the compatibility data has ``gfx``, oldest
    first (release lines such as ``5.7.x``, which list no targets, are left out)."""
    rels = [r for r in compat_data.releases() if not compat_data.is_line(r["rocm"])]
    rels.sort(key=lambda r: compat_data.release_key(r["rocm"]))
    return [r for r in rels if gfx in (r.get("gfx") or [])]


def release_spans(gfx: str) -> list[tuple[dict, dict]]:
    """The runs of consecutive releases (in the data's order, a release whose target list
    the data does not give ending a run) that list ``gfx``: (first, last) per run."""
    rels = [r for r in compat_data.releases() if not compat_data.is_line(r["rocm"])]
    rels.sort(key=lambda r: compat_data.release_key(r["rocm"]))
    spans: list[tuple[dict, dict]] = []
    run: list[dict] = []
    for rel in rels:
        if gfx in (rel.get("gfx") or []):
            run.append(rel)
            continue
        if run:
            spans.append((run[0], run[-1]))
        run = []
    if run:
        spans.append((run[0], run[-1]))
    return spans


def _span_words(spans: list[tuple[dict, dict]]) -> str:
    parts = [a["rocm"] if a is b else f"{a['rocm']} to {b['rocm']}" for a, b in spans]
    return "ROCm " + (", ".join(parts[:-1]) + " and " + parts[-1] if len(parts) > 1 else parts[0])


def _release_urls(*rels: dict) -> tuple[str, ...]:
    """The URLs of the sources that give these releases' GPU target lists."""
    known = compat_data.sources()
    ids = [compat_data.field_source(r, "gfx") for r in rels]
    return tuple(dict.fromkeys(known.get(i, {}).get("url", i) for i in ids if i))


def _span_urls(spans: list[tuple[dict, dict]]) -> tuple[str, ...]:
    return _release_urls(*(r for span in spans for r in span))


def _override_words(
    gfx: str, others: str = "", supported: bool = False
) -> tuple[str, str, tuple[str, ...]]:
    """(what HSA_OVERRIDE_GFX_VERSION can do for ``gfx``, the fix, the sources); ``others``:
    the other targets in the process, run as another chip too (:func:`premises.override_alone`);
    ``supported``: the newest release lists ``gfx`` itself, so no override is offered to copy."""
    if gfx in NO_OVERRIDE:
        known, _, keys = NO_OVERRIDE[gfx]
        return f"no target override helps: {known}", "", cite(*keys)
    for value, family in OVERRIDE_FAMILIES.items():
        if gfx not in family:
            continue
        target = override_target(value) or ""
        spans = release_spans(target)
        where = f", which {_span_words(spans)} list" if spans else ""
        caveat, caveat_src = target_options.override_caveat(gfx)
        # known to fail on this chip, which a release supports natively: no export to copy
        native = bool(caveat and release_spans(gfx)) or supported
        named = f"HSA_OVERRIDE_GFX_VERSION={value}"
        named = f"HSA_OVERRIDE_GFX_VERSION set to {value}" if native else named
        named = f"the override value {value}" if others else named
        words = (
            f"{named} runs it as {target}, its family's {'supported ' * bool(spans)}"
            f"target{where} (the documented workaround; unofficial, unsupported by AMD)"
        )
        fix = (
            premises.override_alone(gfx, value, others)
            if others
            else f"export HSA_OVERRIDE_GFX_VERSION={value} before starting Python"
        ) + " (unofficial)"
        keys = ["override-what", *OVERRIDE_FAMILY_SOURCES.get(value, ())]
        keys += ["override-gfx1036"] if gfx == "gfx1036" else []
        keys += ["override-per-node"] if others else []
        if caveat:
            words, fix = f"{words}; {caveat}", f"{fix}; {caveat}"
        return words, "" if native else fix, cite(*keys) + _span_urls(spans) + caveat_src
    return f"doctor's data names no HSA_OVERRIDE_GFX_VERSION value for {gfx}", "", ()


def _wheels_words(gfx: str) -> tuple[str, tuple[str, ...]]:
    """AMD's nightly wheel index that has ``gfx`` as a target of its own, with sources."""
    if gfx not in NO_OVERRIDE or not NO_OVERRIDE[gfx][1]:
        return "", ()
    _, index, keys = NO_OVERRIDE[gfx]
    return f"AMD's TheRock nightly wheels build {gfx} natively: {index}", cite(*keys)


def support_for(
    gfx: str, rocm_version: str | None, label: str = "", others: str = ""
) -> tuple[str, str, str, tuple[str, ...]]:
    """What the ROCm release data says about a GPU of target ``gfx``, without a PyTorch
    arch list: (status, message, fix, sources); ``label`` names the GPU. With ``rocm_version``
    known: whether that
    release lists the target; otherwise which releases do. Then which override family
    applies (or that the data says none helps) and where a native build exists. ``others``:
    the other GPUs' targets in the process, beside which an override is never a plain export."""
    spans = release_spans(gfx)
    res = compat_data.resolve(rocm_version, "gfx") if rocm_version else None
    installed = None if res is None or res.unknown or not res.rel.get("gfx") else res
    words, fix, sources = [], "", ()
    status = INFO
    if installed is not None and gfx in installed.rel["gfx"]:
        urls = tuple(compat_data.sources().get(i, {}).get("url", i) for i in installed.sources)
        msg = f"{label or gfx}: ROCm {rocm_version} lists it among its supported GPU targets"
        return OK, msg, "", urls
    if installed is not None:
        status = WARN
        urls = tuple(compat_data.sources().get(i, {}).get("url", i) for i in installed.sources)
        words.append(f"ROCm {rocm_version}'s supported GPU targets do not include it")
        sources += urls
        later = [
            a
            for a, _ in spans
            if compat_data.release_key(a["rocm"]) > compat_data.release_key(installed.rocm)
        ]
        if later:
            words.append(f"a native build: ROCm {later[0]['rocm']} is the next release to list it")
            fix = f"install ROCm {later[0]['rocm']} or later with a PyTorch build for it"
    else:
        if rocm_version:
            words.append(f"ROCm {rocm_version} is not in doctor's compatibility data")
        else:
            words.append("the installed ROCm release is not known")
    if installed is None and spans:
        many = len(spans) > 1 or spans[0][0] is not spans[0][1]
        verb = "list it among their" if many else "lists it among its"
        words.append(f"{_span_words(spans)} {verb} supported GPU targets")
        sources += _span_urls(spans)
        fix = fix or f"use one of those releases ({_span_words(spans)}) with a PyTorch build for it"
    elif not spans:
        words.append(
            "none of the ROCm releases whose GPU target lists doctor's compatibility data holds "
            "lists it"
        )
    current = installed is None and bool(spans) and target_options.newest_lists(gfx) is True
    over, over_fix, over_src = _override_words(gfx, others, supported=current)
    listed_now = installed is not None and gfx in installed.rel["gfx"]
    if not listed_now:
        words.append(over)
        sources += over_src
        if over_fix:
            fix = f"{fix}; unofficially: {over_fix}" if fix else over_fix
    outside, outside_src = target_options.outside_rocm(gfx)
    if outside and not listed_now:
        words.append(outside)
        sources += outside_src
    wheels, wheel_src = _wheels_words(gfx)
    if wheels:
        words.append(wheels)
        sources += wheel_src
        fix = f"{fix}; or {native_build_fix(gfx)}" if fix else native_build_fix(gfx)
    if gfx in NO_OVERRIDE and not fix:
        fix = native_build_fix(gfx)
    return status, f"{label or gfx}: " + "; ".join(words), fix, tuple(dict.fromkeys(sources))


_IN_USE = re.compile(
    r"inference compute\b[^\n]*\blibrary=rocm\b[^\n]*\bcompute=(gfx[0-9a-f]+)", re.I
)
"""ollama's line for a GPU it found and runs on with its ROCm build."""


def support_checks(sysrep: SystemReport) -> list[Check]:
    """ "GPU target in ROCm releases": each GPU's target against the ROCm release data,
    where no PyTorch arch list answers it (:func:`support_for`); the targets come from
    rocminfo or PyTorch's device list, else from the reader's error text."""
    if arch_list(sysrep):
        return []
    targets, where = _targets(sysrep)
    if not targets:
        return []
    version = sysrep.rocm.version if sysrep.rocm else None
    order = (OK, INFO, UNKNOWN, WARN, FAIL)
    others = {g: ", ".join(t for t in targets if t != g) for g in targets[:3]}
    in_use = set(_IN_USE.findall(clean((sysrep.log or {}).get("text") or ""))) if where else set()
    used = "ollama runs on it with its own ROCm libraries (its 'inference compute' line)"
    found = [
        (OK, f"{g}{where}: {used}", "", ())
        if g in in_use
        else support_for(g, version, g + where, others[g])
        for g in targets[:3]
    ]
    status = max((f[0] for f in found), key=order.index)
    message = "; ".join(f[1] for f in found)
    fix = (
        "; ".join(f"{g}: {f[2]}" for g, f in zip(targets[:3], found, strict=True) if f[2])
        if len(found) > 1
        else found[0][2]
    )
    sources = tuple(dict.fromkeys(u for f in found for u in f[3]))
    return [Check("GPU target in ROCm releases", status, message, sources, "gpu-support", fix)]
