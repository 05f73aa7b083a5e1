"""One chat request through an :class:`~kimi_chat.servers.serve.engines.Engine`: the prompt rendered and
tokenized by kimi_chat (:func:`kimi_chat.render_tokens`, text typed in messages never a special token), the
generation constrained by the request's tools, tool choice and response format
(:func:`kimi_chat.grammar.constraint`), parsed by token id with
:class:`~kimi_chat.output.StreamParser` (the engine's ids decoded by kimi_chat's tokenizer).

:func:`prepare` does everything that can refuse the request (before it waits for the engine);
:func:`run` generates and yields :class:`~kimi_chat.output.Delta` objects (each preceded, when the request
asks for log probabilities, by the :class:`TokenLogprobs` of the tokens that released it), then one
:class:`Outcome`.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from ...errors import KimiChatError, RequestError
from ...output.format import format_for
from ...output import Delta, StreamParser
from ...tokens.rendered import render_tokens
from .engines import Engine, Sampling
from .stops import StopText

__all__ = ["Prepared", "Outcome", "TokenLogprobs", "ContextError", "prepare", "run", "sampling_of", "DEFAULT_MAX_TOKENS"]

DEFAULT_MAX_TOKENS = 1024
"""``max_tokens`` of a request that gives none (capped by the context left after the prompt)."""


class ContextError(KimiChatError):
    """The prompt (plus the requested ``max_tokens``) does not fit the engine's context; ``param`` is the
    field to change (``max_tokens`` / ``max_completion_tokens`` as sent, ``tools`` when the tools are what
    overflow, else ``messages``)."""

    def __init__(self, message: str, *, param: str) -> None:
        super().__init__(f"{param}: {message}")
        self.message = message
        self.param = param


@dataclass
class Prepared:
    """A request ready to generate."""

    request: Any
    """The :class:`kimi_chat.servers.contract.ChatRequest`."""
    prompt_ids: list[int]
    constraint: Any
    """A :class:`kimi_chat.grammar.Constraint`, GBNF text, or ``None`` (unconstrained)."""
    max_tokens: int
    sampling: Sampling
    options: dict[str, Any]
    """The render options (the parser reads the output with the same)."""


@dataclass
class Outcome:
    """How a generation ended."""

    message: dict[str, Any]
    """The OpenAI ``ChatCompletionMessage``-shaped message."""
    finish_reason: str
    """``stop``, ``tool_calls``, ``length`` (``max_tokens`` reached) or ``cancelled``."""
    completion_ids: list[int]
    logprobs: list[dict[str, Any]] | None = None
    """OpenAI's ``choices[i].logprobs.content`` (one entry per generated token) when the request asked."""


@dataclass
class TokenLogprobs:
    """OpenAI ``ChatCompletionTokenLogprob`` entries of the tokens generated since the previous ones, yielded
    by :func:`run` before the deltas those tokens released (a streamed chunk carries the entries of its own
    tokens, as OpenAI's do); every entry of a generation is in its :attr:`Outcome.logprobs` too."""

    content: list[dict[str, Any]]


def _constraint(engine: Engine, request: Any, options: dict[str, Any]) -> Any:
    """The request's constraint: :func:`kimi_chat.grammar.constraint` (llguidance: the dialect's whole
    output format, the tool choice, the tools' and the ``response_format`` schemas; every request, so a
    reply is always a well-formed turn), or, without llguidance, the GBNF tool-call grammar when it
    declares tools (request level or in a system message) and does not say ``none``."""
    tools = request.callable_tools
    # (a dialect whose prompt writes the tool choice / response format has them among the render options too)
    rest = {k: v for k, v in options.items() if k not in ("tool_choice", "response_format")}
    try:
        from ...grammar.request import constraint
    except ImportError:
        constraint = None
    if constraint is not None:
        rf = request.response_format
        return constraint(tools, dialect=engine.dialect, tool_choice=request.tool_choice or "auto",
                          parallel_tool_calls=request.parallel_tool_calls,
                          response_format=None if rf is None or rf.get("type") == "text" else rf, **rest)
    if not tools or request.tool_choice == "none":
        return None
    from ...grammar import tool_call_grammar

    return tool_call_grammar(tools, tool_choice=request.tool_choice,
                             parallel_tool_calls=request.parallel_tool_calls, dialect=engine.dialect,
                             token_markers=engine.token_markers(), **rest)


def sampling_of(request: Any) -> Sampling:
    """The :class:`Sampling` of a :class:`~kimi_chat.servers.contract.ChatRequest` (defaults: temperature
    0.6, the rest off)."""
    def given(value: Any, default: float) -> float:
        return default if value is None else float(value)

    return Sampling(temperature=given(request.temperature, 0.6), top_p=given(request.top_p, 1.0), seed=request.seed,
                    top_k=int(request.top_k or 0), min_p=given(request.min_p, 0.0),
                    repetition_penalty=given(request.repetition_penalty, 1.0),
                    presence_penalty=given(request.presence_penalty, 0.0),
                    frequency_penalty=given(request.frequency_penalty, 0.0),
                    logit_bias=tuple(sorted((request.logit_bias or {}).items())),
                    logprobs=request.top_logprobs if request.logprobs else None)


