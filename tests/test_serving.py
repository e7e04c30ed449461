"""Serving: ``transformers serve`` on 127.0.0.1 answers a real OpenAI client (the
model listed under its short name, whole and streamed completions and chats,
concurrent requests) and a client of plain HTTP (server-sent events read by
hand); a request it cannot serve is a 400 with the reason; a port in use or a
server that dies at start gives one clear error; stopping, or Ctrl-C on
``serve``, leaves no process behind."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest
import torch

from conftest import hang_limit
from rocm_dl_guide.core import profiles
from rocm_dl_guide.lm import model as models
from rocm_dl_guide.lm import pretrain, serve_api, serving, serving_measure

SMOKE = profiles.current("smoke")

TINY = models.ModelSize(layers=2, width=32, heads=2, ffn=64, context=128)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """A small randomly initialised decoder with the chapter's tokenizer, saved as
    a transformers model folder (what ``model_folder`` exports; no pretraining)."""
    data = pretrain.load(SMOKE)
    lm = models.build(TINY, data.vocab_size, data.eos_id, seed=0)
    path = tmp_path_factory.mktemp("served-model")
    pretrain.export(lm, data.tokenizer, path)
    return path


def test_saving_and_loading_a_model_folder_draws_no_bar(tmp_path, capfd):
    """transformers draws "Writing model shards" and "Loading weights" bars by
    default; in a notebook they become widgets a page cannot render offline
    (the pretraining page had one). Both are off around the guide's calls, and
    transformers' own setting is left as it was."""
    from transformers.utils import logging as hf_logging

    from rocm_dl_guide.lm import lora

    data = pretrain.load(SMOKE)
    lm = models.build(TINY, data.vocab_size, data.eos_id, seed=0)
    capfd.readouterr()
    assert hf_logging.is_progress_bar_enabled()
    pretrain.export(lm, data.tokenizer, tmp_path)
    lora.from_folder(tmp_path)
    err = capfd.readouterr().err
    assert "Writing model shards" not in err and "Loading weights" not in err, err
    assert hf_logging.is_progress_bar_enabled()


def test_model_folder_is_found_from_the_weights_and_written_again_when_they_change(
    tmp_path, monkeypatch
):
    """``model_folder`` serves the folder pretraining wrote next to the weights,
    without loading the model while it is current, and writes it again (the
    new weights) once the weights file changes."""
    from transformers import AutoModelForCausalLM

    from rocm_dl_guide.lm import lora
    from rocm_dl_guide.training import checkpoints

    data = pretrain.load(SMOKE)
    lm = models.build(TINY, data.vocab_size, data.eos_id, seed=0)
    weights = tmp_path / pretrain.WEIGHTS_NAME
    checkpoints.save_weights(lm, weights)
    pretrain.save_folder(lm, data.tokenizer, weights)
    monkeypatch.setattr(lora, "base_weights", lambda profile=None, model=None: weights)

    def not_loaded(*args, **kwargs):
        raise AssertionError("a current folder needs no model")

    monkeypatch.setattr(lora, "base_model", not_loaded)
    assert serving.model_folder(SMOKE) == tmp_path / pretrain.MODEL_FOLDER

    changed = models.build(TINY, data.vocab_size, data.eos_id, seed=1)
    checkpoints.save_weights(changed, weights)
    assert not pretrain.folder_is_current(weights)
    monkeypatch.setattr(lora, "base_model", lambda profile, path: (changed, data.tokenizer, path))
    folder = serving.model_folder(SMOKE)
    assert pretrain.folder_is_current(weights)
    saved = AutoModelForCausalLM.from_pretrained(folder)
    for name, tensor in changed.decoder().state_dict().items():
        assert torch.equal(saved.state_dict()[name], tensor), name


