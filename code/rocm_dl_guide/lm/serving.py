"""Serving the chapter's language model behind an OpenAI-compatible HTTP API.

The engine is ``transformers serve`` (transformers 5.23): FastAPI and uvicorn
in front of the library's own generation, with ``/v1/completions`` and
``/v1/chat/completions`` (whole, or streamed as server-sent events) and an
optional continuous-batching scheduler over a paged KV cache. Measured here,
it needs these adjustments, and :func:`run_engine` (the server process) makes
them and nothing else:

- pinned to a local model folder, its ``/v1/models`` lists the Hugging Face
  cache rather than the served model, it accepts requests only under the
  folder's path as the model's name, and it answers a request it cannot serve
  (a chat without a chat template, ``max_tokens: -5``, a body that is not
  JSON) with an empty answer or a bare 500. :mod:`rocm_dl_guide.lm.serve_api`
  wraps its app: the model is listed and named by a short name
  (:attr:`Server.model_id`: ``tiny-lm``, or the Hub id; the path is still
  accepted), every request is checked and answered 400 with the reason where
  it cannot be served, and streams end with ``data: [DONE]``. Its continuous
  batching decodes every request with the first request's sampling settings,
  so there requests are decoded greedily and other settings refused.
- on a CPU its continuous batching sizes the KV cache from the free memory
  (about a minute before the first answer on two cores); here the cache gets
  a fixed size (:data:`CPU_CACHE`), which a model of 128 positions never fills.

The chapter's model answers chats through its chat template
(:data:`rocm_dl_guide.lm.pretrain.CHAT_TEMPLATE`).

:class:`Server` starts the engine as a child process on 127.0.0.1 and a free
port, waits for ``/health`` within a time limit and stops it with SIGTERM to
its own process group (SIGKILL after a grace period); a port in use or an
engine that dies reports one :class:`ServingError` with the end of its log.
The engine also ends itself after ``lifetime`` seconds or when the process
that started it is gone, so a crashed notebook leaves no server behind.
Where vLLM is installed (AMD's ``rocm/vllm`` container), ``Server(...,
engine="vllm")`` starts vLLM's OpenAI server on the same folder instead, under
the same time limits, and the same client measures it.
:func:`complete`, :func:`stream` and :func:`chat` send requests with the ``openai``
client; :mod:`rocm_dl_guide.lm.serving_measure` times concurrent ones.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rocm_dl_guide.core import ports, profiles
from rocm_dl_guide.lm import corpus, pretrain, serve_api

ENGINE = "transformers serve"
"""The engine's name in :class:`~rocm_dl_guide.lm.serving_measure.ServeRow`."""
ENGINES = {"transformers": ENGINE, "vllm": "vLLM"}
"""The engines :class:`Server` starts, by their short names: ``transformers
serve`` everywhere, vLLM where it is installed (AMD's ``rocm/vllm`` container on
a ROCm node)."""
LEVELS = (1, 4, 16)
"""Concurrency levels measured: requests in flight at once."""
MAX_TOKENS = {"smoke": 32, "gpu": 64}
"""New tokens per measured request, per profile (``full`` takes ``gpu``'s)."""
PROMPT = corpus.PROMPT
"""The prompt of the measured requests (the other pages of the chapter use it too)."""
CPU_CACHE = {"num_blocks": 64, "max_batch_tokens": 512}
"""Continuous batching's KV cache on a CPU: 64 blocks of 256 positions per
layer, and at most 512 tokens per forward pass."""
START_TIMEOUT_S = 180.0
"""How long :class:`Server` waits for the engine to answer ``/health``."""
STOP_GRACE_S = 10.0
"""How long a SIGTERM'ed engine gets to finish before SIGKILL."""
LIFETIME_S = 900.0
"""Default lifetime of a server started by a page or test, after which it ends itself."""


class ServingError(RuntimeError):
    """The server could not start or stopped answering: one line why, then its log's end."""


# --------------------------------------------------------------------------- the model folder


def model_folder(profile: profiles.Profile, model: str | None = None) -> Path:
    """The profile's language model (or ``model``: a model folder, or the weights
    ``train tiny-lm`` saved) as a ``transformers`` model folder, which the
    engine loads: SmolLM2-135M's own folder where the profile uses it, otherwise
    the folder that pretraining ``tiny-lm`` wrote next to its weights (pretrained
    first if missing). Where that folder is missing or holds older weights (a
    run under ``torchrun``, or weights copied in), the model is loaded and the
    folder written again; a current folder is found from the weights file's
    size and time alone."""
    from rocm_dl_guide.lm import lora

    path = lora.base_weights(profile, model)
    if path.is_dir():
        return path
    if not pretrain.folder_is_current(path):
        lm, tokenizer, _ = lora.base_model(profile, path)
        pretrain.save_folder(lm, tokenizer, path)
    return pretrain.folder_for(path)


