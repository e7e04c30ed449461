"""Running the doctor's command-line tools (``rocminfo``, ``amd-smi``, ``rocm-smi``) and
keeping what they printed.

:func:`capture` runs one and returns a :class:`Capture`: its output verbatim,
its exit status, or the sentence saying why there is none (not installed,
timed out, not text). A snapshot keeps the capture as it is, so a report can
be rebuilt elsewhere; :func:`~rocm_dl_guide.doctor.rocminfo.report_from`
parses one.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
from dataclasses import dataclass

from .agents import RocminfoError


def _kill(proc: subprocess.Popen[bytes]) -> None:
    """Kill the process and anything it started (it runs in its own session)."""
    try:
        if hasattr(os, "killpg"):
            os.killpg(proc.pid, signal.SIGKILL)
        else:  # pragma: no cover - Windows
            proc.kill()
    except (ProcessLookupError, PermissionError, OSError):
        try:
            proc.kill()
        except OSError:
            pass


@dataclass(frozen=True)
class Capture:
    """What one run of ``rocminfo`` (or another tool) left behind, before parsing:
    enough to parse it again elsewhere (a doctor snapshot keeps it verbatim)."""

    executable: str
    text: str | None = None
    """Standard output, then standard error, as printed; None when nothing ran."""
    returncode: int | None = None
    error: str | None = None
    """Why there is no output (not installed, timed out, not text); else None."""


def capture(
    executable: str = "rocminfo", timeout: float = 30, args: tuple[str, ...] = ()
) -> Capture:
    """Run ``rocminfo`` (or ``executable`` with ``args``: the doctor runs ``amd-smi``
    and ``rocm-smi`` through here too) and keep what it printed. Never raises for
    a failed run: a missing executable, a timeout or output that is not text is a
    :attr:`Capture.error`. A timeout kills the process and what it started (its
    own session), nothing else. Only misuse (an empty name, a non-positive
    timeout) raises :class:`RocminfoError`."""
    if not isinstance(executable, str) or not executable.strip():
        raise RocminfoError("run() needs the name or path of the rocminfo executable")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise RocminfoError(f"run() needs a positive timeout in seconds, not {timeout!r}")

    def failed(error: str) -> Capture:
        return Capture(executable, error=error)

    is_path = os.sep in executable or (os.altsep is not None and os.altsep in executable)
    resolved = executable if is_path else shutil.which(executable)
    if resolved is None:
        return failed(f"{executable} is not installed (not found on PATH).")
    if is_path and not os.path.exists(resolved):
        name = os.path.basename(executable)
        return failed(f"{name} is not installed at {executable} (no such file).")
    try:
        proc = subprocess.Popen(
            [resolved, *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except FileNotFoundError:
        return failed(f"{executable} is not installed (not found on PATH).")
    except PermissionError:
        return failed(f"{executable} cannot be run (permission denied: is it executable?).")
    except OSError as exc:
        return failed(f"{executable} could not be started ({exc.strerror or exc}).")
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill(proc)
        try:
            proc.communicate(timeout=5)
        except (subprocess.TimeoutExpired, OSError, ValueError):
            pass
        shown = " ".join((executable, *args))
        return failed(f"{shown} did not finish within {timeout:g} seconds and was stopped.")
    try:
        text = out.decode("utf-8") + ("\n" + err.decode("utf-8") if err else "")
    except UnicodeDecodeError:
        return failed(f"{executable} printed output that is not valid UTF-8 text.")
    return Capture(executable, text=text, returncode=proc.returncode)


def exit_status(code: int) -> str:
    """``exited with status 1`` or ``was killed by signal SIGSEGV`` (a negative code)."""
    if code >= 0:
        return f"exited with status {code}"
    try:
        return f"was killed by signal {signal.Signals(-code).name}"
    except ValueError:
        return f"was killed by signal {-code}"


def short(text: str, limit: int = 300) -> str:
    """``text`` on one line (whitespace runs made one space), cut to ``limit`` characters
    with ``...``: a tool's or a file's text quoted in an error sentence."""
    text = " ".join((text or "").split())
    return text if len(text) <= limit else text[: limit - 3] + "..."
