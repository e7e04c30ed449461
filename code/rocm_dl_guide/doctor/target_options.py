"""What a GPU target that ROCm does not support can still do: the known risks of its
family's override, and the options outside ROCm.

:func:`override_caveat` gives what the sources say goes wrong when a target runs as
its family's supported sibling (``HSA_OVERRIDE_GFX_VERSION``), and
:func:`outside_rocm` the options that do not need ROCm to support the target, for a
target the newest ROCm release doctor knows does not list. :func:`override_set` judges
an override that is set against the GPUs' own targets: one it does not help, one no
override helps, or one GPU that needs it beside another that must keep its own target
(the per-node variable).
"""

from __future__ import annotations

from . import compat_data
from .rules import (
    FAIL,
    INFO,
    NO_OVERRIDE,
    OVERRIDE_CAVEATS,
    OVERRIDE_FAMILIES,
    WARN,
    Check,
    cite,
    override_target,
)


def per_node_fix(value: str, gfx: str) -> str:
    """The fix for an override the ``gfx`` GPU needs and another GPU must not get."""
    return (
        f"unset it, and set the override for the {gfx} alone: HSA_OVERRIDE_GFX_VERSION_N="
        f"{value}, N being that GPU's Node number in rocminfo (libhsakmt reads the per-node "
        f"variable first); or run a process that sees only the {gfx} (HIP_VISIBLE_DEVICES) "
        "with the override"
    )


def override_caveat(gfx: str) -> tuple[str, tuple[str, ...]]:
    """(the warning, its sources) for running ``gfx`` as its family's sibling target;
    empty where the sources report none."""
    if gfx not in OVERRIDE_CAVEATS:
        return "", ()
    known, keys = OVERRIDE_CAVEATS[gfx]
    return f"but the override is known to fail for some work on {gfx}: {known}", cite(*keys)


def newest_lists(gfx: str) -> bool | None:
    """Whether the newest release whose target list the data gives lists ``gfx``."""
    rels = [
        r for r in compat_data.releases() if r.get("gfx") and not compat_data.is_line(r["rocm"])
    ]
    if not rels:
        return None
    newest = max(rels, key=lambda r: compat_data.release_key(r["rocm"]))
    return gfx in newest["gfx"]


def outside_rocm(gfx: str) -> tuple[str, tuple[str, ...]]:
    """(the options outside ROCm, sources) for a target the newest release does not list."""
    if newest_lists(gfx) is not False:
        return "", ()
    return (
        f"outside ROCm, inference programs with a Vulkan backend (llama.cpp, and ollama and "
        f"LM Studio built on it) run on {gfx} through the graphics driver, and the CPU remains",
        cite("vulkan-llamacpp"),
    )


def native_build_fix(gfx: str) -> str:
    """The fix for a GPU that no override helps: a PyTorch build that has its target."""
    index = NO_OVERRIDE.get(gfx, ("", None, ()))[1]
    where = f" (pip install --pre torch --index-url {index})" if index else ""
    return (
        f"install a PyTorch build that has {gfx}: AMD's TheRock nightly wheels{where} or a "
        f"ROCm 7.x+ wheel whose torch.cuda.get_arch_list() lists {gfx}; "
        f"overriding the target does not work for {gfx}"
    )


def override_set(value: str, natives: list[str], built: list[str], said: str = "set to"):
    """An override set to ``value`` on GPUs of targets ``natives``, PyTorch built for ``built``."""
    name, cid = "HSA_OVERRIDE_GFX_VERSION", "hsa-override"
    sources = cite("override-what", "override-gfx1031", "override-unofficial-780m")
    target = override_target(value)
    if target is None:
        msg = f"{said} {value!r}, which is not MAJOR.MINOR.STEPPING (for example 10.3.0)"
        return [Check(name, FAIL, msg, sources, cid, "unset it, or give a value such as 10.3.0")]
    risk = (
        "it applies to every GPU of the process, is not supported by AMD, and a GPU that "
        "lacks an instruction the target's kernels use crashes or computes wrong results"
    )
    needs = [g for g in natives if g in OVERRIDE_FAMILIES.get(value, ())]
    others = [g for g in natives if g not in needs and g != target]
    if needs and others:  # one GPU needs it, another is run as another chip by it
        msg = (
            f"{said} {value}: {', '.join(needs)} needs it, but every GPU of the process runs "
            f"as {target}, {', '.join(others)} too"
        )
        fix = per_node_fix(value, needs[0])
        return [Check(name, WARN, msg, sources + cite("override-per-node"), cid, fix)]
    if natives and all(g == target for g in natives):  # the GPU's own target
        msg = f"{said} {value} ({target}), the GPU's own target: it changes nothing here"
        return [Check(name, INFO, msg, sources, cid, "unset it: it is not needed")]
    blocked = [g for g in natives if g in NO_OVERRIDE and g != target]
    if blocked:
        why, _, keys = NO_OVERRIDE[blocked[0]]
        msg = f"{said} {value}: {blocked[0]} runs as {target}, and for {blocked[0]} {why}"
        fix = "unset it; " + native_build_fix(blocked[0])
        return [Check(name, FAIL, msg, sources + cite(*keys), cid, fix)]
    native = ", ".join(natives) or "no GPU listed"
    msg = f"{said} {value}: every GPU runs as {target} ({native} natively); {risk}"
    if built and target not in built:
        fix = f"unset it, or choose a value whose target this build has ({', '.join(built)})"
        msg = f"{said} {value} ({target}), which this PyTorch has no kernels for either"
        return [Check(name, FAIL, msg, sources, cid, fix)]
    if natives and all(g in built or g == target for g in natives):
        msg = f"{said} {value} ({target}) although every GPU's own target is in this build; {risk}"
        fix = "unset it: these GPUs are supported as they are"
        return [Check(name, WARN, msg, sources + cite("override-not-needed"), cid, fix)]
    caveats = [override_caveat(g) for g in natives if g != target]
    msg += "".join(f"; {words}" for words, _ in caveats if words)
    fix = f"keep it only while no build has {native}; a build with {native} needs none"
    sources += tuple(u for _, src in caveats for u in src)
    return [Check(name, WARN, msg, sources + cite("override-wrong-kernels"), cid, fix)]