def test_a_model_folder_written_before_the_chat_template_gets_it(tmp_path, monkeypatch):
    """A folder without today's chat template (written before it existed) is not
    current: ``model_folder`` writes it again, template included, which the
    tokenizer then carries."""
    from transformers import AutoTokenizer

    from rocm_dl_guide.lm import lora
    from rocm_dl_guide.training import checkpoints

    data = pretrain.load(SMOKE)
    lm = models.build(TINY, data.vocab_size, data.eos_id, seed=0)
    weights = tmp_path / pretrain.WEIGHTS_NAME
    checkpoints.save_weights(lm, weights)
    target = pretrain.save_folder(lm, data.tokenizer, weights)
    assert pretrain.folder_is_current(weights)
    (target / pretrain.CHAT_TEMPLATE_FILE).unlink()  # as folders were written before
    assert not pretrain.folder_is_current(weights)
    monkeypatch.setattr(lora, "base_weights", lambda profile=None, model=None: weights)
    monkeypatch.setattr(lora, "base_model", lambda profile, path: (lm, data.tokenizer, path))
    assert serving.model_folder(SMOKE) == target
    assert pretrain.folder_is_current(weights)
    tokenizer = AutoTokenizer.from_pretrained(target)
    assert tokenizer.chat_template == pretrain.CHAT_TEMPLATE
    question = [{"role": "user", "content": "What is a list?"}]
    prompt = tokenizer.apply_chat_template(question, add_generation_prompt=True, tokenize=False)
    assert prompt == "<|user|> What is a list?\n<|assistant|>"


@pytest.fixture(scope="module")
def server(folder):
    with serving.Server(folder, lifetime=300) as s:
        yield s


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # a zombie still answers kill(0): its parent has not reaped it
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split(") ")[1].startswith("Z")