# --------------------------------------------------------------------------- the server process


def engine_missing(engine: str) -> str | None:
    """Why ``engine`` (a key of :data:`ENGINES`) cannot start here, or ``None``."""
    import importlib.util

    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}: one of {', '.join(ENGINES)}")
    if engine == "vllm" and importlib.util.find_spec("vllm") is None:
        return (
            "vLLM is not installed here: it runs in AMD's rocm/vllm container on a ROCm "
            "node (or after pip install vllm)"
        )
    return None


def vllm_args(settings: dict[str, Any]) -> list[str]:
    """vLLM's OpenAI server's arguments for the same settings: the folder served
    under its short name and its path, as with ``transformers serve``; without
    continuous batching, one sequence at a time (``--max-num-seqs 1``)."""
    names = [settings["name"], settings["folder"]]
    args = ["--model", settings["folder"], "--served-model-name", *names]
    args += ["--host", settings["host"], "--port", str(settings["port"])]
    if not settings["continuous_batching"]:
        args += ["--max-num-seqs", "1"]
    return args


def run_engine(settings: dict[str, Any]) -> None:
    """The server process: ``transformers serve`` pinned to ``settings["folder"]``,
    behind :mod:`~rocm_dl_guide.lm.serve_api`'s checks (see the module's notes), or vLLM's
    OpenAI server on it where ``settings["engine"]`` says so. Blocks until
    SIGTERM, ``settings["lifetime"]`` seconds, or the parent process's end."""
    if settings.get("engine") == "vllm":
        import runpy

        serve_api.watch(settings.get("lifetime"), settings.get("parent"))
        sys.argv = ["vllm", *vllm_args(settings)]
        runpy.run_module("vllm.entrypoints.openai.api_server", run_name="__main__", alter_sys=True)
        return
    from transformers.cli.serve import Serve

    folder = settings["folder"]
    serve_api.install(settings["name"], folder, settings["continuous_batching"])
    serve_api.watch(settings.get("lifetime"), settings.get("parent"))
    cb = settings.get("cb") or {}
    Serve(
        force_model=folder,
        continuous_batching=settings["continuous_batching"],
        device=settings.get("device", "auto"),
        cb_num_blocks=cb.get("num_blocks"),
        cb_max_batch_tokens=cb.get("max_batch_tokens"),
        host=settings["host"],
        port=settings["port"],
        default_seed=0,
    )


