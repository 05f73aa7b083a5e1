"""Token-level rendering: the prompt as token ids, which message each token belongs to, which tokens a
model produced (the training mask), and prefix-stable extension to the next turn.

:func:`render_tokens` builds on :func:`kimi_chat.render.render_segments`: the prompt text is tokenized
the way the official tokenizer tokenizes the whole prompt (one pass over the text, with its long-input
cuts), and each token is attributed to the segment that holds its bytes, by byte offsets. So
``ids == tokenizer.encode(render(...))`` exactly (when no content contains special-token text, see below),
whatever BPE merges across segment boundaries.

**A token that straddles two segments.** Segment boundaries between messages always fall on special
tokens (``<|im_end|>``, role headers), but inside an assistant turn the history scaffolding
``<think></think>`` is ordinary text with the July-2025 tokenizer config, and BPE can merge its ``>`` with
the content that follows (``"<think></think>."`` ends in the token ``">."``). Such a token takes the
``message_index`` of its first byte and is in ``assistant_mask`` only if *all* its bytes are trainable.

**Special-token policy** (``special_tokens=``), for special-token text (``<|im_end|>``, ``[BOS]``,
``<|reserved_token_163700|>``, and ``<think>`` with the K2.6 config...) typed inside message content,
names, tool-call arguments or tools:

* ``"text"`` (default): encoded as ordinary text; only the template's own markers are special tokens.
  A user cannot close a turn or open a tool call by typing its marker.
* ``"strict"``: :class:`~kimi_chat.errors.RenderError` naming the message index and field.
* ``"special"``: encoded as the special token, as ``tokenizer.encode(render(...))`` and the official
  ``apply_chat_template(tokenize=True)`` do (they cannot tell typed markers from the template's).
"""

from __future__ import annotations

import dataclasses
import re
import weakref
from bisect import bisect_left
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any, Literal

from .dialects import DEFAULT_DIALECT, Dialect, get_dialect
from .errors import RenderError
from .render import Segment, render_segments
from .tokenizer import KimiTokenizer, cut_points

__all__ = ["RenderedTokens", "Span", "render_tokens", "extend_tokens", "SpecialTokensPolicy"]

SpecialTokensPolicy = Literal["text", "strict", "special"]
_POLICIES = ("text", "strict", "special")


@dataclass(frozen=True)
class Span:
    """Tokens ``ids[start:end]`` belong to message ``message_index`` (-1: scaffolding of no message)."""

    message_index: int
    start: int
    end: int