def post(server, path: str, body: dict | bytes, timeout: float = 120):
    """``POST`` a body (JSON-encoded if a dict) with plain HTTP: ``(status, text)``."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    request = urllib.request.Request(
        f"{server.url}{path}", data, {"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


@pytest.mark.timeout(300)
def test_models_lists_the_served_model_under_its_short_name(server, folder):
    assert serving.list_models(server) == [server.model_id]
    assert server.model_id == serve_api.served_name(folder) == folder.name
    assert server.url == f"http://127.0.0.1:{server.port}/v1"


def test_the_short_name_is_tiny_lm_or_the_hub_id(tmp_path):
    """A folder pretraining wrote is ``tiny-lm``, a Hub snapshot its Hub id
    (from its manifest), any other folder its own name."""
    from rocm_dl_guide.lm import hub

    assert serve_api.served_name(tmp_path) == tmp_path.name
    (tmp_path / pretrain.SOURCE_FILE).write_text("{}")
    assert serve_api.served_name(tmp_path) == "tiny-lm"
    (tmp_path / hub.MANIFEST).write_text(json.dumps({"repo_id": hub.SMOLLM2_135M.repo_id}))
    assert serve_api.served_name(tmp_path) == "HuggingFaceTB/SmolLM2-135M"


@pytest.mark.timeout(120)
def test_the_model_is_accepted_by_its_short_name_or_its_folder(server):
    for model in (server.model_id, str(server.folder)):
        status, text = post(
            server, "/completions", {"model": model, "prompt": "A", "max_tokens": 2}
        )
        assert status == 200, text
        assert json.loads(text)["model"] == server.model_id  # answers name it by its short name


@pytest.mark.timeout(120)
def test_a_whole_completion_has_the_tokens_asked_for(server):
    out = serving.complete(server, max_tokens=12)
    assert out.tokens == 12 and out.finish_reason == "length"
    assert out.text and out.chunks == [out.text]
    again = serving.complete(server, max_tokens=12)  # greedy: the same answer
    assert again.text == out.text


@pytest.mark.timeout(120)
def test_a_streamed_completion_comes_in_pieces_that_add_up(server):
    whole = serving.complete(server, max_tokens=12)
    streamed = serving.stream(server, max_tokens=12)
    assert len(streamed.chunks) >= 6 and all(streamed.chunks)
    assert "".join(streamed.chunks) == streamed.text == whole.text
    assert streamed.tokens == 12 and streamed.finish_reason == "length"
    assert 0 < streamed.ttft_s < streamed.total_s


def read_events(server, path: str, body: dict) -> list[str]:
    """A streamed request by plain HTTP: the ``data:`` payloads of its server-sent
    events, read line by line (each event is one ``data:`` line and a blank one)."""
    request = urllib.request.Request(
        f"{server.url}{path}",
        json.dumps({**body, "stream": True}).encode(),
        {"Content-Type": "application/json"},
    )
    payloads = []
    with urllib.request.urlopen(request, timeout=120) as answer:
        assert answer.status == 200
        assert answer.headers["Content-Type"].startswith("text/event-stream")
        for raw in answer:
            line = raw.decode().rstrip("\n")
            if line:
                assert line.startswith("data: "), line
                payloads.append(line[len("data: ") :])
    return payloads


@pytest.mark.timeout(180)
def test_a_chat_read_by_hand_from_its_events_is_the_whole_answer(server):
    """Plain HTTP, no OpenAI client: the streamed chat's events end with
    ``data: [DONE]``, and their deltas add up to the whole answer (greedy);
    the same holds for a completion."""
    chat = {
        "model": server.model_id,
        "messages": [{"role": "user", "content": "What is an exception?"}],
        "max_tokens": 10,
        "temperature": 0,
    }
    status, text = post(server, "/chat/completions", chat)
    assert status == 200, text
    whole = json.loads(text)
    assert whole["object"] == "chat.completion" and whole["model"] == server.model_id
    answer = whole["choices"][0]["message"]
    assert answer["role"] == "assistant" and answer["content"]
    assert whole["usage"]["completion_tokens"] == 10

    payloads = read_events(server, "/chat/completions", chat)
    assert payloads[-1] == "[DONE]" and "[DONE]" not in payloads[:-1]
    events = [json.loads(p) for p in payloads[:-1]]
    assert all(e["object"] == "chat.completion.chunk" for e in events)
    assert all(e["model"] == server.model_id for e in events)
    deltas = [e["choices"][0]["delta"] for e in events]
    assert deltas[0].get("role") == "assistant"
    assert "".join(d.get("content") or "" for d in deltas) == answer["content"]
    assert events[-1]["choices"][0]["finish_reason"] == "length"
    assert events[-1]["usage"]["completion_tokens"] == 10
    # the package's own client gets the same answer
    assert serving.chat(server, "What is an exception?", max_tokens=10).text == answer["content"]

    completion = {"model": server.model_id, "prompt": serving.PROMPT, "max_tokens": 8}
    status, text = post(server, "/completions", completion)
    assert status == 200, text
    payloads = read_events(server, "/completions", completion)
    assert payloads[-1] == "[DONE]"
    pieces = [json.loads(p)["choices"][0]["text"] for p in payloads[:-1]]
    assert "".join(pieces) == json.loads(text)["choices"][0]["text"]


BAD_REQUESTS = {
    "negative max_tokens": (
        "/completions",
        {"prompt": "A", "max_tokens": -5},
        "max_tokens",
        "max_tokens must be a whole number of at least 1, not -5",
    ),
    "max_tokens past the context": (
        "/chat/completions",
        {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 100_000},
        "max_tokens",
        "max_tokens must be at most the model's context of 4096 tokens, not 100000",
    ),
    "prompt and max_tokens past the context": (
        "/completions",
        {"prompt": "A", "max_tokens": 4096},
        "max_tokens",
        "the prompt (1 token) and max_tokens 4096 together exceed the model's context of 4096 "
        "tokens: ask for at most 4095",
    ),
    "unknown model": (
        "/completions",
        {"model": "gpt-4", "prompt": "A"},
        "model",
        'unknown model "gpt-4": this server serves "NAME" (also accepted by its folder, "FOLDER")',
    ),
    "malformed JSON": (
        "/chat/completions",
        b'{"model": "x", "messages": [}',
        None,
        "the request body is not valid JSON",
    ),
    "not an object": ("/completions", b"[1, 2]", None, "the request body must be a JSON object"),
    "unsupported parameter": (
        "/chat/completions",
        {"messages": [{"role": "user", "content": "Hi"}], "tools": []},
        "tools",
        "unsupported parameter 'tools': /v1/chat/completions takes frequency_penalty, ",
    ),
    "several answers": (
        "/completions",
        {"prompt": "A", "n": 3},
        "n",
        "n 3 is not supported: this server writes one answer per request",
    ),
    "temperature not a number": (
        "/completions",
        {"prompt": "A", "temperature": "hot"},
        "temperature",
        'temperature must be a number from 0 to 2, not "hot"',
    ),
    "sampling with continuous batching": (
        "/completions",
        {"prompt": "A", "temperature": 0.8},
        "temperature",
        "temperature 0.8 needs a server without continuous batching",
    ),
    "no messages": (
        "/chat/completions",
        {"messages": []},
        "messages",
        "messages must be a non-empty list of messages",
    ),
    "a role the template has no place for": (
        "/chat/completions",
        {"messages": [{"role": "tool", "content": "42"}]},
        "messages",
        "messages[0]'s role must be one of system, user, assistant",
    ),
    "a list of prompts": (
        "/completions",
        {"prompt": ["A", "B"]},
        "prompt",
        "prompt must be a non-empty string",
    ),
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("case", BAD_REQUESTS, ids=list(BAD_REQUESTS))
def test_a_request_the_server_cannot_serve_is_a_400_with_the_reason(server, case):
    path, body, param, message = BAD_REQUESTS[case]
    message = message.replace("NAME", server.model_id).replace("FOLDER", str(server.folder))
    status, text = post(server, path, body)
    assert status == 400, text
    error = json.loads(text)["error"]
    assert error["message"].startswith(message), error["message"]
    assert error["type"] == "invalid_request_error" and error["param"] == param
    assert "\n" not in error["message"]  # one sentence
    assert f"400 /v1{path}: {error['message']}" in server.log_tail(40)  # the log says why too
    assert post(server, "/completions", {"prompt": "A", "max_tokens": 1})[0] == 200


def test_requests_are_checked_before_the_engine_sees_them(folder):
    """What reaches the engine: the model named by its folder, the parameters it
    ignores dropped at their neutral values, greedy decoding where it batches."""
    served = serve_api.Served.load("tiny-lm", str(folder))
    assert served.chat and served.context == 4096
    body = {"model": "tiny-lm", "prompt": "A", "n": 1, "user": "me", "logprobs": None}
    checked = serve_api.check_request(serve_api.COMPLETIONS, json.dumps(body).encode(), served)
    assert checked == {"model": str(folder), "prompt": "A", "temperature": 0}
    served.batching = False
    sampled = {"prompt": "A", "temperature": 0.7, "stop": ["."], "seed": 1}
    checked = serve_api.check_request(serve_api.COMPLETIONS, json.dumps(sampled).encode(), served)
    assert checked == {**sampled, "model": str(folder)}
    with pytest.raises(serve_api.ApiError, match="n 2 is not supported"):
        serve_api.check_request(serve_api.COMPLETIONS, b'{"prompt": "A", "n": 2}', served)
    with pytest.raises(serve_api.ApiError, match="echo true is not supported"):
        serve_api.check_request(serve_api.COMPLETIONS, b'{"prompt": "A", "echo": true}', served)


@pytest.mark.timeout(180)
def test_concurrent_requests_all_succeed_and_are_measured(server):
    answers = serving.send_concurrently(server, 8, 8, max_tokens=8)
    assert len(answers) == 8 and all(a.tokens == 8 and a.text for a in answers)
    assert len({a.text for a in answers}) == 1  # same prompt, greedy: same text
    rows = [
        serving_measure.measure(server, c, requests_per_level=c * 2, max_tokens=16) for c in (1, 8)
    ]
    assert [r.concurrency for r in rows] == [1, 8]
    assert all(r.continuous_batching and r.ttft_ms > 0 for r in rows)
    assert all(r.tokens_per_s_total > 0 and r.tokens_per_s_per_request > 0 for r in rows)
    # throughput against concurrency is the page's measurement: on a shared CPU it varies
    assert serving_measure.scaling(rows) > 0


def test_side_by_side_rounds_interleave_servers_and_levels_and_report_medians(monkeypatch):
    """Every level of every server is warmed once, then each round times each
    (server, level) in turn; a row's total is the median of its rounds, so one
    slowed round (a neighbour on the CPU) moves no row's figure."""
    from types import SimpleNamespace

    batched = SimpleNamespace(engine="transformers", continuous_batching=True)
    serial = SimpleNamespace(engine="transformers", continuous_batching=False)
    calls, clock = [], [0.0]
    slow_round = 1  # the second timed round of every cell runs 10x slower

    def fake_send(server, n, concurrency, max_tokens):
        timed = len(calls) >= 3  # three warm-ups: (batched, 1), (batched, 4), (serial, 4)
        calls.append((server.continuous_batching, n, concurrency, timed))
        rnd = (len(calls) - 4) // 3 if timed else -1
        per_token = 0.010 if server.continuous_batching else 0.020
        step = per_token * (10 if rnd == slow_round else 1)
        clock[0] += step * max_tokens
        return [serving.Completion("x", ["x"], max_tokens, "length", step, step * max_tokens)] * n

    monkeypatch.setattr(serving, "send_concurrently", fake_send)
    monkeypatch.setattr(serving_measure.time, "perf_counter", lambda: clock[0])
    rows = serving_measure.measure_side_by_side([(batched, (1, 4)), (serial, (4,))], 8, rounds=3)
    assert calls[:3] == [(True, 1, 1, False), (True, 4, 4, False), (False, 4, 4, False)]
    timed = [(on, n, c) for on, n, c, t in calls[3:]]
    assert timed == [(True, 3, 1), (True, 4, 4), (False, 4, 4)] * 3  # interleaved, 3 at least
    assert [(r.continuous_batching, r.concurrency, r.requests) for r in rows] == [
        (True, 1, 9),
        (True, 4, 12),
        (False, 4, 12),
    ]
    # the slowed round is outvoted: each figure is the quiet rounds' value
    assert rows[0].tokens_per_s_total == pytest.approx(3 * 8 / (0.010 * 8))
    assert rows[2].tokens_per_s_total == pytest.approx(4 * 8 / (0.020 * 8))
    assert rows[1].ttft_ms == pytest.approx(10.0)
    with pytest.raises(ValueError, match="rounds must be at least 1"):
        serving_measure.measure_side_by_side([(batched, (1,))], 8, rounds=0)


