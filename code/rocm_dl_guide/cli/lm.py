"""The language-model inference commands: ``generate`` (continue a prompt with
the chapter's model) and ``serve`` (an OpenAI-compatible server for it)."""

from __future__ import annotations

import argparse
import json
import sys

from rocm_dl_guide.cli.common import add_profile_args, fail, positive_int, run_profile

MODEL_HELP = (
    "a transformers model folder (config.json, tokenizer.json, weights) or the weights "
    "'train tiny-lm' saved (default: the pretrained tiny-lm, or SmolLM2-135M with "
    "--data-source real)"
)


def _cmd_generate(args: argparse.Namespace) -> int:
    from rocm_dl_guide.lm import generation, hub

    prof = run_profile("generate", args.profile)
    if args.draft or args.prompt_lookup:
        return _speculative(args, prof)
    try:
        model, tokenizer, source = generation.load(prof, args.model)
        done = generation.complete(
            model,
            tokenizer,
            args.prompt,
            args.max_new_tokens,
            args.cache,
            source,
            args.temperature,
            args.seed,
        )
    except (hub.HubUnavailableError, OSError, RuntimeError, ValueError) as exc:
        return fail("generate", exc)
    if args.json:
        print(json.dumps(done.to_dict()))
        return 0
    print(f"{done.prompt}{done.text}")
    how = (
        f"sampled at temperature {args.temperature}, seed {args.seed}"
        if args.temperature
        else "greedy"
    )
    print(
        f"{done.new_tokens} new tokens in {done.seconds:.2f} s ({done.tokens_per_s:.1f} tokens/s, "
        f"{how}, {done.cache} KV cache), model {source}",
        file=sys.stderr,
    )
    return 0


def _speculative(args: argparse.Namespace, prof) -> int:
    """``generate --draft`` or ``--prompt-lookup``: speculative decoding against
    plain greedy decoding of the same model, side by side."""
    from rocm_dl_guide.lm import generation, hub, speculative

    if args.draft and args.prompt_lookup:
        return fail("generate", "give --draft or --prompt-lookup, not both")
    if args.temperature:
        return fail(
            "generate", "speculative decoding is compared greedily: leave out --temperature"
        )
    try:
        model, tokenizer, source = generation.load(prof, args.model)
        draft = None
        if args.draft == "smoke":
            draft, draft_tokenizer, _ = speculative.draft_model(prof, model.device)
        elif args.draft:
            draft, draft_tokenizer = speculative.load_draft(args.draft, model.device)
        if draft is not None:
            speculative.check_tokenizers(tokenizer, draft_tokenizer)
        method = "draft model" if draft is not None else "prompt lookup"
        gamma = args.draft_tokens if draft is not None else args.prompt_lookup
        done = speculative.versus_greedy(
            model, tokenizer, args.prompt, args.max_new_tokens, method, gamma, draft
        )
    except (hub.HubUnavailableError, OSError, RuntimeError, ValueError) as exc:
        return fail("generate", exc)
    done.update(source=str(source), draft=args.draft)
    if args.json:
        print(json.dumps(done))
        return 0
    print(f"{done['prompt']}{done['text']}")
    alpha = done["acceptance_rate"]
    print(
        f"{method}, {done['gamma']} tokens guessed a round: {done['tokens_per_s']:.1f} tokens/s "
        f"against {done['greedy_tokens_per_s']:.1f} greedy ({done['speedup']:.2f}x), "
        f"acceptance rate {'n/a' if alpha is None else f'{alpha:.0%}'}, "
        f"{'the same tokens as' if done['identical'] else 'OTHER TOKENS THAN'} greedy decoding; "
        f"model {source}",
        file=sys.stderr,
    )
    return 0 if done["identical"] else 1


def _add_generate(sub) -> None:
    from rocm_dl_guide.lm import CACHES

    p = sub.add_parser(
        "generate",
        help="continue a prompt with the language-model chapter's model",
        description="Generation with transformers' generate, greedy unless --temperature: "
        "exactly --max-new-tokens tokens after the prompt. Prints the text, then the speed "
        "on stderr. With --draft or --prompt-lookup: speculative decoding (transformers' "
        "assisted generation), timed against greedy decoding of the same model; --json's "
        "record then holds identical (the same tokens as greedy decoding), speedup, "
        "acceptance_rate and tokens_per_s.",
    )
    p.add_argument("--prompt", required=True, help="the text to continue")
    p.add_argument(
        "--max-new-tokens", type=positive_int, default=64, help="tokens to write (default 64)"
    )
    p.add_argument(
        "--cache",
        choices=CACHES,
        default="dynamic",
        help="KV cache: none (recompute every step), dynamic (default) or static",
    )
    p.add_argument(
        "--temperature",
        type=float,
        default=0.0,
        help="0 (default): greedy; above 0: sample from the 50 likeliest tokens",
    )
    p.add_argument("--seed", type=int, default=0, help="seed of the sampling (default 0)")
    p.add_argument("--model", help=MODEL_HELP)
    p.add_argument(
        "--draft",
        metavar="{smoke|PATH}",
        help="speculative decoding with a draft model, timed against greedy decoding: smoke "
        "(a one-layer draft trained on the chapter's corpus, trained first if missing) or a "
        "transformers model folder with the same tokenizer as the model",
    )
    p.add_argument(
        "--draft-tokens",
        type=positive_int,
        default=4,
        metavar="N",
        help="tokens the draft guesses per round (default 4)",
    )
    p.add_argument(
        "--prompt-lookup",
        type=positive_int,
        metavar="N",
        help="speculative decoding by prompt lookup, guessing up to N tokens a round, "
        "timed against greedy decoding",
    )
    add_profile_args(p)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=_cmd_generate)


def _cmd_serve(args: argparse.Namespace) -> int:
    from rocm_dl_guide.lm import hub, serving

    prof = run_profile("serve", args.profile)
    try:
        batching = not args.no_continuous_batching
        return serving.serve_forever(prof, args.port, batching, args.engine, args.model)
    except (hub.HubUnavailableError, serving.ServingError, OSError, ValueError) as exc:
        return fail("serve", exc)


def _add_serve(sub) -> None:
    p = sub.add_parser(
        "serve",
        help="serve the language-model chapter's model with an OpenAI-compatible API",
        description="Starts transformers serve (or vLLM) on 127.0.0.1 with the chapter's model "
        "(the pretrained tiny-lm, or SmolLM2-135M with --data-source real), prints the base URL, "
        "the model's name (tiny-lm, or the Hub id) and a curl line for each endpoint, and serves "
        "/v1/models, /v1/completions and /v1/chat/completions until Ctrl-C. A request the server "
        "cannot serve is answered 400 with the reason. With continuous batching (the default) "
        "every request is decoded greedily; --no-continuous-batching serves one request at a "
        "time with its own temperature, top_p and stop.",
    )
    p.add_argument("--port", type=positive_int, help="the port (default: a free one)")
    p.add_argument(
        "--engine",
        choices=("transformers", "vllm"),
        default="transformers",
        help="transformers serve (default) or vLLM, where it is installed",
    )
    p.add_argument(
        "--no-continuous-batching",
        action="store_true",
        help="serve one request at a time instead of batching the requests in flight",
    )
    p.add_argument("--model", help=MODEL_HELP)
    add_profile_args(p)
    p.set_defaults(func=_cmd_serve)


def register(sub) -> None:
    """``generate`` and ``serve``."""
    _add_generate(sub)
    _add_serve(sub)
