"""The OpenAI API's rules, kept in front of ``transformers serve`` (the server side
of :mod:`rocm_dl_guide.lm.serving`).

``transformers serve`` 5.23 answers the requests it can parse and fails on the
rest: a negative ``max_tokens`` gets an empty answer, a parameter it ignores
(``n: 3``) is dropped with a warning in its log, a chat request to a model
without a chat template or a malformed body is a bare 500, requests must name
the model by its folder's path, and a stream ends without OpenAI's final
``data: [DONE]``. :func:`install`, called in the server process before the
engine starts, wraps the engine's FastAPI app in :class:`Guard`, an ASGI app
that, for ``/v1/completions`` and ``/v1/chat/completions``:

- checks each request (:func:`check_request`) and answers what it cannot serve
  with status 400 and one sentence why, in OpenAI's error format
  (``{"error": {"message": ..., "type": "invalid_request_error", "param": ...}}``),
  also written to the server's log;
- accepts the model under its short name (:func:`served_name`: ``tiny-lm``, or
  the Hub id of a Hub snapshot) or its folder's path, and names it by the short
  name in every answer (``/v1/models`` lists that name alone);
- ends every stream with ``data: [DONE]``;
- with continuous batching, where the engine decodes every request with the
  sampling settings of the first one it got, decodes every request greedily
  and refuses other settings (:func:`check_batched`).

Everything else passes through unchanged; an error inside the engine is a 500
whose message names the exception (and the log has its traceback).
:func:`watch` ends the server process when its lifetime is over or the
process that started it is gone.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rocm_dl_guide.core import files

COMPLETIONS, CHAT = "/v1/completions", "/v1/chat/completions"
SAMPLING = {"model", "max_tokens", "temperature", "top_p", "stream", "stop", "seed"}
PARAMS = {
    COMPLETIONS: SAMPLING | {"prompt", "suffix", "frequency_penalty"},
    CHAT: SAMPLING | {"messages", "max_completion_tokens", "frequency_penalty"},
}
"""The parameters each endpoint takes and passes on to the engine."""
IGNORED = {"user": str, "stream_options": dict}
"""Parameters accepted and dropped: an end user's id, and the stream's options
(the last event of a stream always carries the token counts)."""
NEUTRAL = {
    "n": (1,),
    "best_of": (1,),
    "echo": (False,),
    "logprobs": (False, 0),
    "presence_penalty": (0,),
}
"""Parameters the engine does not implement, accepted only at the values that
leave the answer as it is (one answer per request, no log-probabilities)."""
NUMBERS = {
    "max_tokens": (int, 1, None, "a whole number of at least 1"),
    "max_completion_tokens": (int, 1, None, "a whole number of at least 1"),
    "temperature": (float, 0, 2, "a number from 0 to 2"),
    "top_p": (float, 0, 1, "a number above 0 and at most 1"),
    "frequency_penalty": (float, -1, 2, "a number above -1 and at most 2"),
    "seed": (int, 0, 2**32 - 1, "a whole number from 0 to 4294967295"),
}
"""Numeric parameters: type, bounds and how a message states them. ``top_p``
and ``frequency_penalty`` exclude their lower bound (the engine's repetition
penalty is ``1 + frequency_penalty`` and must stay above 0)."""
EXCLUSIVE_LOW = {"top_p", "frequency_penalty"}
ROLES = ("system", "user", "assistant")
MESSAGE_KEYS = {"role", "content", "name"}
CHAT_PROMPT = "What is an exception?"
"""The chat question of the ``curl`` lines :func:`curl_lines` prints."""


class ApiError(ValueError):
    """A request the server cannot serve: status 400 and one sentence why."""

    def __init__(self, message: str, param: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.param, self.code = param, code

    def payload(self) -> dict[str, Any]:
        """The error in OpenAI's format."""
        error = {"message": str(self), "type": "invalid_request_error"}
        return {"error": {**error, "param": self.param, "code": self.code}}