@pytest.mark.timeout(180)
def test_one_at_a_time_a_request_samples_and_a_model_without_chat_template_says_so(
    folder, tmp_path
):
    """Without continuous batching a request has its own sampling settings and
    stop strings; a model without a chat template answers a chat with a 400 that
    points to /v1/completions, never a 500."""
    plain = tmp_path / "no-template"
    shutil.copytree(folder, plain)
    (plain / pretrain.CHAT_TEMPLATE_FILE).unlink()
    with serving.Server(plain, continuous_batching=False, lifetime=150) as server:
        chat = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4}
        for streamed in (False, True):
            status, text = post(server, "/chat/completions", {**chat, "stream": streamed})
            assert status == 400, text
            error = json.loads(text)["error"]
            assert error["message"] == (
                f"the model {server.model_id!r} has no chat template, so it cannot answer chat "
                "requests: send the text to continue to /v1/completions instead"
            )
            assert error["code"] == "no_chat_template"
        sampled = {"prompt": "A", "max_tokens": 4, "temperature": 0.9, "seed": 3, "stop": ["\n"]}
        status, text = post(server, "/completions", sampled)
        assert status == 200, text
        assert json.loads(text)["choices"][0]["finish_reason"] in ("stop", "length")


@pytest.mark.timeout(60)
def test_a_port_in_use_is_one_clear_error(folder):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        server = serving.Server(folder, port=port)
        with pytest.raises(serving.ServingError, match=f"port {port} on 127.0.0.1 is in use"):
            server.start()
        assert server.process is None  # nothing was started