def port_in_use(port: int, host: str = "127.0.0.1") -> bool:
    """Whether something already listens on ``host:port`` (connections of a server
    that stopped, in TIME_WAIT, do not count: uvicorn binds with SO_REUSEADDR too)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return True
    return False


def check_port(port: int, host: str = "127.0.0.1") -> None:
    """One :class:`ServingError` where something already listens on ``host:port``."""
    if port_in_use(port, host):
        raise ServingError(
            f"port {port} on {host} is in use: stop what listens there or pick another port"
        )


class Server:
    """The engine as a child process on ``host:port`` (a free port by default),
    started by ``with Server(folder) as server:`` or :meth:`start`, stopped by
    leaving the block or :meth:`stop`. ``name`` is the model's name in the API
    (default: :func:`~rocm_dl_guide.lm.serve_api.served_name`)."""

    def __init__(
        self,
        folder: str | os.PathLike,
        port: int | None = None,
        continuous_batching: bool = True,
        start_timeout: float = START_TIMEOUT_S,
        lifetime: float | None = LIFETIME_S,
        host: str = "127.0.0.1",
        engine: str = "transformers",
        name: str | None = None,
    ) -> None:
        engine_missing(engine)  # an unknown name fails here, at once
        self.engine = engine
        self.folder = Path(folder).resolve()
        self.name = name or serve_api.served_name(self.folder)
        self.port = port if port is not None else ports.free_ports(1, host)[0]
        self.host = host
        self.continuous_batching = continuous_batching
        self.start_timeout = start_timeout
        self.lifetime = lifetime
        self.process: subprocess.Popen[bytes] | None = None
        self.log_path: Path | None = None

    @property
    def url(self) -> str:
        """The OpenAI base URL, ``http://HOST:PORT/v1``."""
        return f"http://{self.host}:{self.port}/v1"

    @property
    def model_id(self) -> str:
        """The model's name in requests, answers and ``/v1/models`` (the folder's
        path is accepted in requests too)."""
        return self.name

    def settings(self) -> dict[str, Any]:
        """What :func:`run_engine` gets in the child process."""
        import torch

        on_gpu = torch.cuda.is_available()
        return {
            "engine": self.engine,
            "name": self.name,
            "folder": str(self.folder),
            "host": self.host,
            "port": self.port,
            "continuous_batching": self.continuous_batching,
            "device": "auto" if on_gpu else "cpu",
            "cb": None if on_gpu else CPU_CACHE,
            "lifetime": self.lifetime,
            "parent": os.getpid(),
        }

    def start(self) -> Server:
        """Start the engine (unless :meth:`launch` did) and wait until it answers;
        :class:`ServingError` if it cannot."""
        if self.process is None:
            self.launch()
        try:
            self.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def launch(self) -> Server:
        """Start the engine's process and return at once (:meth:`wait_ready` waits
        for it to answer): servers launched one after the other load side by side."""
        why = engine_missing(self.engine)
        if why:
            raise ServingError(why)
        check_port(self.port, self.host)
        fd, name = tempfile.mkstemp(prefix="rocm-dl-guide-serve-", suffix=".log")
        self.log_path = Path(name)
        env = dict(os.environ, HF_HUB_OFFLINE="1", HF_HUB_DISABLE_TELEMETRY="1")
        with os.fdopen(fd, "wb") as log:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "rocm_dl_guide.lm.serving", json.dumps(self.settings())],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,  # its own process group, which stop() signals
            )
        return self

    def wait_ready(self) -> None:
        """Poll ``/health`` until it answers 200, the engine exits or the time is up."""
        import requests

        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise self.failure(f"the server exited with status {self.process.returncode}")
            with contextlib.suppress(requests.RequestException):
                if requests.get(f"http://{self.host}:{self.port}/health", timeout=2).ok:
                    return
            time.sleep(0.25)
        raise self.failure(f"the server did not answer within {self.start_timeout:.0f} s")

    def log_tail(self, lines: int = 15) -> str:
        """The last ``lines`` lines of the engine's output."""
        if self.log_path is None or not self.log_path.is_file():
            return ""
        text = self.log_path.read_text(errors="replace").splitlines()
        return "\n".join(text[-lines:])

    def log_since(self, offset: int) -> tuple[str, int]:
        """The engine's whole lines of output from byte ``offset`` on, and the offset after them."""
        if self.log_path is None or not self.log_path.is_file():
            return "", offset
        with self.log_path.open("rb") as f:
            f.seek(offset)
            data = f.read()
        data = data[: data.rfind(b"\n") + 1]
        return data.decode(errors="replace"), offset + len(data)

    def failure(self, why: str) -> ServingError:
        """One :class:`ServingError`: why, the port taken where the log says so, the log's end."""
        tail = self.log_tail()
        if "address already in use" in tail.lower():
            why = f"port {self.port} on {self.host} is in use ({why})"
        return ServingError(
            f"{why}; {ENGINES[self.engine]} on {self.folder}, its log ends:\n{tail}"
        )

    def alive(self) -> bool:
        """Whether the engine process is still running."""
        return self.process is not None and self.process.poll() is None

    def stop(self, grace: float = STOP_GRACE_S) -> int | None:
        """SIGTERM the engine's process group, SIGKILL it after ``grace`` seconds;
        its exit status (``None`` if it never started). Removes the log."""
        proc = self.process
        if proc is None:
            return None
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, sig)
            try:
                proc.wait(timeout=grace)
                break
            except subprocess.TimeoutExpired:
                continue
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)  # helpers it may have left in its group
        if self.log_path is not None:
            self.log_path.unlink(missing_ok=True)
        return proc.returncode

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def start_together(*servers: Server) -> tuple[Server, ...]:
    """Launch every server at once, then wait until each answers: they load side
    by side instead of one after the other. If one cannot start, all are stopped."""
    try:
        for server in servers:
            server.launch()
        for server in servers:
            server.start()
    except BaseException:
        for server in servers:
            server.stop()
        raise
    return servers


# --------------------------------------------------------------------------- the client


def client(server: Server, timeout: float = 120.0) -> Any:
    """An ``openai.OpenAI`` client for ``server`` (no key needed; none is sent anywhere else)."""
    import openai

    return openai.OpenAI(base_url=server.url, api_key="none", timeout=timeout, max_retries=0)


def list_models(server: Server) -> list[str]:
    """The model ids ``/v1/models`` lists."""
    return [m.id for m in client(server).models.list().data]


@dataclass
class Completion:
    """One answer: its text, the pieces it came in (one for a whole answer), its
    token count, why it ended, and the time to its first piece and to its end."""

    text: str
    chunks: list[str]
    tokens: int
    finish_reason: str | None
    ttft_s: float
    total_s: float


