"""``kimi-chat run MODEL.gguf [request.json]``: answer an OpenAI chat.completions request with a local
GGUF in llama.cpp (the ``native`` extra): render, tokenize (kimi_chat's tokenizer, ids sent to the
engine), generate (tool calls constrained by llguidance token masks: :mod:`kimi_chat.engines.constrain`), parse. Prints a ``chat.completion``
object, or ``chat.completion.chunk`` objects one per line with ``--stream``. Kimi-K3 (``-d kimi-k3``, or a
GGUF with K3's vocabulary): the K3 prompt (with the request's tool_choice message), the K3 grammar and
parser; ``--kwargs '{"thinking": false}'`` pre-fills the response channel instead of the think channel."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from ..dialect_records import get_dialect
from ..errors import KimiChatError
from ._body import body_options
from ._io import InputError, fail, read_json, request_body, source_name, template_options

_DEFAULT_MESSAGES = [{"role": "user", "content": "Hello!"}]


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser(
        "run",
        help="answer a chat.completions request with a local GGUF (llama.cpp)",
        description="Render, generate and parse an OpenAI chat.completions request on a local GGUF with "
        "llama.cpp (bash .ci/install-native.sh .venv in the checkout). Honours messages, tools, tool_choice (through llguidance "
        "token masks of the Kimi format with the tools' JSON schemas), parallel_tool_calls, max_tokens (or max_completion_tokens), temperature and seed, and "
        "the prompt fields thinking, reasoning_effort and response_format as `kimi-chat render` reads them. "
        "Prints a chat.completion object (or chat.completion.chunk lines with --stream).",
    )
    p.add_argument("model", help="GGUF file")
    p.add_argument("request", nargs="?", default=None,
                   help="request JSON file ({\"messages\": [...], ...} or a list of messages), - for stdin; "
                   "default: a single 'Hello!' user message")
    p.add_argument("--stream", action="store_true", help="print chat.completion.chunk objects, one JSON per line")
    p.add_argument("--dialect", "-d", default=None,
                   help="dialect (default: the request's \"dialect\" key, else the one the GGUF's embedded "
                   "template is identified as, else kimi-k2-instruct)")
    p.add_argument("--max-tokens", type=int, default=None, help="overrides the request's max_tokens (default 256)")
    p.add_argument("--temperature", type=float, default=None, help="overrides the request's temperature")
    p.add_argument("--seed", type=int, default=None, help="overrides the request's seed")
    p.add_argument("--n-ctx", type=int, default=4096, help="context size (default 4096)")
    p.add_argument("--no-grammar", action="store_true", help="do not constrain the output with a grammar")
    p.add_argument("--show-grammar", action="store_true",
                   help="print the constraint generation ran under to stderr: its llguidance Lark grammar, "
                   "whether it enforces every schema exactly, and the notes naming what it does not")
    p.add_argument("--grammar-format", choices=("lark", "gbnf"), default="lark",
                   help="with --show-grammar: lark (what the runtime applies, the default) or gbnf (the "
                   "constraint's GBNF export for llama-server's --grammar, with its own exactness)")
    p.add_argument("--no-reasoning", action="store_true",
                   help="the grammar allows no reasoning (K2: no <think> block; Kimi-K3 with thinking on: the "
                   "pre-filled think channel is closed at once)")
    p.add_argument("--kwargs", metavar="JSON", default=None,
                   help="dialect template options as a JSON object (merged over chat_template_kwargs)")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress line on stderr")
    p.set_defaults(func=run)


def _request(args: argparse.Namespace) -> dict[str, Any]:
    if args.request is None:
        body: dict[str, Any] = {"messages": _DEFAULT_MESSAGES}
    else:
        body = request_body(read_json(args.request), args.request)
    if not isinstance(body["messages"], list):
        raise InputError(f"{source_name(args.request)}: messages must be a list")
    options = template_options(body, args.kwargs)
    max_tokens = args.max_tokens
    if max_tokens is None:
        max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
        if max_tokens is None:
            max_tokens = 256
    temperature = args.temperature if args.temperature is not None else body.get("temperature", 0.8)
    seed = args.seed if args.seed is not None else body.get("seed")
    for name, value, kind in (("max_tokens", max_tokens, int), ("temperature", temperature, (int, float)),
                              ("seed", seed, (int, type(None)))):
        if isinstance(value, bool) or not isinstance(value, kind):
            raise InputError(f"{name}: invalid value {value!r}")
    if max_tokens < 1:
        raise InputError("max_tokens must be at least 1")
    return {
        "messages": body["messages"],
        "tools": body.get("tools"),
        "tool_choice": body.get("tool_choice"),
        "parallel_tool_calls": body.get("parallel_tool_calls", True),
        "dialect": args.dialect or body.get("dialect"),
        "max_tokens": int(max_tokens),
        "temperature": float(temperature),
        "seed": seed,
        "options": options,
        "body": body,
    }


def run_options(body: dict[str, Any], d: Any) -> dict[str, Any]:
    """The template options the body's ``thinking``, ``reasoning_effort`` and ``response_format`` give
    for dialect ``d`` (:func:`kimi_chat.cli._body.body_options`; ``tool_choice`` is read on its own: it
    constrains the generation of every dialect), each field that does not change ``d``'s prompt warned
    about on stderr."""
    def warn(message: str) -> None:
        print(f"kimi-chat: warning: {message}", file=sys.stderr)

    given = template_options(body, None)
    return body_options({k: v for k, v in body.items() if k != "tool_choice"}, d, given, warn)


def _print(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")
    sys.stdout.flush()


def run(args: argparse.Namespace) -> int:
    from ..engines.native import ChatResult, NativeModel, NativeUnavailable

    progress = None if args.quiet else (lambda msg: print(f"kimi-chat: {msg}", file=sys.stderr, flush=True))
    try:
        req = _request(args)
        if req["dialect"] is not None:
            get_dialect(req["dialect"])
        model = NativeModel.load(args.model, dialect=req["dialect"], n_ctx=args.n_ctx, progress=progress)
    except NativeUnavailable as e:
        return fail(str(e))
    except (InputError, KimiChatError, FileNotFoundError) as e:
        return fail(str(e))
    try:
        if progress and req["dialect"] is None:
            progress(f"dialect: {model.dialect.name} ({model.dialect_source})")
        req["options"] = {**run_options(req["body"], get_dialect(req["dialect"] or model.dialect)),
                          **req["options"]}
        kwargs = dict(
            tools=req["tools"], tool_choice=req["tool_choice"], parallel_tool_calls=req["parallel_tool_calls"],
            max_tokens=req["max_tokens"], temperature=req["temperature"], seed=req["seed"],
            grammar=False if args.no_grammar else None, reasoning=not args.no_reasoning, **req["options"],
        )
        created = int(time.time())
        cid = f"chatcmpl-kimi-{created}"
        if args.stream:
            _print(_chunk(cid, created, model.path.name, {"role": "assistant", "content": ""}, None))
        result = None
        for item in model.chat_stream(req["messages"], **kwargs):
            if isinstance(item, ChatResult):
                result = item
            elif args.stream:
                delta = item.to_openai()
                if delta:
                    _print(_chunk(cid, created, model.path.name, delta, None))
        assert result is not None
        if args.show_grammar:
            _show_grammar(result, args.grammar_format)
        if args.stream:
            final = _chunk(cid, created, model.path.name, {}, result.finish_reason)
            final["usage"] = result.usage
            _print(final)
        else:
            result.created = created
            _print(result.to_openai(cid))
    except (InputError, KimiChatError, TypeError, ValueError) as e:
        return fail(str(e))
    finally:
        model.close()
    return 0


def _show_grammar(result: Any, fmt: str) -> None:
    """The constraint of ``result`` on stderr: a comment header (format, exactness, notes), the grammar."""
    c = result.constraint
    if c is None:
        if result.grammar:
            print(result.grammar, file=sys.stderr)
        return
    text, exact = (c.lark, c.exact) if fmt == "lark" else (c.gbnf, c.gbnf_exact)
    lines = [f"# constraint ({'llguidance Lark' if fmt == 'lark' else 'GBNF'}), exact: {str(exact).lower()}"]
    lines += [f"# note: {n.path}: {n.reason}" for n in (c.notes if fmt == "lark" else c.gbnf_notes)]
    print("\n".join(lines + [text]), file=sys.stderr)


def _chunk(cid: str, created: int, model: str, delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
    return {
        "id": cid,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
    }