@pytest.mark.timeout(120)
def test_a_server_that_dies_at_start_says_so_with_its_log(tmp_path):
    (tmp_path / "config.json").write_text("{not json")
    server = serving.Server(tmp_path, start_timeout=100)
    with pytest.raises(serving.ServingError) as err:
        server.start()
    message = str(err.value)
    assert message.startswith("the server exited with status")
    assert str(tmp_path) in message and "its log ends:" in message
    assert "Error" in message.split("its log ends:")[1]  # the traceback's last lines
    assert gone(server.process.pid)


@pytest.mark.timeout(180)
def test_servers_started_together_are_all_stopped_when_one_fails(folder, tmp_path):
    (tmp_path / "config.json").write_text("{not json")
    good = serving.Server(folder, lifetime=120)
    broken = serving.Server(tmp_path, start_timeout=100)
    with pytest.raises(serving.ServingError, match="the server exited with status"):
        serving.start_together(good, broken)
    # both were launched before either was waited for; the good one is stopped too
    assert good.process is not None and broken.process is not None
    assert gone(good.process.pid) and gone(broken.process.pid)
    assert not serving.port_in_use(good.port)


@pytest.mark.timeout(180)
def test_stopping_leaves_no_process_behind(folder):
    server = serving.Server(folder, lifetime=120)
    with server:
        pid = server.process.pid
        assert server.alive() and serving.complete(server, max_tokens=2).tokens == 2
    assert not server.alive() and gone(pid)
    assert server.process.returncode is not None
    assert not serving.port_in_use(server.port)