@dataclass
class RenderedTokens:
    """A prompt as tokens.

    * ``ids``: the token ids;
    * ``message_index``: per token, the index of its message in ``messages`` (-1 for scaffolding that
      belongs to no message: tool declarations, default system prompt, generation prompt);
    * ``assistant_mask``: per token, 1 if a model produced it in an assistant turn (content, kept
      reasoning, tool-call markers and the closing ``<|im_end|>``), else 0 (role headers, history
      ``<think></think>`` scaffolding, every other message);
    * ``spans``: maximal runs of tokens of one message, in order; they cover ``ids`` exactly;
    * ``text``: the prompt text (``tokenizer.decode(ids) == text``).

    The other fields record how it was rendered (for :func:`extend_tokens`).
    """

    ids: list[int]
    message_index: list[int]
    assistant_mask: list[int]
    spans: list[Span]
    text: str
    tokenizer: KimiTokenizer = field(repr=False)
    messages: list[Any] = field(repr=False)
    tools: Any = field(default=None, repr=False)
    dialect: str = DEFAULT_DIALECT
    add_generation_prompt: bool = True
    options: dict[str, Any] = field(default_factory=dict)
    special_tokens: SpecialTokensPolicy = "text"
    _clean_end: bool = field(default=False, repr=False)

    def __len__(self) -> int:
        return len(self.ids)

    def span_of(self, message_index: int) -> tuple[int, int]:
        """``(start, end)``: the tokens of message ``message_index`` (they are contiguous). ``KeyError``
        for a message index with no tokens."""
        hits = [s for s in self.spans if s.message_index == message_index]
        if not hits:
            raise KeyError(f"no tokens for message index {message_index}")
        return hits[0].start, hits[-1].end

    def labels(self, ignore_index: int = -100) -> list[int]:
        """Training labels: the id where ``assistant_mask`` is 1, ``ignore_index`` elsewhere."""
        return [i if m else ignore_index for i, m in zip(self.ids, self.assistant_mask)]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: ``ids``, ``spans`` (``message_index``, ``start``, ``end``) and ``assistant_mask``."""
        return {
            "ids": self.ids,
            "spans": [{"message_index": s.message_index, "start": s.start, "end": s.end} for s in self.spans],
            "assistant_mask": self.assistant_mask,
        }


# --------------------------------------------------------------------------------------------------
# Special-token text typed in the input
# --------------------------------------------------------------------------------------------------

_TOKENIZER_INFO: "weakref.WeakKeyDictionary[KimiTokenizer, tuple[re.Pattern[str], list[int], bool]]" = (
    weakref.WeakKeyDictionary()
)


def _tok_info(tok: KimiTokenizer) -> tuple[re.Pattern[str], list[int], bool]:
    """(regex of the special names, byte length of every id, names are prefix-free), per tokenizer."""
    info = _TOKENIZER_INFO.get(tok)
    if info is None:
        names = sorted(tok.special_tokens, key=len, reverse=True)
        pat = re.compile("|".join(map(re.escape, names)))
        lens = [0] * tok.vocab_size
        for b, i in tok.mergeable_ranks.items():
            lens[i] = len(b)
        for name, i in tok.special_tokens.items():
            lens[i] = len(name.encode("utf-8"))
        ordered = sorted(names)  # a prefix sorts right before the names it starts
        prefix_free = not any(b.startswith(a) for a, b in zip(ordered, ordered[1:]))
        info = _TOKENIZER_INFO[tok] = (pat, lens, prefix_free)
    return info


def _walk(value: Any, path: str) -> Iterator[tuple[str, str]]:
    """(field path, string) for every string in a message / tool, dict keys included."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, Mapping):
        for k, v in value.items():
            if isinstance(k, str):
                yield f"{path}.<key>" if path else "<key>", k
            yield from _walk(v, f"{path}.{k}" if path else str(k))
    elif isinstance(value, (list, tuple)):
        for j, v in enumerate(value):
            yield from _walk(v, f"{path}[{j}]")
        # consecutive text parts are written back to back: a marker may span two of them
        texts = [p.get("text") for p in value if isinstance(p, Mapping) and isinstance(p.get("text"), str)]
        if len(texts) > 1:
            yield path, "".join(texts)
    elif hasattr(value, "model_dump"):
        yield from _walk(value.model_dump(exclude_none=True), path)


def _typed_markers(
    pat: re.Pattern[str], messages: Sequence[Any], tools: Any, first: int = 0
) -> tuple[int | None, str, str] | None:
    """The first special-token text found in the input: (message index or None for tools, field,
    marker), or None. Conservative: it may flag text that the template does not write back to back."""
    for i in range(first, len(messages)):
        for path, s in _walk(messages[i], ""):
            m = pat.search(s)
            if m:
                return i, path, m.group()
    if tools is not None and first == 0:
        for path, s in _walk(tools, "tools"):
            m = pat.search(s)
            if m:
                return None, path, m.group()
    return None


def _check_policy(policy: str) -> None:
    if policy not in _POLICIES:
        raise ValueError(f"special_tokens must be one of {', '.join(map(repr, _POLICIES))}, got {policy!r}")


def _raise_strict(hit: tuple[int | None, str, str]) -> None:
    i, path, marker = hit
    why = (
        f"contains the special-token text {marker!r}; special_tokens='strict' refuses it "
        "(the default 'text' encodes it as ordinary text, 'special' as the special token)"
    )
    if i is None:
        raise RenderError(f"{path} {why}")
    raise RenderError(why, message_index=i, field=path or None)


# --- masking typed markers: find the template's own markers by rendering with typed ones defused


