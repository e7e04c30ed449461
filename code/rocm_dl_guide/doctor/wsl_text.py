"""WSL in a pasted text: what shows it, which ROCm release the text shows, and the
WSL recipe of that release.

ROCm reaches the GPU under WSL 2 through AMD's Windows driver (``/dev/dxg``), not
through amdgpu in Linux, and how it is installed changed between releases: the
releases from 6.1.3 to 7.2.0 install ``amdgpu-install --usecase=wsl,rocm
--no-dkms`` (the ``hsa-runtime-rocr4wsl-amdgpu`` runtime), and from 7.2.1 AMD's
ROCDXG library (``librocdxg``) with ``HSA_ENABLE_DXG_DETECTION=1``. Releases in
between have no WSL runtime at all. :func:`wsl_fix` gives the recipe of the release
the text shows, from ``data/wsl-releases.json`` (each fact cited there), and never
one release's recipe for another.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from importlib import resources

WSL_FILE = "data/wsl-releases.json"

WSL_SIGNS = re.compile(
    r"WSL environment detected|microsoft-standard-WSL|\bW(?:SL|LS) ?2\b|--usecase=wsl|/dev/dxg|"
    r"/usr/lib/wsl/|sources/wsl/|rocr4wsl|librocdxg|\b(?:on|under|in|via|with|using|through) "
    r"WSL\b",
    re.IGNORECASE,
)
"""What shows WSL in pasted text: rocminfo's own line, WSL's kernel name, the WSL
device and library paths, the WSL use case and runtime, or the reader saying so (as
"WSL2", or its common misspelling "WLS2")."""

_RELEASE = (
    re.compile(r"ROCm Version\W*\n\s*\n?\s*(?:ROCm\s*)?v?(\d+\.\d+(?:\.\d+){0,2})", re.IGNORECASE),
    re.compile(r"\bROCm(?: version)?[:\s]+v?(\d+\.\d+(?:\.\d+){0,2})\b", re.IGNORECASE),
    re.compile(r"amdgpu-install_\d+\.\d+(?:\.\d+)?\.(\d{5,6})-"),  # 7.0.70000 -> 7.0.0
    re.compile(r"repo\.radeon\.com/rocm/apt/(\d+\.\d+(?:\.\d+){0,2})\b"),
    re.compile(r"/opt/rocm-(\d+\.\d+\.\d+)\b"),
)
"""Where a text names its ROCm release: a GitHub issue form's "ROCm Version" field,
"ROCm 6.2.0", the amdgpu-install package's build number, the apt repository, the
install folder."""

_OTHER_DISTRO = re.compile(
    r"\b(Oracle Linux|Fedora|Debian|Arch Linux|openSUSE|Rocky Linux|AlmaLinux|CentOS|"
    r"Red Hat|RHEL|Alpine)\b"
)


def _build_number(number: str) -> str:
    """amdgpu-install's build number: ``70000`` -> ``7.0.0``, ``60402`` -> ``6.4.2``."""
    major, rest = (number[:-4], number[-4:]) if len(number) == 5 else (number[:2], number[2:])
    return f"{int(major)}.{int(rest[:2])}.{int(rest[2:])}"


def release_in(text: str) -> str | None:
    """The ROCm release ``text`` names (the first of :data:`_RELEASE` that matches)."""
    for n, pattern in enumerate(_RELEASE):
        if m := pattern.search(text):
            return _build_number(m.group(1)) if n == 2 else m.group(1)
    return None


@lru_cache(maxsize=1)
def data() -> dict:
    return json.loads(resources.files("rocm_dl_guide").joinpath(WSL_FILE).read_text("utf-8"))


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", version)[:4])


def wsl_release(version: str) -> dict | None:
    """The WSL entry for ``version``: its own, or the entry whose ``through`` line
    (``7.2.x``) covers it; None for a release with no WSL recipe."""
    for rel in data()["releases"]:
        if _key(rel["rocm"]) == _key(version):  # 6.4.2.1 is a release of its own
            return rel
        through = rel.get("through", "")
        if through.endswith(".x") and _key(version)[:2] == _key(through)[:2]:
            if _key(version) >= _key(rel["rocm"]):
                return rel
    return None


def _recipe(rel: dict) -> str:
    steps = [s for s in rel["recipe"] if not s.startswith(("Install the ROCm", "wget", "sudo apt"))]
    words = f"ROCm {rel['rocm']} under WSL 2: " + "; ".join(steps)
    if rel.get("runtime_package"):
        words += f" (its WSL runtime is the {rel['runtime_package']} package)"
    if rel.get("ubuntu"):
        words += f"; for Ubuntu {' and '.join(rel['ubuntu'])}"
    driver = rel.get("windows_driver")
    if driver:
        newer = " or newer" if driver.get("or_newer") else ""
        words += f"; Windows driver: {driver['product']} {driver['version']}{newer}"
    return words