@pytest.mark.timeout(120)
def test_the_server_ends_itself_when_its_lifetime_is_over(folder):
    server = serving.Server(folder, lifetime=1)
    try:
        server.start()
    except serving.ServingError as exc:  # it may end before it answers
        assert "lifetime over" in str(exc)
        return
    assert wait_for(lambda: not server.alive(), hang_limit(10))
    server.stop()


@pytest.mark.timeout(60)
def test_serve_on_a_port_in_use_fails_in_one_line_before_any_work(capsys, monkeypatch):
    from rocm_dl_guide.cli import main

    work = []  # what serve must not do: write (or find) the model folder, start a process
    monkeypatch.setattr(serving, "model_folder", lambda *a, **k: work.append("model folder"))
    monkeypatch.setattr(serving.Server, "launch", lambda *a, **k: work.append("process"))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["serve", "--port", str(port), "--profile", "smoke"]) == 1
    assert work == []
    err = capsys.readouterr().err.strip()
    expected = f"serve: port {port} on 127.0.0.1 is in use: stop what listens there"
    assert err == f"{expected} or pick another port"


def test_vllm_is_started_with_the_same_settings_or_refused_with_the_reason(folder, capsys):
    from rocm_dl_guide.cli import main

    settings = serving.Server(folder, continuous_batching=False).settings()
    args = serving.vllm_args(settings)
    path = str(folder.resolve())
    assert args[:5] == ["--model", path, "--served-model-name", folder.name, path]
    assert args[-2:] == ["--max-num-seqs", "1"]
    assert "--max-num-seqs" not in serving.vllm_args({**settings, "continuous_batching": True})
    with pytest.raises(ValueError, match="unknown engine 'sglang'"):
        serving.Server(folder, engine="sglang")
    why = serving.engine_missing("vllm")
    if why is None:
        pytest.skip("vLLM is installed here")
    assert "rocm/vllm" in why
    server = serving.Server(folder, engine="vllm")
    with pytest.raises(serving.ServingError, match="vLLM is not installed"):
        server.start()
    assert server.process is None
    assert main(["serve", "--engine", "vllm", "--profile", "smoke"]) == 1
    assert capsys.readouterr().err.strip() == f"serve: {why}"


