"""SGLang's own chat-serving code (``sglang.srt.entrypoints.openai.serving_chat``), loaded for the tests.

That module cannot be imported on these CPU machines: its base class module
(``serving_base`` -> ``managers.io_struct`` -> ... -> ``torchvision``) needs packages of the GPU
stack. Everything the chat path uses to parse output is importable, though. So the module's source
is loaded as it is installed: every import that works is run, the ones that cannot be imported
are recorded (their names are not used on the parsing path), and ``OpenAIServingChat`` is built
with its base class ``OpenAIServingBase`` replaced by a one-line stand-in that stores the
tokenizer manager (all that base ``__init__`` does besides metrics labels).

:func:`serving_chat` then makes an ``OpenAIServingChat`` whose attributes are the ones its own
``__init__`` sets for a plain model (no chat-encoding spec, no response template), with a scripted
engine: ``tokenizer_manager.generate_request`` yields what SGLang's detokenizer would send
(decoded text per step, ``meta_info`` with the finish reason). Streaming runs the real
``_generate_chat_stream`` (reasoning parser -> tool-call parser -> SSE chunks -> finish reason);
non-streaming runs the real ``_build_chat_response``.
"""

from __future__ import annotations

import ast
import asyncio
import importlib.util
import json
import types
from typing import Any

from tokenizers.decoders import DecodeStream

from sglang.srt.entrypoints.openai.protocol import ChatCompletionRequest
from sglang.srt.parser.reasoning_parser import ReasoningParser

_MODULE = "sglang.srt.entrypoints.openai.serving_chat"


def _load() -> tuple[dict[str, Any], list[str]]:
    spec = importlib.util.find_spec(_MODULE)
    assert spec is not None and spec.origin
    src = open(spec.origin, encoding="utf-8").read()
    tree = ast.parse(src)
    ns: dict[str, Any] = {"__name__": _MODULE + "__loaded", "__file__": spec.origin}
    unavailable: list[str] = []

    class OpenAIServingBase:  # stand-in for the unimportable base: stores the tokenizer manager
        def __init__(self, tokenizer_manager: Any) -> None:
            self.tokenizer_manager = tokenizer_manager
            self.allowed_custom_labels = None

    for node in tree.body:
        code = compile(ast.Module(body=[node], type_ignores=[]), spec.origin, "exec")
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            try:
                exec(code, ns)
            except ImportError:
                unavailable += [a.asname or a.name for a in node.names]
            continue
        if isinstance(node, ast.ClassDef) and node.name == "OpenAIServingChat":
            ns["OpenAIServingBase"] = OpenAIServingBase
        exec(code, ns)
    return ns, unavailable


NS, UNAVAILABLE = _load()
OpenAIServingChat = NS["OpenAIServingChat"]


class ScriptedEngine:
    """Stands in for SGLang's TokenizerManager + scheduler + detokenizer process: yields, one step at
    a time, the decoded text of the given output ids (HF ``DecodeStream``, honouring
    ``skip_special_tokens``), and a ``stop`` finish reason at the end (the stop token itself is not in
    the text, as in SGLang) or ``length`` for a cut output."""

    def __init__(self, tokenizer: Any) -> None:
        self.tokenizer = tokenizer
        self.server_args = None
        self.served_model_name = "kimi"
        self.script: tuple[list[int], list[int], bool, int] | None = None

    def config_value(self, key: str) -> Any:  # pragma: no cover - only used by the real __init__
        raise AssertionError(key)

    async def generate_request(self, adapted_request: Any, raw_request: Any = None):
        from sglang.srt.runtime_context import get_serving

        incremental = get_serving().incremental_streaming_output  # else: cumulative text and ids
        prompt, out, stop, step = self.script
        skip = bool(getattr(adapted_request, "skip_special_tokens", True))
        stream = DecodeStream(skip_special_tokens=skip)
        ids = out[:-1] if stop else out  # the stop token is not detokenized
        done = 0
        text_so_far = ""
        for i in range(0, max(len(out), 1), step):
            new = out[i:i + step]
            last = i + step >= len(out)
            text = ""
            for t in new:
                if done < len(ids):
                    text += stream.step(self.tokenizer._tokenizer, t) or ""
                    done += 1
            text_so_far += text
            finish = ({"type": "stop", "matched": out[-1]} if stop else {"type": "length", "length": len(out)}) if last else None
            yield {
                "text": text if incremental else text_so_far,
                "index": 0,
                "output_ids": new if incremental else out[:i + step],
                "meta_info": {
                    "id": "chatcmpl-test",
                    "finish_reason": finish,
                    "prompt_tokens": len(prompt),
                    "completion_tokens": min(i + step, len(out)),
                    "cached_tokens": 0,
                    "weight_version": "default",
                },
            }


