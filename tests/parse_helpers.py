"""Helpers shared by the parser tests: marker spellings (from kimi_chat.markers), delta merging,
chunked feeding."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kimi_chat import markers as M
from kimi_chat.output import Delta, ParsedMessage, StreamParser

THINK = M.THINK_BEGIN.text
UNTHINK = M.THINK_END.text
SB = M.TOOL_CALLS_SECTION_BEGIN.text
SE = M.TOOL_CALLS_SECTION_END.text
SB1 = M.TOOL_CALL_SECTION_BEGIN_SINGULAR.text
SE1 = M.TOOL_CALL_SECTION_END_SINGULAR.text
CB = M.TOOL_CALL_BEGIN.text
AB = M.TOOL_CALL_ARGUMENT_BEGIN.text
CE = M.TOOL_CALL_END.text
END = M.IM_END.text
EOS = M.EOS.text
EOT = M.EOT.text
IM_USER = M.IM_USER.text
IM_ASSISTANT = M.IM_ASSISTANT.text
IM_MIDDLE = M.IM_MIDDLE.text
MEDIA_PAD = M.MEDIA_PAD.text


def call(header: str, args: str | None = None, *, end: bool = True) -> str:
    """One tool call: ``<|tool_call_begin|>HEADER[<|tool_call_argument_begin|>ARGS][<|tool_call_end|>]``."""
    return CB + header + ("" if args is None else AB + args) + (CE if end else "")


def section(*calls: str) -> str:
    return SB + "".join(calls) + SE


@dataclass
class Merged:
    """What a client gets by accumulating deltas (by tool-call index)."""

    content: str | None = None
    reasoning_content: str | None = None
    calls: dict[int, dict[str, Any]] = field(default_factory=dict)

    def add(self, d: Delta) -> None:
        if d.content is not None:
            self.content = (self.content or "") + d.content
        if d.reasoning_content is not None:
            self.reasoning_content = (self.reasoning_content or "") + d.reasoning_content
        for t in d.tool_calls:
            c = self.calls.setdefault(t.index, {"id": None, "name": None, "arguments": ""})
            if t.id is not None:
                assert c["id"] is None, f"id of call {t.index} sent twice"
                c["id"] = t.id
            if t.name is not None:
                assert c["name"] is None, f"name of call {t.index} sent twice"
                c["name"] = t.name
            if t.arguments is not None:
                c["arguments"] += t.arguments

    def as_tuple(self) -> tuple[Any, ...]:
        return (
            self.content,
            self.reasoning_content,
            [(i, c["id"], c["name"], c["arguments"]) for i, c in sorted(self.calls.items())],
        )


def merge(deltas: Iterable[Delta]) -> Merged:
    m = Merged()
    for d in deltas:
        m.add(d)
    return m


def expected(msg: ParsedMessage) -> tuple[Any, ...]:
    return (
        msg.content,
        msg.reasoning_content,
        [(c.index, c.id, c.name, c.arguments) for c in msg.tool_calls],
    )


def feed_chunks(chunks: Sequence[str | bytes], **kw: Any) -> tuple[list[Delta], StreamParser]:
    """Feed ``chunks``, then finish: every delta, and the parser. Calls stream as written
    (``include_invalid=True``, what :func:`expected` compares with) unless ``kw`` says otherwise."""
    kw.setdefault("include_invalid", True)
    p = StreamParser(**kw)
    out: list[Delta] = []
    for c in chunks:
        out += p.feed(c)
    out += p.finish()
    return out, p


def split_at(text: str, cuts: Iterable[int]) -> list[str]:
    points = sorted({c for c in cuts if 0 < c < len(text)})
    bounds = [0, *points, len(text)]
    return [text[a:b] for a, b in zip(bounds, bounds[1:])]


def streamed_openai(chunks: Sequence[str | bytes], **kw: Any) -> tuple[dict[str, Any], StreamParser]:
    """What a client accumulates from the default stream (``include_invalid=False``),
    in :meth:`ParsedMessage.to_openai` shape: each call to execute comes in one delta (id, name,
    arguments) under the next index ``0, 1, ...``; a call not to execute only as an
    ``invalid_tool_calls`` entry."""
    deltas, sp = feed_chunks(chunks, include_invalid=False, **kw)
    m = merge(deltas)
    assert sorted(m.calls) == list(range(len(m.calls)))  # client indices without a gap
    assert all(len(d.tool_calls) <= 1 for d in deltas)
    out: dict[str, Any] = {"role": "assistant", "content": m.content}
    if m.reasoning_content is not None:
        out["reasoning_content"] = m.reasoning_content
    if m.calls:
        out["tool_calls"] = [{"id": c["id"], "type": "function",
                              "function": {"name": c["name"] or "", "arguments": c["arguments"]}}
                             for _, c in sorted(m.calls.items())]
    invalid = [e for d in deltas for e in d.to_openai().get("invalid_tool_calls", [])]
    if invalid:
        out["invalid_tool_calls"] = invalid
    return out, sp