def group_members(pgid: int) -> list[int]:
    """The live processes of process group ``pgid`` (zombies count as gone)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # ended while we looked
        if fields[0] != "Z" and int(fields[2]) == pgid:
            found.append(int(entry))
    return found


def wait_for(condition, seconds: float) -> bool:
    """Whether ``condition()`` holds within ``seconds`` (polled)."""
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def children(pid: int) -> list[int]:
    """The child processes of ``pid`` (every thread's)."""
    found = []
    for task in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{task}/children") as f:
            found += [int(c) for c in f.read().split()]
    return found


@pytest.mark.timeout(240)
def test_serve_prints_curl_lines_that_work_and_ctrl_c_ends_it_with_nothing_left(folder, tmp_path):
    """``serve`` as a reader runs it: it prints the model's name and a curl line
    per endpoint, which answer as pasted (parsed as a shell parses them), logs a
    refused request's reason, and Ctrl-C ends it by itself, the engine and
    everything it started with it, its log file removed and its port free."""
    port = serving.ports.free_ports(1)[0]
    cmd = [sys.executable, "-m", "rocm_dl_guide", "serve", "--model", str(folder)]
    temp = tmp_path / "tmp"  # serve's own temporary folder: what it leaves shows here
    temp.mkdir()
    proc = subprocess.Popen(
        [*cmd, "--port", str(port), "--profile", "smoke"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "TMPDIR": str(temp)},
        # a terminal's Ctrl-C: SIGINT at its default, whatever this process inherited
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        lines = []
        for line in proc.stdout:
            lines.append(line.rstrip("\n"))
            if "stop:" in line:
                break
        url = f"http://127.0.0.1:{port}/v1"
        assert f"serving {folder.name} with transformers serve at {url}" in lines, lines
        curls = {ln.split()[0]: ln.split(None, 1)[1] for ln in lines if "curl " in ln}
        assert set(curls) == {"models:", "completions:", "chat:"}
        for endpoint in ("completions", "chat"):
            args = shlex.split(curls[f"{endpoint}:"])
            assert args[0] == "curl" and args[1].startswith(url)
            body = json.loads(args[args.index("-d") + 1])
            assert body["model"] == folder.name
            request = urllib.request.Request(args[1], json.dumps(body).encode())
            with urllib.request.urlopen(request, timeout=60) as answer:
                assert answer.status == 200  # no Content-Type header needed either
        engines = children(proc.pid)
        assert len(engines) == 1
        assert [p.name for p in temp.iterdir()] != []  # the engine's log, while it runs
        refused = urllib.request.Request(f"{url}/completions", b'{"prompt": "A", "max_tokens": 0}')
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(refused, timeout=60)
        assert err.value.code == 400
        reason = "400 /v1/completions: max_tokens must be a whole number of at least 1, not 0"
        for line in proc.stdout:  # the server's log follows
            if reason in line:
                break
        assert reason in line
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=hang_limit(10)) == 0  # it ends by itself: nobody kills it
        assert all(gone(pid) for pid in engines)
        # nothing the engine started is left (it runs in a process group of its own)
        assert wait_for(lambda: not group_members(engines[0]), hang_limit(2))
        assert list(temp.iterdir()) == []  # its log removed
        with socket.socket() as again:  # its port free: a server may listen there again
            again.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            again.bind(("127.0.0.1", port))
            again.listen()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# ---------------------------------------------------------------- commands for a GPU node


def _server_commands(text: str) -> list[list[str]]:
    """The vLLM and SGLang server commands in a page's bash blocks, as argument lists."""
    import re

    found = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        words = shlex.split(block.replace("\\\n", " "), comments=True)
        for i, word in enumerate(words):
            if word == "vllm" and words[i + 1 : i + 2] == ["serve"]:
                found.append(words[i:])
            elif word == "sglang.launch_server":
                found.append(words[i:])
    return found


def _model_and_tp(command: list[str]) -> tuple[str, int]:
    if command[0] == "vllm":
        model, flag = command[2], "--tensor-parallel-size"
    else:
        model, flag = command[command.index("--model-path") + 1], "--tp"
    tp = int(command[command.index(flag) + 1]) if flag in command else 1
    return model, tp


def test_the_pages_server_commands_split_the_model_as_its_heads_allow():
    """vLLM and SGLang refuse to start when the tensor-parallel size does not
    divide the model's attention heads (or fit its key/value heads): the
    serving page once printed ``--tensor-parallel-size 8`` for SmolLM2-135M,
    whose 9 heads no 8 GPUs can share (issue 44)."""
    from conftest import ROOT
    from rocm_dl_guide.lm import hub

    heads = {hub.SMOLLM2_135M.repo_id: hub.SMOLLM2_135M_HEADS}
    page = (ROOT / "book" / "language-models" / "serving.md").read_text(encoding="utf-8")
    commands = _server_commands(page)
    assert len(commands) == 2  # vLLM's and SGLang's
    for command in commands:
        model, tp = _model_and_tp(command)
        assert model in heads, f"{model}: its heads are not known here; add them to lm.hub"
        assert tp in hub.tensor_parallel_sizes(*heads[model]), (model, tp)
    # The check catches the command the page used to print.
    old = "```bash\nvllm serve HuggingFaceTB/SmolLM2-135M --tensor-parallel-size 8\n```\n"
    model, tp = _model_and_tp(_server_commands(old)[0])
    assert tp not in hub.tensor_parallel_sizes(*heads[model])


def test_tensor_parallel_sizes_follow_the_heads():
    from rocm_dl_guide.lm import hub

    assert hub.tensor_parallel_sizes(*hub.SMOLLM2_135M_HEADS) == [1, 3]
    assert hub.tensor_parallel_sizes(64, 8) == [1, 2, 4, 8]  # e.g. a 70B Llama
    assert hub.tensor_parallel_sizes(14, 2) == [1, 2]  # on 4 GPUs, 3.5 heads each
    assert hub.tensor_parallel_sizes(32, 4, most=16) == [1, 2, 4, 8, 16]  # past 4: copies


def test_the_pages_table_heads_every_field_in_words():
    row = serving_measure.ServeRow("transformers serve", 4, True, 12, 32, 33.1, 178.1, 583.1)
    shown = serving_measure.table([row])[0]
    assert list(shown) == [h for k, h in serving_measure.TABLE_COLUMNS.items() if k != "engine"]
    assert shown["tokens/s in all"] == 583.1 and set(serving_measure.TABLE_FORMATS) <= set(shown)
    assert serving_measure.table([row], engine=True)[0]["engine"] == "transformers serve"
    assert set(serving_measure.TABLE_COLUMNS) == set(row.to_dict())
