"""What a GPU target that ROCm does not support can still do: the known risks of its
family's override, and the options outside ROCm.

:func:`override_caveat` gives what the sources say goes wrong when a target runs as
its family's supported sibling (``HSA_OVERRIDE_GFX_VERSION``), and
:func:`outside_rocm` the options that do not need ROCm to support the target, for a
target the newest ROCm release doctor knows does not list.
"""

from __future__ import annotations

from . import compat_data
from .rules import NO_OVERRIDE, OVERRIDE_CAVEATS, cite


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