def prepare(engine: Engine, request: Any) -> Prepared:
    """Render, tokenize and constrain ``request`` for ``engine``. Raises what rendering raises for input
    the official machinery refuses (:class:`~kimi_chat.errors.KimiChatError` subclasses naming index and
    field), :class:`~kimi_chat.grammar.GrammarError`, :class:`ContextError`, and the engine's refusal of a
    constraint it cannot enforce (:meth:`~kimi_chat.servers.serve.engines.Engine.check_constraint`)."""
    options = dict(request.render_options)
    ids = render_tokens(request.messages, tokenizer=engine.tokenizer(), tools=request.tools, dialect=engine.dialect,
                        special_tokens="text", **options).ids
    room = engine.n_ctx - len(ids)
    if room < 1:
        param = "messages"
        if request.tools:  # the tools overflow when the messages alone fit
            bare = render_tokens(request.messages, tokenizer=engine.tokenizer(), dialect=engine.dialect,
                                 special_tokens="text", **options).ids
            param = "tools" if len(bare) < engine.n_ctx else param
        raise ContextError(f"the prompt has {len(ids)} tokens, more than the context ({engine.n_ctx})", param=param)
    if request.max_tokens is not None and request.max_tokens > room:
        raise ContextError(f"the prompt has {len(ids)} tokens and the context {engine.n_ctx}: at most {room} can "
                           f"be generated, not {request.max_tokens}", param=request.max_tokens_param)
    max_tokens = request.max_tokens if request.max_tokens is not None else min(DEFAULT_MAX_TOKENS, room)
    vocab = engine.tokenizer().vocab_size
    for tid in request.logit_bias or ():
        if tid >= vocab:
            raise RequestError(f"{tid} is not a token id of this model (0..{vocab - 1})", param=f"logit_bias.{tid}")
    sampling = sampling_of(request)
    constraint = _constraint(engine, request, options)
    engine.check_constraint(constraint, request)
    return Prepared(request, list(ids), constraint, max_tokens, sampling, options)


def run(engine: Engine, prepared: Prepared,
        cancel: threading.Event) -> Iterator[Delta | TokenLogprobs | Outcome]:
    """Generate ``prepared`` on ``engine`` (blocking: run it on the engine's worker thread); yield the
    parser's deltas as it decides them (with log probabilities asked for, each preceded by the
    :class:`TokenLogprobs` of the tokens since the last), then the :class:`Outcome`. ``cancel`` stops the
    generation at the next token (the outcome's finish reason is then ``cancelled``). The request's
    ``stop`` sequences end the content before the first of them (finish reason ``stop``)."""
    request = prepared.request
    parser = StreamParser(engine.dialect, tools=request.callable_tools, tokenizer=engine.tokenizer(),
                          **prepared.options)
    tok = engine.tokenizer()
    stops = StopText(request.stop)

    def released(deltas: list[Delta]) -> Iterator[Delta]:
        for d in deltas:
            if d.content is not None and stops.stops:
                d = replace(d, content=stops.feed(d.content) or None)
                if not d.to_openai():
                    continue
            yield d

    end_of_turn = format_for(engine.dialect).end_of_turn_ids
    out: list[int] = []
    ended = False
    logged = prepared.sampling.logprobs is not None
    entries: list[dict[str, Any]] = []  # every token's (the end of generation excluded)
    sent = 0  # how many of them went out ahead of deltas

    def with_logprobs(deltas: Iterator[Delta]) -> Iterator[Delta | TokenLogprobs]:
        nonlocal sent
        for d in deltas:
            if logged and sent < len(entries):
                yield TokenLogprobs(entries[sent:])
                sent = len(entries)
            yield d

    for tid in engine.generate(prepared.prompt_ids, constraint=prepared.constraint, max_tokens=prepared.max_tokens,
                               sampling=prepared.sampling, cancel=cancel):
        out.append(tid)
        if engine.is_eog(tid):
            ended = True
            if tid in end_of_turn:  # the parser sees the end of the turn; another end of generation is not text
                yield from with_logprobs(released(parser.feed(tok.id_to_bytes(tid), (tid,))))
            break
        if logged:
            entries.append(_logprob_entry(tok, tid))
        yield from with_logprobs(released(parser.feed(tok.id_to_bytes(tid), (tid,))))
        if stops.hit:
            break
    rest = list(released(parser.finish()))
    if not stops.hit:
        yield from with_logprobs(iter(rest))
        held = stops.finish()
        if held:
            yield from with_logprobs(iter([Delta(content=held)]))
    parsed = parser.message
    if prepared.constraint is not None:  # a schema the constraint enforces only in part: its calls validated here
        from ...engines.constrain import check_arguments

        parsed = check_arguments(prepared.constraint, parsed)
    message = parsed.to_openai()
    if stops.hit:
        content = "".join(stops.sent)
        message["content"] = content if content.strip() else None  # (the parser's rule for an empty content)
        finish = "stop"
    elif cancel.is_set():
        finish = "cancelled"
    elif ended:
        finish = parsed.finish_reason() or "stop"  # "stop" when every call was left out as invalid
    else:
        finish = "length"
    yield Outcome(message, finish, out, entries if logged else None)


def _logprob_entry(tok: Any, tid: int) -> dict[str, Any]:
    """OpenAI's ``ChatCompletionTokenLogprob`` of a generated id (a
    :class:`~kimi_chat.engines.native.TokenLogprob`; another id has no probability: 0)."""
    def one(i: int, logprob: float) -> dict[str, Any]:
        raw = tok.id_to_bytes(i)
        return {"token": raw.decode("utf-8", "replace"), "logprob": logprob, "bytes": list(raw)}

    entry = one(tid, float(getattr(tid, "logprob", 0.0)))
    entry["top_logprobs"] = [one(i, lp) for i, lp in getattr(tid, "top", ())]
    return entry
