"""The C++ example's Python side: its inputs, and a build and run where possible.

``code/cpp`` holds a C++ program that loads the exported Inception v3 with
MIGraphX's C++ API, runs it on one preprocessed photo and compares its logits
with PyTorch's. C++ has no torchvision, so :func:`write_cpp_inputs` writes what
the program reads (``python -m rocm_dl_guide export``), and
:func:`run_cpp_example` configures, builds and runs it with CMake where
MIGraphX's development files are installed, and otherwise says what is missing.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from rocm_dl_guide.core import profiles
from rocm_dl_guide.core.files import atomic_write
from rocm_dl_guide.optimization import backends, inference, onnx_files


def write_cpp_inputs(directory: str | os.PathLike, profile: profiles.Profile) -> dict[str, Path]:
    """Write what the C++ example (``code/cpp``) reads: the ONNX model, the
    preprocessed sample photo as raw float32 (1 x 3 x 299 x 299, C order) and
    PyTorch's logits for it (1 x 1000 float32), to compare with."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    prepared = onnx_files.export_inception(profile, directory / onnx_files.MODEL_FILE)
    x = inference.image_batch()
    logits = inference.torch_logits(prepared.model, x, "cpu")
    files = {
        "model": prepared.onnx.path,
        "input": directory / "input.bin",
        "expected": directory / "expected.bin",
    }
    for key, array in (("input", x), ("expected", logits)):
        with atomic_write(files[key]) as fh:
            fh.write(array.astype("<f4").tobytes())
    return files


CPP_SOURCE_DIR = Path(__file__).resolve().parents[2] / "cpp"
"""``code/cpp`` of a source checkout: the C++ example and its ``CMakeLists.txt``."""


@dataclass
class CppRun:
    """What :func:`run_cpp_example` did."""

    ran: bool
    """True when the example was built and run here."""
    output: str
    """The program's output, or why it was not built."""
    returncode: int | None = None


def migraphx_cmake_dir() -> Path | None:
    """The directory of MIGraphX's CMake package (``migraphx-config.cmake``), if any."""
    for libdir in backends.rocm_lib_dirs():
        candidate = libdir / "cmake" / "migraphx"
        if candidate.is_dir():
            return candidate
    return None


def run_cpp_example(
    files: dict[str, Path], build_dir: str | os.PathLike, source_dir: Path = CPP_SOURCE_DIR
) -> CppRun:
    """Configure, build and run the C++ example on ``files`` (from
    :func:`write_cpp_inputs`) where CMake and MIGraphX's development files are
    installed; elsewhere return, without raising, the reason it was not run."""
    import shutil
    import subprocess

    cmake = shutil.which("cmake")
    missing = []
    if not (source_dir / "CMakeLists.txt").is_file():
        missing.append(f"the sources ({source_dir}) are not in this installation")
    if cmake is None:
        missing.append("CMake is not installed")
    if migraphx_cmake_dir() is None:
        dirs = " or ".join(str(d / "cmake" / "migraphx") for d in backends.rocm_lib_dirs())
        missing.append(f"MIGraphX's development files are not installed (no {dirs})")
    if missing:
        return CppRun(False, "Not built here: " + "; ".join(missing) + ".")
    build = Path(build_dir)
    steps = [
        [cmake, "-S", str(source_dir), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release"],
        [cmake, "--build", str(build), "--parallel"],
    ]
    for step in steps:
        proc = subprocess.run(step, capture_output=True, text=True, timeout=1800)
        if proc.returncode != 0:
            tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-20:])
            return CppRun(False, f"{' '.join(step[1:3])} failed:\n{tail}", proc.returncode)
    exe = build / "inception_inference"
    cmd = [str(exe), str(files["model"]), str(files["input"]), str(files["expected"])]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    return CppRun(True, (proc.stdout + proc.stderr).strip(), proc.returncode)


CPP_TOLERANCE = 1e-3
"""The C++ example's tolerance (``tolerance`` in ``inception_inference.cpp``)."""


def cpp_style_output(files: dict[str, Path], backend: str | None = None) -> str:
    """What the C++ example prints for ``files`` from ``Input parameter`` on,
    computed in Python with ``backend`` (default: auto) on the same input file
    and compared with the same reference file, in the program's own format.
    The latency line is left out: a time from another engine would mislead."""
    model = inference.compile_model(files["model"], backend)
    x = np.fromfile(files["input"], dtype="<f4").reshape(1, 3, 299, 299)
    logits = np.asarray(model.run(x), dtype=np.float64)
    expected = np.fromfile(files["expected"], dtype="<f4")
    probs = np.exp(logits[0] - logits[0].max())
    probs /= probs.sum()
    lines = [
        f"Input parameter '{model.input_name}': {' x '.join(str(n) for n in x.shape)}",
        f"Output: {' x '.join(str(n) for n in logits.shape)}; top classes:",
    ]
    for rank, k in enumerate(np.argsort(-logits[0], kind="stable")[:5], 1):
        lines.append(f"  {rank}. class {k:4d}  p = {probs[k]:.4f}")
    rel = inference.max_rel_error(logits[0], expected)
    lines.append(
        f"Max relative error against the reference: {rel:.2e} (tolerance {CPP_TOLERANCE:.2e})"
    )
    return "\n".join(lines)