@dataclass
class Served:
    """The model behind the server: its short name, its folder, its context
    length (``None`` where its config has none), its tokenizer, and whether the
    engine batches requests continuously."""

    name: str
    folder: str
    context: int | None
    tokenizer: Any
    batching: bool = True

    @property
    def chat(self) -> bool:
        """Whether the tokenizer has a chat template."""
        return bool(getattr(self.tokenizer, "chat_template", None))

    @classmethod
    def load(cls, name: str, folder: str, batching: bool = True) -> Served:
        """Read the folder's config and tokenizer (not its weights)."""
        from transformers import AutoConfig, AutoTokenizer

        config = AutoConfig.from_pretrained(folder)
        context = getattr(config, "max_position_embeddings", None)
        return cls(name, folder, context, AutoTokenizer.from_pretrained(folder), batching)

    def prompt_tokens(self, endpoint: str, body: dict[str, Any]) -> int:
        """How many tokens the request's prompt is, as the engine will encode it."""
        if endpoint == COMPLETIONS:
            return len(self.tokenizer(body["prompt"])["input_ids"])
        messages = [{"role": m["role"], "content": text_of(m)} for m in body["messages"]]
        ids = self.tokenizer.apply_chat_template(
            messages, add_generation_prompt=True, tokenize=True, return_dict=True
        )["input_ids"]
        return len(ids)


def served_name(folder: str | Path) -> str:
    """The model's short name: the Hub id of a Hub snapshot (its manifest names
    it), ``tiny-lm`` for the folder pretraining wrote, else the folder's name."""
    from rocm_dl_guide.lm import hub, pretrain

    folder = Path(folder)
    try:
        return json.loads((folder / hub.MANIFEST).read_text())["repo_id"]
    except (OSError, ValueError, KeyError, TypeError):
        pass
    return "tiny-lm" if (folder / pretrain.SOURCE_FILE).is_file() else folder.name


def curl_lines(url: str, name: str, prompt: str, max_tokens: int = 16) -> dict[str, str]:
    """Ready-to-paste ``curl`` commands for the two endpoints, by their names."""
    completion = {"model": name, "prompt": prompt, "max_tokens": max_tokens}
    question = [{"role": "user", "content": CHAT_PROMPT}]
    chat = {"model": name, "messages": question, "max_tokens": max_tokens}
    header = "-H 'Content-Type: application/json'"
    return {
        "completions": f"curl {url}/completions {header} -d {shlex.quote(json.dumps(completion))}",
        "chat": f"curl {url}/chat/completions {header} -d {shlex.quote(json.dumps(chat))}",
    }


# --------------------------------------------------------------------------- checking requests


def check_request(endpoint: str, raw: bytes, served: Served) -> dict[str, Any]:
    """The request body for the engine (the model named by its folder, the
    parameters the engine ignores dropped), or :class:`ApiError` saying why not."""
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ApiError(f"the request body is not valid JSON ({exc})") from None
    except RecursionError:
        raise ApiError("the request body is not valid JSON (nested too deeply)") from None
    if not isinstance(body, dict):
        raise ApiError("the request body must be a JSON object")
    body = {key: value for key, value in body.items() if value is not None}
    check_fields(endpoint, body)
    check_model(body, served)
    for key in NUMBERS.keys() & body.keys():
        check_number(key, body[key])
    check_types(body)
    if served.batching:
        check_batched(body)
    if endpoint == COMPLETIONS:
        check_prompt(body)
    else:
        check_messages(body, served)
    check_length(endpoint, body, served)
    return body


def check_fields(endpoint: str, body: dict[str, Any]) -> None:
    """Unknown parameters and parameters the engine does not implement are refused;
    ignored ones (:data:`IGNORED`, :data:`NEUTRAL` at their neutral value) removed."""
    for key in sorted(body.keys() - PARAMS[endpoint]):
        value = body.pop(key)
        if key in IGNORED and isinstance(value, IGNORED[key]):
            continue
        if key in NEUTRAL and is_neutral(value, NEUTRAL[key]):
            continue
        if key in NEUTRAL:
            raise ApiError(
                f"{key} {json.dumps(value)} is not supported: this server writes one answer per "
                f"request without log-probabilities ({key} may only be "
                f"{' or '.join(json.dumps(v) for v in NEUTRAL[key])})",
                param=key,
            )
        takes = ", ".join(sorted(PARAMS[endpoint] | IGNORED.keys()))
        raise ApiError(f"unsupported parameter {key!r}: {endpoint} takes {takes}", param=key)