def releases_words() -> str:
    """The releases that have a WSL recipe, by kind."""
    rels = data()["releases"]
    rocr = [r["rocm"] for r in rels if r["recipe_kind"] == "rocr4wsl"]
    dxg = [r["rocm"] + (f" to {r['through']}" if r.get("through") else "") for r in rels
           if r["recipe_kind"] == "librocdxg"]  # fmt: skip
    return (
        f"the releases with a WSL recipe are {', '.join(rocr)} (amdgpu-install -y "
        "--usecase=wsl,rocm --no-dkms, which installs the hsa-runtime-rocr4wsl-amdgpu runtime) "
        f"and {', '.join(dxg)} (AMD's librocdxg library with HSA_ENABLE_DXG_DETECTION=1)"
    )


def wsl_fix(text: str) -> tuple[str, list[str]]:
    """(fix, premises) for ROCm under WSL, keyed by the release the text shows."""
    version = release_in(text)
    premises = [f"WSL 2 (the text shows: {WSL_SIGNS.search(text).group(0)})"]
    driver = "no Linux kernel driver belongs inside WSL (no DKMS module): the GPU is reached "
    driver += "through AMD's Windows driver and /dev/dxg"
    words = []
    if version:
        premises.append(f"ROCm {version} (named in the text)")
        rel = wsl_release(version)
        if rel is None:
            words.append(
                f"ROCm {version} has no WSL recipe in doctor's data (AMD publishes WSL support "
                f"for some releases only): {releases_words()}; install one of those"
            )
        else:
            words.append(_recipe(rel))
    else:
        words.append(f"the text does not show the ROCm release; {releases_words()}")
    distro = _OTHER_DISTRO.search(text)
    if distro:
        premises.append(f"{distro.group(1)} (named in the text)")
        words.append(
            f"AMD's WSL recipes are for Ubuntu (22.04, and 24.04 from 6.2.3), not {distro.group(1)}"
        )
    if re.search(r"/dev/kfd", text):
        words.append(
            "WSL has no /dev/kfd: a container under WSL gets --device=/dev/dxg and the WSL "
            "libraries (-v /usr/lib/wsl/lib/libdxcore.so:/usr/lib/libdxcore.so, with librocdxg "
            "from 7.2.1), never --device=/dev/kfd"
        )
    words += _gpu_words(text) + _torch_words(text, version)
    words.append(driver)
    return "; ".join(words), premises


_TORCH_FAILED = re.compile(
    r"hipErrorNoDevice|No HIP GPUs are available|torch\.cuda\.is_available\(\)|"
    r"download\.pytorch\.org/whl/rocm"
)


def _torch_words(text: str, version: str | None) -> list[str]:
    """PyTorch under WSL: AMD's WSL wheels, and the wheel's own HSA runtime removed
    where the release's recipe says so (the rocr4wsl releases)."""
    if not _TORCH_FAILED.search(text):
        return []
    rel = wsl_release(version) if version else None
    if rel is not None and rel["recipe_kind"] != "rocr4wsl":
        return []
    steps = [s for r in data()["releases"] for s in r["recipe"] if "libhsa-runtime64" in s]
    step = next((s for s in (rel or {}).get("recipe", []) if "libhsa-runtime64" in s), steps[0])
    rocr = [r["rocm"] for r in data()["releases"] if r["recipe_kind"] == "rocr4wsl"]
    where = f"ROCm {rel['rocm']}'s" if rel else f"the rocr4wsl releases' ({rocr[0]} to {rocr[-1]})"
    pypi = " (the text installs download.pytorch.org's)" if "download.pytorch.org" in text else ""
    return [
        f"PyTorch under WSL needs AMD's WSL wheels from repo.radeon.com, not PyTorch's own"
        f"{pypi}: a wheel bundles its own libhsa-runtime64.so, which does not know WSL; "
        f"{where} recipe: {step[0].lower()}{step[1:]}"
    ]


@lru_cache(maxsize=1)
def matrix_targets() -> frozenset[str]:
    """The targets of the GPUs in AMD's WSL support matrix (:data:`wsl.MATRIX`)."""
    from . import products, wsl

    return frozenset(g.gfx for name in wsl.MATRIX[0]["gpus"] for g in products.named_gpus(name))


def _gpu_words(text: str) -> list[str]:
    """GPUs the text names that AMD's WSL support matrix does not list."""
    from . import products

    outside = [g for g in products.named_gpus(text) if g.gfx not in matrix_targets()]
    return [
        f"{g.name} ({g.gfx}) is not in AMD's WSL support matrix (librocdxg's README: RDNA 3 "
        "and RDNA 4 Radeon and Radeon PRO GPUs, Ryzen AI APUs), so ROCm under WSL does not "
        "support it: use native Linux, where doctor's GPU checks say whether ROCm supports it"
        for g in outside
    ]