def publish_server_config(namespaces: tuple[str, ...] = ("serving", "observability"), **server_args: Any) -> None:
    """Publish the config ``namespaces`` the chat path reads (default ``serving``/``observability``; the
    constraint tests add ``exec``, where ``--grammar-backend`` is), projected from a real ``ServerArgs``
    the way ``runtime_context._build_config_bags`` does (that function also computes derived leaves of
    other namespaces, which import the GPU stack)."""
    from sglang.srt import runtime_context as rc
    from sglang.srt.arg_groups.arg_utils import namespace_of
    from sglang.srt.server_args import ServerArgs

    sa = ServerArgs(model_path="kimi", **server_args)
    tops: dict[str, Any] = {}
    for fld, path in namespace_of(ServerArgs).items():
        parts = path.split(".")
        if parts[0] not in namespaces:
            continue
        bag = tops.get(parts[0]) or tops.setdefault(parts[0], rc._ConfigBag(parts[0]))
        for depth in range(1, len(parts)):
            sub = object.__getattribute__(bag, "_subs").get(parts[depth])
            if sub is None:
                sub = rc._ConfigBag(".".join(parts[: depth + 1]))
                bag._set_sub(parts[depth], sub)
            bag = sub
        bag._set(fld, getattr(sa, fld))
    rc._CONTEXT._config_bags = tops


def serving_chat(tokenizer: Any, tool_call_parser: str | None, reasoning_parser: str | None, **server_args: Any):
    """An ``OpenAIServingChat`` configured as ``--tool-call-parser X --reasoning-parser Y`` (and
    ``server_args``, e.g. ``grammar_backend``, published with the ``exec`` namespace) for a plain
    chat-template model, with a :class:`ScriptedEngine`."""
    publish_server_config(("serving", "observability") + (("exec",) if server_args else ()),
                          tool_call_parser=tool_call_parser, reasoning_parser=reasoning_parser, **server_args)
    s = OpenAIServingChat.__new__(OpenAIServingChat)
    engine = ScriptedEngine(tokenizer)
    s.tokenizer_manager = engine
    s.allowed_custom_labels = None
    # what OpenAIServingChat.__init__ sets (serving_chat.py, __init__), for this configuration
    s.template_manager = types.SimpleNamespace(force_reasoning=False, reasoning_config=None, chat_template_name=None)
    s.tool_call_parser = tool_call_parser
    s.reasoning_parser = reasoning_parser
    s.default_chat_template_kwargs = {}
    s._reasoning_detector = (
        ReasoningParser(model_type=reasoning_parser, stream_reasoning=True, tokenizer=tokenizer).detector
        if reasoning_parser else None
    )
    s.default_sampling_params = {}
    s.is_gpt_oss = s.is_gemma4 = s.is_minimax_m3 = False
    s.chat_encoding_spec = None
    s.supports_inline_system = True
    s._encoding_adapter = None
    s._response_parser = None
    s._tokenizer_auto_adds_specials = False
    s._prompt_text_round_trip_is_lossy = False
    s._template_reads_reasoning_content = False
    s._chat_template_cache = {}
    return s


def request(messages: list[dict], tools: list[dict] | None, stream: bool, **extra: Any) -> ChatCompletionRequest:
    return ChatCompletionRequest(model="kimi", messages=messages, tools=tools, stream=stream, **extra)


def run_stream(s: Any, req: ChatCompletionRequest, prompt: list[int], out: list[int], stop: bool, step: int = 1):
    """The real ``_generate_chat_stream``; returns the parsed SSE payloads."""
    s.tokenizer_manager.script = (prompt, out, stop, step)

    async def collect() -> list[str]:
        return [c async for c in s._generate_chat_stream(req, req, None)]

    chunks = asyncio.run(collect())
    assert chunks[-1] == "data: [DONE]\n\n"
    payloads = []
    for c in chunks[:-1]:
        assert c.startswith("data: ") and c.endswith("\n\n"), c
        payloads.append(json.loads(c[len("data: "):]))
    return payloads


def run_whole(s: Any, req: ChatCompletionRequest, prompt: list[int], out: list[int], stop: bool):
    """The real ``_build_chat_response`` over the decoded output."""
    tok = s.tokenizer_manager.tokenizer
    ids = out[:-1] if stop else out
    text = tok.decode(ids, skip_special_tokens=bool(req.skip_special_tokens))
    finish = {"type": "stop", "matched": out[-1]} if stop else {"type": "length", "length": len(out)}
    ret = [{
        "text": text,
        "index": 0,
        "output_ids": out,
        "meta_info": {"id": "chatcmpl-test", "finish_reason": finish, "prompt_tokens": len(prompt),
                      "completion_tokens": len(out), "cached_tokens": 0, "weight_version": "default"},
    }]
    return s._build_chat_response(req, ret, 0)