def _mask_text(pat: re.Pattern[str], s: str) -> str:
    # Same length and never a marker: each char of a typed marker becomes a CJK ideograph (printable,
    # so neither JSON nor repr() escapes it; injective on ASCII, so dict keys stay distinct).
    return pat.sub(lambda m: "".join(chr(0x4E00 + ord(c)) if ord(c) < 0x5000 else "\u4e00" for c in m.group()), s)


def _mask(pat: re.Pattern[str], value: Any) -> Any:
    if isinstance(value, str):
        return _mask_text(pat, value) if pat.search(value) else value
    if isinstance(value, Mapping):
        return {(_mask(pat, k) if isinstance(k, str) else k): _mask(pat, v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        out = [_mask(pat, v) for v in value]
        _mask_across_parts(pat, value, out)
        return out if isinstance(value, list) else tuple(out)
    if hasattr(value, "model_dump"):
        return _mask(pat, value.model_dump(exclude_none=True))
    return value


def _is_text_part(part: Any) -> bool:
    return isinstance(part, Mapping) and isinstance(part.get("text"), str)


def _mask_across_parts(pat: re.Pattern[str], parts: Sequence[Any], out: list[Any]) -> None:
    """Consecutive text parts are written back to back: mask the markers that span two or more."""
    j, n = 0, len(parts)
    while j < n:
        if not _is_text_part(parts[j]):
            j += 1
            continue
        k = j
        while k < n and _is_text_part(parts[k]):
            k += 1
        if k - j > 1:
            texts = [parts[x]["text"] for x in range(j, k)]
            joined = "".join(texts)
            ends = list(accumulate(map(len, texts)))
            chars = list("".join(out[x]["text"] for x in range(j, k)))
            hit = False
            for m in pat.finditer(joined):
                a, b = m.span()
                if bisect_left(ends, a + 1) != bisect_left(ends, b):  # spans a part boundary
                    hit = True
                    for p in range(a, b):
                        chars[p] = chr(0x4E00 + ord(joined[p])) if ord(joined[p]) < 0x5000 else "\u4e00"
            if hit:
                start = 0
                for x, e in zip(range(j, k), ends):
                    out[x] = {**out[x], "text": "".join(chars[start:e])}
                    start = e
        j = k


def _structural_positions(
    pat: re.Pattern[str],
    text: str,
    messages: Sequence[Any],
    tools: Any,
    d: Dialect,
    add_generation_prompt: bool,
    options: Mapping[str, Any],
) -> list[tuple[int, int]]:
    """(start, end) of the template's own special tokens in ``text``, when typed special-token text is
    present: render again with every typed occurrence defused (same length), and check that the two
    renders differ exactly at the typed occurrences."""
    mtools = tools
    md = d
    if tools is not None and d.sort_tool_keys:
        from .oracle import deep_sort_dict

        # sort by the real keys, then keep that order (masking could reorder keys)
        mtools = deep_sort_dict(_plain(tools))
        md = dataclasses.replace(d, sort_tool_keys=False)
    masked = "".join(
        s.text
        for s in render_segments(
            _mask(pat, list(messages)), tools=_mask(pat, mtools), dialect=md,
            add_generation_prompt=add_generation_prompt, **options,
        )
    )
    structural = [m.span() for m in pat.finditer(masked)]
    ok = len(masked) == len(text)
    if ok:
        rebuilt: list[str] = []
        pos = 0
        k = 0
        for m in pat.finditer(text):
            a, b = m.span()
            while k < len(structural) and structural[k][0] < a:
                k += 1
            if k < len(structural) and structural[k] == (a, b):
                continue
            rebuilt += [text[pos:a], _mask_text(pat, m.group())]
            pos = b
        rebuilt.append(text[pos:])
        ok = "".join(rebuilt) == masked
    if not ok:  # pragma: no cover - a render path that does not copy strings verbatim
        raise RenderError(
            "cannot tell the template's markers from special-token text typed in the input; "
            "use special_tokens='special' or remove the marker text"
        )
    return structural


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "model_dump"):
        return value.model_dump(exclude_none=True)
    return value


# --------------------------------------------------------------------------------------------------
# Tokenization and attribution
# --------------------------------------------------------------------------------------------------


def _encode_from(
    tok: KimiTokenizer, text: str, start: int, structural: list[tuple[int, int]] | None
) -> list[int]:
    """Tokens of ``text[start:]`` as the official encode of the whole ``text`` gives them, given that a
    token boundary falls at ``start``. ``structural=None``: every special-token text is special;
    else only the listed ``(start, end)`` occurrences are."""
    enc = tok.encoding
    names = tok._special_names
    bounds = [start, *cut_points(text, start), len(text)]
    out: list[int] = []
    if structural is None:
        for a, b in zip(bounds, bounds[1:]):
            out += enc.encode(text[a:b] if (a or b != len(text)) else text, allowed_special=names, disallowed_special=())
        return out
    k = bisect_left(structural, (start, -1))
    sp = tok.special_tokens
    for a, b in zip(bounds, bounds[1:]):
        pos = a
        while k < len(structural) and structural[k][0] < b:
            s, e = structural[k]
            if s < a or e > b:  # cut through by a long-input cut: text, as in the official encode
                k += 1
                continue
            if pos < s:
                out += enc.encode_ordinary(text[pos:s])
            out.append(sp[text[s:e]])
            pos = e
            k += 1
        if pos < b:
            out += enc.encode_ordinary(text[pos:b])
    return out


def _attribute(
    ids: list[int], segments: Sequence[Segment], lens: list[int], text: str
) -> tuple[list[int], list[int], list[Span]]:
    """Per-token message index and mask from the segments, by byte offsets."""
    ends = list(accumulate(map(lens.__getitem__, ids)))
    starts = [0, *ends[:-1]] if ends else []
    if text.isascii():
        seg_ends = list(accumulate(len(s.text) for s in segments))
    else:
        seg_ends = list(accumulate(len(s.text.encode("utf-8")) for s in segments))
    msg: list[int] = []
    mask: list[int] = []
    spans: list[Span] = []
    lo = 0
    for j, seg in enumerate(segments):
        hi = bisect_left(starts, seg_ends[j])  # tokens whose first byte is in this segment
        n = hi - lo
        if n:
            msg += [seg.message_index] * n
            mask += [1 if seg.trainable else 0] * n
            if spans and spans[-1].message_index == seg.message_index:
                spans[-1] = Span(seg.message_index, spans[-1].start, hi)
            else:
                spans.append(Span(seg.message_index, lo, hi))
        # a token that runs past this segment's end is trainable only if every segment it covers is
        e = seg_ends[j]
        t = hi - 1
        if t >= 0 and ends[t] > e and j + 1 < len(segments) and not segments[j + 1].trainable:
            mask[t] = 0
        lo = hi
    return msg, mask, spans


def _last_is_clean_special(tok: KimiTokenizer, ids: list[int], text: str) -> bool:
    if not ids or ids[-1] not in tok.special_ids:
        return False
    return text.endswith(tok.id_to_token(ids[-1]))


def render_tokens(
    messages: Sequence[Any],
    *,
    tokenizer: KimiTokenizer,
    tools: Sequence[Any] | None = None,
    dialect: str | Dialect = DEFAULT_DIALECT,
    add_generation_prompt: bool = True,
    special_tokens: SpecialTokensPolicy = "text",
    **options: Any,
) -> RenderedTokens:
    """The prompt of :func:`kimi_chat.render.render` as token ids, with per-token message index, the
    assistant training mask and per-message spans (see :class:`RenderedTokens`).

    ``ids == tokenizer.encode(render(...))`` whenever no input string contains special-token text; with
    such text, ``special_tokens`` decides (module docstring): ``"text"`` (default) encodes it as ordinary
    text, ``"strict"`` raises :class:`~kimi_chat.errors.RenderError` naming the message index,
    ``"special"`` encodes it as the special token. Raises what :func:`~kimi_chat.render.render` raises
    for invalid input.
    """
    _check_policy(special_tokens)
    d = get_dialect(dialect)
    segments = render_segments(messages, tools=tools, dialect=d, add_generation_prompt=add_generation_prompt, **options)
    text = "".join(s.text for s in segments)
    pat, lens, _ = _tok_info(tokenizer)
    structural = None
    if special_tokens != "special":
        hit = _typed_markers(pat, messages, tools)
        if hit is not None:
            if special_tokens == "strict":
                _raise_strict(hit)
            structural = _structural_positions(pat, text, messages, tools, d, add_generation_prompt, options)
    ids = _encode_from(tokenizer, text, 0, structural)
    msg, mask, spans = _attribute(ids, segments, lens, text)
    return RenderedTokens(
        ids=ids,
        message_index=msg,
        assistant_mask=mask,
        spans=spans,
        text=text,
        tokenizer=tokenizer,
        messages=list(messages),
        tools=tools,
        dialect=d.name,
        add_generation_prompt=add_generation_prompt,
        options=dict(options),
        special_tokens=special_tokens,
        _clean_end=_last_is_clean_special(tokenizer, ids, text)
        and (structural is None or (len(text) - len(tokenizer.id_to_token(ids[-1])), len(text)) in set(structural)),
    )


_SAME: Any = object()


def extend_tokens(
    previous: RenderedTokens,
    completion_ids: Sequence[int],
    new_messages: Sequence[Any],
    *,
    tools: Sequence[Any] | None = _SAME,
    add_generation_prompt: bool = True,
    **options: Any,
) -> RenderedTokens | None:
    """The next turn's prompt as ``previous.ids + completion_ids + <the new messages' tokens>``, or
    ``None`` when that is not exactly what a full :func:`render_tokens` of the extended conversation gives.

    ``previous`` is the prompt the model completed (usually rendered with the generation prompt),
    ``completion_ids`` the ids it generated (normally ending with ``<|im_end|>``), ``new_messages`` the
    messages that follow ``previous.messages``: first the assistant message the completion stands for
    (as parsed from it), then tool results / the next user message. ``tools`` and ``options`` default
    to those of ``previous``; dialect, tokenizer and special-token policy are those of ``previous``.

    ``None`` when the prompt is not prefix-stable: the dialect re-renders earlier turns (a Thinking
    dialect drops earlier reasoning once a final answer follows), the tools or options changed, or the
    completion is not how the tokenizer encodes the assistant message (a non-canonical tokenization,
    text after ``<|im_end|>``...). Whenever it returns, ``result.ids`` equals ``render_tokens(...).ids``
    of the extended conversation, and so do the message indices, mask and spans.
    """
    tok = previous.tokenizer
    tools = previous.tools if tools is _SAME else tools
    opts = {**previous.options, **options}
    d = get_dialect(previous.dialect)
    messages = [*previous.messages, *new_messages]
    completion_ids = list(completion_ids)
    segments = render_segments(messages, tools=tools, dialect=d, add_generation_prompt=add_generation_prompt, **opts)
    text = "".join(s.text for s in segments)
    prev_text = previous.text
    if not text.startswith(prev_text):
        return None
    pat, lens, prefix_free = _tok_info(tok)
    policy = previous.special_tokens
    if not (previous._clean_end and prefix_free):
        full = render_tokens(
            messages, tokenizer=tok, tools=tools, dialect=d, add_generation_prompt=add_generation_prompt,
            special_tokens=policy, **opts,
        )
        n = len(previous.ids)
        if full.ids[:n] != previous.ids or full.ids[n : n + len(completion_ids)] != completion_ids:
            return None
        return full
    structural = None
    if policy != "special":
        hit = _typed_markers(pat, messages, tools)
        if hit is not None:
            if policy == "strict":
                _raise_strict(hit)
            structural = _structural_positions(pat, text, messages, tools, d, add_generation_prompt, opts)
    tail = _encode_from(tok, text, len(prev_text), structural)
    if tail[: len(completion_ids)] != completion_ids:
        return None
    ids = previous.ids + tail
    msg, mask, spans = _attribute(ids, segments, lens, text)
    return RenderedTokens(
        ids=ids,
        message_index=msg,
        assistant_mask=mask,
        spans=spans,
        text=text,
        tokenizer=tok,
        messages=messages,
        tools=tools,
        dialect=d.name,
        add_generation_prompt=add_generation_prompt,
        options=opts,
        special_tokens=policy,
        _clean_end=_last_is_clean_special(tok, ids, text)
        and (structural is None or (len(text) - len(tok.id_to_token(ids[-1])), len(text)) in set(structural)),
    )