def complete(server: Server, prompt: str = PROMPT, max_tokens: int = 16, api: Any = None):
    """A whole completion: one request, one answer (:class:`Completion`)."""
    api = api or client(server)
    start = time.perf_counter()
    out = api.completions.create(
        model=server.model_id, prompt=prompt, max_tokens=max_tokens, temperature=0
    )
    elapsed = time.perf_counter() - start
    choice = out.choices[0]
    tokens = out.usage.completion_tokens if out.usage else 0
    return Completion(choice.text, [choice.text], tokens, choice.finish_reason, elapsed, elapsed)


def stream(server: Server, prompt: str = PROMPT, max_tokens: int = 16, api: Any = None):
    """A streamed completion (``"stream": true``, server-sent events): the text
    arrives in pieces; the last event carries the finish reason and token count."""
    api = api or client(server)
    start = time.perf_counter()
    first, chunks, finish, tokens = None, [], None, 0
    # vLLM sends the token count only when asked; transformers serve always does,
    # and does not take the option
    extra = {"stream_options": {"include_usage": True}} if server.engine == "vllm" else {}
    events = api.completions.create(
        model=server.model_id,
        prompt=prompt,
        max_tokens=max_tokens,
        temperature=0,
        stream=True,
        **extra,
    )
    for event in events:
        for choice in event.choices:
            if choice.text:
                first = first if first is not None else time.perf_counter() - start
                chunks.append(choice.text)
            finish = choice.finish_reason or finish
        if event.usage is not None:
            tokens = event.usage.completion_tokens
    total = time.perf_counter() - start
    ttft = first if first is not None else total
    return Completion("".join(chunks), chunks, tokens, finish, ttft, total)


def chat(server: Server, message: str, max_tokens: int = 16, api: Any = None):
    """A whole chat answer to one user message (``/v1/chat/completions``),
    greedy: the model's chat template turns the message into its prompt."""
    api = api or client(server)
    start = time.perf_counter()
    out = api.chat.completions.create(
        model=server.model_id,
        messages=[{"role": "user", "content": message}],
        max_tokens=max_tokens,
        temperature=0,
    )
    elapsed = time.perf_counter() - start
    choice = out.choices[0]
    text = choice.message.content or ""
    tokens = out.usage.completion_tokens if out.usage else 0
    return Completion(text, [text], tokens, choice.finish_reason, elapsed, elapsed)


def send_concurrently(
    server: Server, n: int, concurrency: int, max_tokens: int
) -> list[Completion]:
    """``n`` streamed requests, ``concurrency`` of them in flight at a time."""
    api = client(server)
    with concurrent_pool(concurrency) as pool:
        jobs = [pool.submit(stream, server, PROMPT, max_tokens, api) for _ in range(n)]
        return [job.result() for job in jobs]


def concurrent_pool(workers: int) -> concurrent.futures.ThreadPoolExecutor:
    return concurrent.futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="client")


# --------------------------------------------------------------------------- the command line


def serve_forever(
    profile: profiles.Profile,
    port: int | None = None,
    continuous_batching: bool = True,
    engine: str = "transformers",
    model: str | None = None,
) -> int:
    """Serve the profile's model (or ``model``, see :func:`model_folder`) on
    127.0.0.1:``port`` with ``engine`` until Ctrl-C (or SIGTERM): prints the base
    URL, the model's name and a ``curl`` line for each endpoint, then the
    server's log as it grows (a request refused says why there); returns 0."""
    why = engine_missing(engine)  # before the model folder, which may take a while to write
    if why:
        raise ServingError(why)
    if port is not None:
        check_port(port)
    folder = model_folder(profile, model)
    server = Server(
        folder, port=port, continuous_batching=continuous_batching, lifetime=None, engine=engine
    )
    with server:
        print(f"serving {server.model_id} with {ENGINES[engine]} at {server.url}", flush=True)
        print(f"  models:      curl {server.url}/models", flush=True)
        for endpoint, line in serve_api.curl_lines(server.url, server.model_id, PROMPT).items():
            print(f"  {endpoint + ':':<12} {line}", flush=True)
        print("  stop:        Ctrl-C", flush=True)
        shown = server.log_since(0)[1]  # the start's output is not repeated
        try:
            while server.alive():
                text, shown = server.log_since(shown)
                print(text, end="", flush=True)
                time.sleep(0.5)
        except KeyboardInterrupt:
            print("stopping the server", flush=True)
        if not server.alive():
            raise server.failure(f"the server exited with status {server.process.returncode}")
    return 0


if __name__ == "__main__":
    run_engine(json.loads(sys.argv[1]))