def is_neutral(value: Any, neutral: tuple[Any, ...]) -> bool:
    """Whether ``value`` is one of ``neutral`` (``true`` is not ``1``, nor ``0`` ``false``)."""
    return any(value == v and isinstance(value, bool) == isinstance(v, bool) for v in neutral)


def check_model(body: dict[str, Any], served: Served) -> None:
    """The model, by its short name or folder (or left out), becomes the folder.
    The folder may be written with ``~`` for the home folder, as messages show it."""
    model = body.get("model", served.folder)
    folder = isinstance(model, str) and os.path.expanduser(model) == served.folder
    if model != served.name and not folder:
        raise ApiError(
            f"unknown model {json.dumps(model)}: this server serves {json.dumps(served.name)} "
            f"(also accepted by its folder, {json.dumps(files.shown(served.folder))})",
            param="model",
            code="model_not_found",
        )
    body["model"] = served.folder


def check_number(key: str, value: Any) -> None:
    kind, low, high, phrase = NUMBERS[key]
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    whole = isinstance(value, int) and not isinstance(value, bool)
    ok = whole if kind is int else number
    if ok:
        above = value > low if key in EXCLUSIVE_LOW else value >= low
        ok = above and (high is None or value <= high)
    if not ok:
        raise ApiError(f"{key} must be {phrase}, not {json.dumps(value)}", param=key)


def check_types(body: dict[str, Any]) -> None:
    """``stream`` a boolean, ``suffix`` a string, ``stop`` up to 4 non-empty strings."""
    if "stream" in body and not isinstance(body["stream"], bool):
        raise ApiError(f"stream must be true or false, not {json.dumps(body['stream'])}", "stream")
    if "suffix" in body and not isinstance(body["suffix"], str):
        raise ApiError("suffix must be a string", param="suffix")
    stop = body.get("stop")
    if stop is not None:
        stops = [stop] if isinstance(stop, str) else stop
        if not (
            isinstance(stops, list)
            and 1 <= len(stops) <= 4
            and all(isinstance(s, str) and s for s in stops)
        ):
            raise ApiError("stop must be a non-empty string or a list of 1 to 4 of them", "stop")


BATCH_NEUTRAL = {"temperature": 0, "top_p": 1, "frequency_penalty": 0}
"""Sampling settings a continuously batching engine serves: greedy decoding."""


def check_batched(body: dict[str, Any]) -> None:
    """With continuous batching, ``transformers serve`` 5.23 decodes every request
    with the sampling settings of the first one it got (only ``max_tokens`` is its
    own) and has no stop strings: requests are decoded greedily (``temperature``
    0, set here for the first one too), and other settings are refused."""
    for key, neutral in BATCH_NEUTRAL.items():
        if key in body and body[key] != neutral:
            raise ApiError(
                f"{key} {json.dumps(body[key])} needs a server without continuous batching: "
                "with it, every request is decoded greedily (temperature 0, top_p 1, "
                "frequency_penalty 0); start it with --no-continuous-batching to sample",
                param=key,
            )
    if "stop" in body:
        raise ApiError(
            "stop needs a server without continuous batching (its batches have no stop "
            "strings): start it with --no-continuous-batching",
            param="stop",
        )
    body["temperature"] = 0


def check_prompt(body: dict[str, Any]) -> None:
    prompt = body.get("prompt")
    if not isinstance(prompt, str) or not prompt:
        raise ApiError(
            "prompt must be a non-empty string (this server takes no lists of prompts "
            "or token ids)",
            param="prompt",
        )


