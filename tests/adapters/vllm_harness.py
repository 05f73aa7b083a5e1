"""The vLLM serving path the adapter tests drive (no model): registration is the test module's; this
module composes the parsers with ``ParserManager.get_parser``, adjusts the request as the renderer does,
detokenizes the generated ids step by step with vLLM's ``FastIncrementalDetokenizer`` and streams them
through ``ChatStreamProcessor.step`` (or parses the whole text as the non-streaming chat path does)."""

from __future__ import annotations

from typing import Any

from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
from vllm.entrypoints.openai.chat_completion.stream_processor import ChatStreamProcessor
from vllm.parser import ParserManager
from vllm.sampling_params import SamplingParams
from vllm.v1.engine import EngineCoreRequest
from vllm.v1.engine.detokenizer import FastIncrementalDetokenizer, IncrementalDetokenizer

from .adapter_support import Stream


def parser_cls(tok: Any, name: str, reasoning: bool = True):
    """The composed parser class for ``--tool-call-parser name [--reasoning-parser name]``."""
    cls = ParserManager.get_parser(tool_parser_name=name, reasoning_parser_name=name if reasoning else None,
                                   enable_auto_tools=True, model_name="kimi", tokenizer=tok)
    assert cls is not None
    return cls


def adjusted(cls, tok, ctk: dict, request: ChatCompletionRequest, prompt: list[int]) -> ChatCompletionRequest:
    """The renderer's step (``online_renderer``): a parser instance adjusts the request."""
    p = cls(tok, request.tools, model_config=None, chat_template_kwargs=ctk)
    p.set_prompt_token_ids(prompt)
    return p.adjust_request(request=request)


def detokenizer(tok, request: ChatCompletionRequest, prompt: list[int]) -> IncrementalDetokenizer:
    params = request.to_sampling_params(max_tokens=1 << 20, default_sampling_params={})
    assert isinstance(params, SamplingParams)
    engine_request = EngineCoreRequest(
        request_id="test", prompt_token_ids=prompt, mm_features=None, sampling_params=params,
        pooling_params=None, arrival_time=0.0, lora_request=None, cache_salt=None,
        data_parallel_rank=None,
    )
    det = IncrementalDetokenizer.from_new_request(tok, engine_request)
    assert isinstance(det, FastIncrementalDetokenizer)
    return det


def stream(tok, cls, request: ChatCompletionRequest, ctk: dict, prompt: list[int], out: list[int], *,
           stop: bool, step: int = 1):
    """Stream ``out`` (``step`` ids per engine step): ``(accumulated client view, finish_reason, parser)``."""
    request = adjusted(cls, tok, ctk, request, prompt)
    det = detokenizer(tok, request, prompt)
    parser = cls(tok, request.tools, model_config=None, chat_template_kwargs=ctk)
    proc = ChatStreamProcessor(request, parser, enable_auto_tools=True, parser_cls=cls)
    acc = Stream()
    finish = None
    for i in range(0, len(out), step):
        new = out[i:i + step]
        last = i + step >= len(out)
        det.update(new, stop_terminated=last and stop)
        text = det.get_next_output_text(finished=last, delta=True)
        r = proc.step(text, new, ("stop" if stop else "length") if last else None, prompt)
        if r.delta is not None:
            d = r.delta.model_dump(exclude_none=True)
            acc.add(d.get("content"), d.get("reasoning"), d.get("tool_calls"))
        finish = r.finish_reason
    return acc, finish, parser


def whole(tok, cls, request: ChatCompletionRequest, ctk: dict, prompt: list[int], out: list[int], *, stop: bool):
    """The non-streaming chat path: detokenized output text -> set_prompt_token_ids -> parse."""
    request = adjusted(cls, tok, ctk, request, prompt)
    det = detokenizer(tok, request, prompt)
    det.update(out, stop_terminated=stop)
    text = det.get_next_output_text(finished=True, delta=False)
    parser = cls(tok, request.tools, model_config=None, chat_template_kwargs=ctk)
    parser.set_prompt_token_ids(prompt)
    reasoning, content, calls = parser.parse(text, request, enable_auto_tools=True, model_output_token_ids=out)
    return (content or None, reasoning or None, [(c.id, c.name, c.arguments) for c in calls or []])
