"""Serving: ``transformers serve`` on 127.0.0.1 answers a real OpenAI client (the
model listed, whole and streamed completions, concurrent requests), a port in
use or a server that dies at start gives one clear error, and stopping leaves
no process behind."""

from __future__ import annotations

import os
import socket
import time

import pytest
import torch

from rocm_dl_guide.core import profiles
from rocm_dl_guide.lm import model as models
from rocm_dl_guide.lm import pretrain, serving

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

    data = pretrain.load("smoke")
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
    monkeypatch.setattr(lora, "base_weights", lambda profile=None: weights)

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


@pytest.mark.timeout(300)
def test_models_lists_the_served_model(server, folder):
    assert serving.list_models(server) == [server.model_id]
    assert server.model_id == str(folder.resolve())
    assert server.url == f"http://127.0.0.1:{server.port}/v1"


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


@pytest.mark.timeout(180)
def test_concurrent_requests_all_succeed_and_are_measured(server):
    answers = serving.send_concurrently(server, 8, 8, max_tokens=8)
    assert len(answers) == 8 and all(a.tokens == 8 and a.text for a in answers)
    assert len({a.text for a in answers}) == 1  # same prompt, greedy: same text
    rows = [serving.measure(server, c, requests_per_level=c * 2, max_tokens=16) for c in (1, 8)]
    assert [r.concurrency for r in rows] == [1, 8]
    assert all(r.continuous_batching and r.ttft_ms > 0 for r in rows)
    assert all(r.tokens_per_s_total > 0 and r.tokens_per_s_per_request > 0 for r in rows)
    # throughput against concurrency is the page's measurement: on a shared CPU it varies
    assert serving.scaling(rows) > 0


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
    deadline = time.monotonic() + 30
    while server.alive() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not server.alive()
    server.stop()


@pytest.mark.timeout(60)
def test_serve_on_a_port_in_use_fails_in_one_line_before_any_work(capsys):
    from rocm_dl_guide.cli import main

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        started = time.monotonic()
        assert main(["serve", "--port", str(port), "--profile", "smoke"]) == 1
    assert time.monotonic() - started < 10  # no model folder written, no process started
    err = capsys.readouterr().err.strip()
    expected = f"serve: port {port} on 127.0.0.1 is in use: stop what listens there"
    assert err == f"{expected} or pick another port"


def test_vllm_is_started_with_the_same_settings_or_refused_with_the_reason(folder, capsys):
    from rocm_dl_guide.cli import main

    settings = serving.Server(folder, continuous_batching=False).settings()
    args = serving.vllm_args(settings)
    assert args[:4] == [
        "--model",
        str(folder.resolve()),
        "--served-model-name",
        str(folder.resolve()),
    ]
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