def text_of(message: dict[str, Any]) -> str:
    """A message's text: its content, or its text parts joined by spaces (as the engine does)."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    return " ".join(part["text"] for part in content)


def check_messages(body: dict[str, Any], served: Served) -> None:
    """A chat needs a chat template, and messages of a role and text content."""
    if not served.chat:
        raise ApiError(
            f"the model {served.name!r} has no chat template, so it cannot answer chat "
            "requests: send the text to continue to /v1/completions instead",
            code="no_chat_template",
        )
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise ApiError("messages must be a non-empty list of messages", param="messages")
    for i, message in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(message, dict):
            raise ApiError(f"{where} must be an object with a role and content", "messages")
        extra = sorted(message.keys() - MESSAGE_KEYS)
        if extra:
            raise ApiError(
                f"{where} has {extra[0]!r}, which this server does not take: a message has "
                "a role, content and optionally a name",
                param="messages",
            )
        if message.get("role") not in ROLES:
            raise ApiError(f"{where}'s role must be one of {', '.join(ROLES)}", "messages")
        content = message.get("content")
        parts_ok = isinstance(content, list) and all(
            isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str)
            for p in content
        )
        if not (isinstance(content, str) or parts_ok):
            raise ApiError(
                f"{where}'s content must be text: a string or a list of text parts "
                '({"type": "text", "text": ...})',
                param="messages",
            )


def check_length(endpoint: str, body: dict[str, Any], served: Served) -> None:
    """The prompt and the tokens asked for fit in the model's context."""
    if served.context is None:
        return
    key = "max_completion_tokens" if "max_completion_tokens" in body else "max_tokens"
    limit = body.get(key)
    context = served.context
    if limit is not None and limit > context:
        raise ApiError(
            f"{key} must be at most the model's context of {context} tokens, not {limit}", key
        )
    tokens = served.prompt_tokens(endpoint, body)
    counted = f"{tokens} token{'s' * (tokens != 1)}"
    if tokens >= context:
        raise ApiError(
            f"the prompt ({counted}) fills the model's context of {context} tokens, leaving "
            "no room for an answer: shorten it",
            param="prompt" if endpoint == COMPLETIONS else "messages",
        )
    if limit is not None and tokens + limit > context:
        raise ApiError(
            f"the prompt ({counted}) and {key} {limit} together exceed the model's context "
            f"of {context} tokens: ask for at most {context - tokens}",
            param=key,
        )


# --------------------------------------------------------------------------- the ASGI app


def install(name: str, folder: str, batching: bool = True) -> Served:
    """In the server process, before ``transformers serve`` builds its app: list
    the model as ``name`` in ``/v1/models``, give the app a handler that names
    an engine error in its 500, and wrap the app in :class:`Guard`."""
    from transformers.cli.serving import server as engine
    from transformers.cli.serving.model_manager import ModelManager

    served = Served.load(name, folder, batching)
    entry = {
        "id": name,
        "object": "model",
        "created": int(Path(folder).stat().st_mtime),
        "owned_by": "rocm-dl-guide",
    }
    ModelManager.get_gen_models = staticmethod(lambda cache_dir=None: [entry])
    build = engine.build_server

    def build_guarded(*args: Any, **kwargs: Any) -> Guard:
        app = build(*args, **kwargs)
        app.add_exception_handler(Exception, server_error)
        return Guard(app, served)

    engine.build_server = build_guarded  # Serve imports it when it builds the app
    return served


async def server_error(request: Any, exc: Exception) -> Any:
    """A 500 that names the exception (the traceback goes to the log)."""
    from fastapi.responses import JSONResponse

    message = f"the server failed on this request: {type(exc).__name__}: {exc}"
    log(f"500 {request.url.path}: {message}")
    error = {"message": message, "type": "server_error", "param": None, "code": None}
    return JSONResponse({"error": error}, status_code=500)


def watch(lifetime: float | None, parent: int | None) -> None:
    """SIGTERM this process after ``lifetime`` seconds or once ``parent`` is gone."""
    deadline = None if lifetime is None else time.monotonic() + lifetime

    def loop() -> None:
        while True:
            time.sleep(0.5)
            expired = deadline is not None and time.monotonic() > deadline
            orphaned = parent is not None and os.getppid() != parent
            if expired or orphaned:
                why = "lifetime over" if expired else "parent process gone"
                print(f"stopping the server: {why}", file=sys.stderr, flush=True)
                os.kill(os.getpid(), signal.SIGTERM)
                return

    threading.Thread(target=loop, name="serving-watchdog", daemon=True).start()


def log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


async def read_body(receive: Any) -> bytes:
    chunks, more = [], True
    while more:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunks.append(message.get("body", b""))
        more = message.get("more_body", False)
    return b"".join(chunks)


async def send_json(send: Any, status: int, payload: dict[str, Any]) -> None:
    data = json.dumps(payload).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(data))]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": data, "more_body": False})


class Guard:
    """The engine's ASGI app behind :func:`check_request` (see the module's notes)."""

    def __init__(self, app: Any, served: Served) -> None:
        self.app, self.served = app, served

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        http = scope["type"] == "http" and scope.get("method") == "POST"
        endpoint = scope.get("path") if http else None
        if endpoint not in PARAMS:
            return await self.app(scope, receive, send)
        try:
            body = check_request(endpoint, await read_body(receive), self.served)
        except ApiError as err:
            log(f"400 {endpoint}: {err}")
            return await send_json(send, 400, err.payload())
        data = json.dumps(body).encode()
        headers = [h for h in scope["headers"] if h[0] not in (b"content-type", b"content-length")]
        headers += [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(data))]
        replayed = False

        async def replay() -> dict[str, Any]:
            nonlocal replayed
            if replayed:  # later calls wait for the client to disconnect
                return await receive()
            replayed = True
            return {"type": "http.request", "body": data, "more_body": False}

        answer = Answer(send, self.served.name)
        await self.app({**scope, "headers": headers}, replay, answer)


class Answer:
    """The engine's answer as the client gets it: JSON and events name the model
    by its short name, an error in FastAPI's ``{"detail": ...}`` comes in OpenAI's
    format, and a stream ends with ``data: [DONE]``."""

    def __init__(self, send: Any, name: str) -> None:
        self.send, self.name = send, name
        self.kind: str | None = None
        self.start: dict[str, Any] = {}
        self.buffer = b""
        self.done = False  # the engine ended its stream with [DONE] itself

    async def __call__(self, message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            kind = dict(message.get("headers", [])).get(b"content-type", b"")
            sse, js = kind.startswith(b"text/event-stream"), kind.startswith(b"application/json")
            self.kind = "sse" if sse else "json" if js else None
            self.start = message
            if self.kind != "json":  # JSON's length may change: it starts with its body
                await self.send(message)
            return
        if message["type"] != "http.response.body" or self.kind is None:
            return await self.send(message)
        more = message.get("more_body", False)
        self.buffer += message.get("body", b"")
        if self.kind == "json":
            if not more:
                await self.send_json()
            return
        done, _, self.buffer = self.buffer.rpartition(b"\n\n")
        events = [self.event(e) + b"\n\n" for e in done.split(b"\n\n") if e]
        if not more:
            events += [self.buffer] if self.done else [self.buffer, b"data: [DONE]\n\n"]
        await self.send({"type": "http.response.body", "body": b"".join(events), "more_body": more})

    async def send_json(self) -> None:
        body = self.rename(self.buffer, self.start["status"])
        headers = [h for h in self.start.get("headers", []) if h[0] != b"content-length"]
        headers.append((b"content-length", b"%d" % len(body)))
        await self.send({**self.start, "headers": headers})
        await self.send({"type": "http.response.body", "body": body, "more_body": False})

    def event(self, event: bytes) -> bytes:
        if event.strip() == b"data: [DONE]":
            self.done = True
        elif event.startswith(b"data: "):
            return b"data: " + self.rename(event[len(b"data: ") :])
        return event

    def rename(self, data: bytes, status: int = 200) -> bytes:
        try:
            payload = json.loads(data)
        except ValueError:
            return data
        if not isinstance(payload, dict):
            return data
        if "model" in payload:
            payload["model"] = self.name
        if status >= 400 and "detail" in payload and "error" not in payload:
            kind = "invalid_request_error" if status < 500 else "server_error"
            error = {"message": str(payload["detail"]), "type": kind, "param": None, "code": None}
            payload = {"error": error}
        return json.dumps(payload, separators=(",", ":")).encode()
