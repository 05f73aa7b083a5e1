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
* ``"strict"``: :class:`~kimi_chat.errors.RenderError` naming the message index and field, when such
  text reaches the prompt (text in a field the dialect does not write is no problem).
* ``"special"``: encoded as the special token, as ``tokenizer.encode(render(...))`` and the official
  ``apply_chat_template(tokenize=True)`` do (they cannot tell typed markers from the template's).

The template's markers are told from typed text by rendering a second time with every typed name
defused (each char replaced, same length) and checking that the two prompts differ exactly there; this
second render only happens when an input string holds special-token text (a C-speed check).

**Cost** (100-message tool conversation, ``benchmarks/render_tokens.py``): about 1.2x ``render`` +
``encode``: the tokenization itself, the renderer's piece marks (~0.01 ms more than ``render``), the
typed-text check (~0.02 ms) and the attribution (~0.07 ms: per-piece token counts by C-level passes,
:func:`_attribute`). ``assistant_mask``, ``message_index`` and ``spans`` are built from the per-piece
counts on first access (~0.02 ms each). :func:`extend_tokens` tokenizes only the new turn.
"""

from __future__ import annotations

import dataclasses
import marshal
import pickle
import re
import weakref
from bisect import bisect_left, bisect_right
from collections.abc import Iterator, Mapping, Sequence
from itertools import accumulate, repeat
from operator import itemgetter
from typing import Any, Literal, NamedTuple, Optional

from .dialects import DEFAULT_DIALECT, Dialect, get_dialect
from .errors import RenderError
from .render import _render_marked, render_segments
from .tokenizer import KimiTokenizer, cut_points

__all__ = ["RenderedTokens", "Span", "render_tokens", "extend_tokens", "SpecialTokensPolicy"]

SpecialTokensPolicy = Literal["text", "strict", "special"]
_POLICIES = ("text", "strict", "special")


class Span(NamedTuple):
    """Tokens ``ids[start:end]`` belong to message ``message_index`` (-1: scaffolding of no message)."""

    message_index: int
    start: int
    end: int


_ONES = [1] * 4096


class RenderedTokens:
    """A prompt as tokens.

    * ``ids``: the token ids;
    * ``assistant_mask``: per token, 1 if a model produced it in an assistant turn (content, kept
      reasoning, tool-call markers and the closing ``<|im_end|>``), else 0 (role headers, history
      ``<think></think>`` scaffolding, every other message);
    * ``message_index``: per token, the index of its message in ``messages`` (-1 for scaffolding that
      belongs to no message: tool declarations, default system prompt, generation prompt);
    * ``spans``: maximal runs of tokens of one message (:class:`Span`), in order; they cover ``ids``
      exactly (``assistant_mask``, ``message_index`` and ``spans`` are built on first access, from
      per-piece token counts);
    * ``text``: the prompt text (``tokenizer.decode(ids) == text``).

    The other attributes record how it was rendered (for :func:`extend_tokens`): ``tokenizer``,
    ``messages``, ``tools``, ``dialect``, ``add_generation_prompt``, ``options``, ``special_tokens``.
    """

    __slots__ = (
        "ids", "text", "tokenizer", "messages", "tools", "dialect", "add_generation_prompt", "options",
        "special_tokens", "_pieces", "_mask", "_message_index", "_spans", "_clean_end", "_typed", "_dialect",
    )

    def __init__(
        self,
        ids: list[int],
        pieces: tuple[Sequence[int], Sequence[bool] | None, Sequence[int]],
        assistant_mask: list[int] | None,
        text: str,
        tokenizer: KimiTokenizer,
        messages: list[Any],
        tools: Any,
        dialect: str | Dialect,
        add_generation_prompt: bool,
        options: dict[str, Any],
        special_tokens: SpecialTokensPolicy,
        clean_end: bool = False,
        typed: bool = False,
    ) -> None:
        self._dialect = get_dialect(dialect)
        self.ids = ids
        # (message indices, trainable flags, token counts) of the pieces of the prompt, in order; counts
        # may be 0; the flags are None when the mask is given
        self._pieces = pieces
        self._mask = assistant_mask
        self.text = text
        self.tokenizer = tokenizer
        self.messages = messages
        self.tools = tools
        self.dialect = self._dialect.name
        self.add_generation_prompt = add_generation_prompt
        self.options = options
        self.special_tokens = special_tokens
        self._message_index: list[int] | None = None
        self._spans: list[Span] | None = None
        self._clean_end = clean_end
        self._typed = typed

    @property
    def assistant_mask(self) -> list[int]:
        """Per token, 1 if a model produced it in an assistant turn, else 0."""
        if self._mask is None:
            idxs, trains, counts = self._pieces
            mask = [0] * len(self.ids)
            pos = 0
            for train, c in zip(trains, counts):  # type: ignore[arg-type]
                if train:
                    mask[pos : pos + c] = _ONES[:c] if c <= len(_ONES) else [1] * c
                pos += c
            self._mask = mask
        return self._mask

    @assistant_mask.setter
    def assistant_mask(self, value: list[int]) -> None:
        self._mask = value

    @property
    def message_index(self) -> list[int]:
        """Per token, the index of its message (-1: scaffolding of no message)."""
        if self._message_index is None:
            out: list[int] = []
            for idx, c in zip(self._pieces[0], self._pieces[2]):
                out += [idx] * c
            self._message_index = out
        return self._message_index

    @property
    def spans(self) -> list[Span]:
        """Maximal runs of tokens of one message, in order, covering ``ids`` exactly."""
        if self._spans is None:
            new = tuple.__new__
            spans: list[Span] = []
            cur = None
            start = pos = 0
            for idx, c in zip(self._pieces[0], self._pieces[2]):
                if c:
                    if idx != cur:
                        if cur is not None:
                            spans.append(new(Span, (cur, start, pos)))
                        cur = idx
                        start = pos
                    pos += c
            if cur is not None:
                spans.append(new(Span, (cur, start, pos)))
            self._spans = spans
        return self._spans

    def __repr__(self) -> str:
        return (
            f"RenderedTokens({len(self.ids)} tokens, {sum(self.assistant_mask)} trainable, "
            f"{len(self.messages)} messages, dialect={self.dialect!r})"
        )

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
# Per-tokenizer tables
# --------------------------------------------------------------------------------------------------

# Every Kimi special-token name has one of these shapes. None holds a "<" or "[" after its first char,
# so no name can start inside a match: the names are exactly the matches that are names (leftmost,
# non-overlapping, as tiktoken finds them). Configs with other names fall back to a literal alternation.
_SHAPE = re.compile(r"<\|[^|<>\[\]\s]{1,100}\|>|\[[^\[\]<>|\s]{1,32}\]|</?[A-Za-z_]{1,32}>")


_CONTINUATION_BYTES = bytes(range(0x80, 0xC0))


class _Info:
    __slots__ = ("names", "shape", "first_chars", "names_b", "shape_b", "first_chars_b", "last_chars_b", "lens", "char_marks", "prefix_free",
                 "id_to_name", "special_ids")

    def __init__(self, tok: KimiTokenizer) -> None:
        self.names = frozenset(tok.special_tokens)
        if all(_SHAPE.fullmatch(n) for n in self.names):
            self.shape = _SHAPE
        else:
            self.shape = re.compile("|".join(map(re.escape, sorted(self.names, key=len, reverse=True))))
        self.names_b = frozenset(n.encode("utf-8") for n in self.names)
        self.shape_b = re.compile(self.shape.pattern.encode("utf-8"))
        # every name starts with one of these chars: str.find (memchr speed) rules most text out
        self.first_chars = tuple(sorted({n[0] for n in self.names}))
        self.first_chars_b = tuple(sorted({n.encode("utf-8")[:1] for n in self.names}))
        # per first byte, the last bytes of the names that start with it: no name of that group can
        # occur where none of these bytes does (a memchr rules the group out)
        self.last_chars_b = tuple(
            tuple(sorted({n.encode("utf-8")[-1:] for n in self.names if n.encode("utf-8")[:1] == c}))
            for c in self.first_chars_b
        )
        lens = [0] * tok.vocab_size
        for b, i in tok.mergeable_ranks.items():
            lens[i] = len(b)
        for name, i in tok.special_tokens.items():
            lens[i] = len(name.encode("utf-8"))
        self.lens = lens
        # per id, one byte per UTF-8 lead byte of the token (one per char it starts): 1 for the token's
        # first byte, else 0; a token that starts with a continuation byte gets no 1 (see _attribute)
        shared: dict[tuple[bool, int], bytes] = {}
        char_marks = [b""] * tok.vocab_size
        tokens = [*tok.mergeable_ranks.items(), *((n.encode("utf-8"), i) for n, i in tok.special_tokens.items())]
        for b, i in tokens:
            if b.isascii():
                key = (True, len(b))
            else:
                key = (b[0] & 0xC0 != 0x80, len(b.translate(None, _CONTINUATION_BYTES)))
            m = shared.get(key)
            if m is None:
                m = shared[key] = (b"\x01" + b"\x00" * (key[1] - 1)) if key[0] else b"\x00" * key[1]
            char_marks[i] = m
        self.char_marks = char_marks
        ordered = sorted(self.names)  # a prefix sorts right before the names it starts
        self.prefix_free = not any(b.startswith(a) for a, b in zip(ordered, ordered[1:]))
        self.id_to_name = {i: n for n, i in tok.special_tokens.items()}
        self.special_ids = tok.special_ids

    def find(self, s: str) -> list[tuple[int, int]]:
        """(start, end) of every special-token name in ``s``, leftmost first, non-overlapping."""
        names = self.names
        return [m.span() for m in self.shape.finditer(s) if m.group() in names]

    def first(self, s: str) -> str | None:
        """A special-token name in ``s`` (the first one), or None."""
        shape, names = self.shape, self.names
        best = None
        for c in self.first_chars:
            pos = s.find(c)
            while pos != -1 and (best is None or pos < best[0]):
                m = shape.match(s, pos)
                if m is not None and m.group() in names:
                    best = (pos, m.group())
                    break
                pos = s.find(c, pos + 1)
        return None if best is None else best[1]

    def in_bytes(self, b: bytes) -> bool:
        """Whether a name's UTF-8 occurs in ``b`` (the names hold no byte of a UTF-8 multi-byte char)."""
        shape, names = self.shape_b, self.names_b
        for c, lasts in zip(self.first_chars_b, self.last_chars_b):
            if not any(map(b.__contains__, lasts)):
                continue
            pos = b.find(c)
            while pos != -1:
                m = shape.match(b, pos)
                if m is not None and m.group() in names:
                    return True
                pos = b.find(c, pos + 1)
        return False


_INFO: "weakref.WeakKeyDictionary[KimiTokenizer, _Info]" = weakref.WeakKeyDictionary()


def _info(tok: KimiTokenizer) -> _Info:
    info = _INFO.get(tok)
    if info is None:
        info = _INFO[tok] = _Info(tok)
    return info


# --------------------------------------------------------------------------------------------------
# Special-token text typed in the input
# --------------------------------------------------------------------------------------------------


def _has_typed_markers(info: _Info, messages: Sequence[Any], tools: Any) -> bool:
    """Whether an input string holds special-token text. One C-speed pass: every string's UTF-8 is
    contiguous in the marshal (or pickle) serialization, so a name in a string is a name in the bytes;
    a hit in the bytes is confirmed string by string (the framing bytes can fake one). Consecutive
    text parts are written back to back, so their concatenation is checked too."""
    try:
        blob = marshal.dumps((messages, tools))
    except ValueError:  # objects marshal does not know (pydantic models...)
        try:
            blob = pickle.dumps((messages, tools), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:
            blob = None
    if blob is None or info.in_bytes(blob):
        if _locate_typed_marker(info, messages, tools) is not None:
            return True
    for m in messages:
        if type(m) is dict or isinstance(m, Mapping):
            content = m.get("content")
        else:
            content = getattr(m, "content", None)
        if isinstance(content, str):
            continue
        if isinstance(content, (list, tuple)) and len(content) > 1:
            joined = "".join([p["text"] for p in content if _is_text_part(p)])
            if info.first(joined) is not None:
                return True
    return False


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
        texts = [p["text"] for p in value if _is_text_part(p)]
        if len(texts) > 1:
            yield path, "".join(texts)
    elif hasattr(value, "model_dump"):
        yield from _walk(value.model_dump(exclude_none=True), path)
    elif value is not None and not isinstance(value, (bool, int, float)):
        yield path, str(value)


def _locate_typed_marker(info: _Info, messages: Sequence[Any], tools: Any) -> tuple[int | None, str, str] | None:
    """Where special-token text is: (message index or None for tools, field, marker)."""
    for i, msg in enumerate(messages):
        for path, s in _walk(msg, ""):
            name = info.first(s)
            if name is not None:
                return i, path, name
    if tools is not None:
        for path, s in _walk(tools, "tools"):
            name = info.first(s)
            if name is not None:
                return None, path, name
    return None


def _check_policy(policy: str) -> None:
    if policy not in _POLICIES:
        raise ValueError(f"special_tokens must be one of {', '.join(map(repr, _POLICIES))}, got {policy!r}")


def _raise_strict(info: _Info, messages: Sequence[Any], tools: Any) -> None:
    hit = _locate_typed_marker(info, messages, tools)
    i, path, marker = hit if hit is not None else (None, "input", "?")
    why = (
        f"contains the special-token text {marker!r}; special_tokens='strict' refuses it "
        "(the default 'text' encodes it as ordinary text, 'special' as the special token)"
    )
    if i is None:
        raise RenderError(f"{path} {why}")
    raise RenderError(why, message_index=i, field=path or None)


# --- masking typed markers: find the template's own markers by rendering with typed ones defused


def _mask_char(c: str) -> str:
    # Same length and never a marker: a CJK ideograph (printable, so neither JSON nor repr() escapes
    # it; injective on ASCII, so dict keys stay distinct).
    o = ord(c)
    return chr(0x4E00 + o) if o < 0x5000 else "\u4e00"


def _mask_text(info: _Info, s: str) -> str:
    spans = info.find(s)
    if not spans:
        return s
    out: list[str] = []
    pos = 0
    for a, b in spans:
        out += [s[pos:a], "".join(map(_mask_char, s[a:b]))]
        pos = b
    out.append(s[pos:])
    return "".join(out)


def _mask(info: _Info, value: Any, breaks: str) -> Any:
    if isinstance(value, str):
        return _mask_text(info, value)
    if isinstance(value, Mapping):
        return {(_mask(info, k, breaks) if isinstance(k, str) else k): _mask(info, v, breaks) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        out = [_mask(info, v, breaks) for v in value]
        _mask_across_parts(info, value, out, breaks)
        return out if isinstance(value, list) else tuple(out)
    if hasattr(value, "model_dump"):
        return _mask(info, value.model_dump(exclude_none=True), breaks)
    return value


def _is_text_part(part: Any) -> bool:
    return isinstance(part, Mapping) and isinstance(part.get("text"), str)


def _is_media_part(part: Any) -> bool:
    return isinstance(part, Mapping) and (
        str(part.get("type", "")).startswith(("image", "video")) or any(k in part for k in _MEDIA_KEYS)
    )


_MEDIA_KEYS = ("image", "image_url", "video", "video_url")
# How text parts are written back to back: "none" (only parts that write nothing lie between them),
# "media" (images and videos write a placeholder), "every" (every other part writes something).
_BREAK_MODES = ("none", "media", "every")


def _text_part_runs(parts: Sequence[Any], breaks: str) -> list[list[int]]:
    """Indices of the text parts that the renderer writes back to back, per run (runs of 2 or more)."""
    runs: list[list[int]] = []
    cur: list[int] = []
    for j, p in enumerate(parts):
        if _is_text_part(p):
            cur.append(j)
        elif breaks == "every" or (breaks == "media" and _is_media_part(p)):
            if len(cur) > 1:
                runs.append(cur)
            cur = []
    if len(cur) > 1:
        runs.append(cur)
    return runs


def _mask_across_parts(info: _Info, parts: Sequence[Any], out: list[Any], breaks: str) -> None:
    """Text parts are written back to back: mask the markers that span two or more of them."""
    for run in _text_part_runs(parts, breaks):
        texts = [parts[x]["text"] for x in run]
        joined = "".join(texts)
        ends = list(accumulate(map(len, texts)))
        chars = list("".join(out[x]["text"] for x in run))
        hit = False
        for a, b in info.find(joined):
            if bisect_left(ends, a + 1) != bisect_left(ends, b):  # spans a part boundary
                hit = True
                chars[a:b] = map(_mask_char, joined[a:b])
        if hit:
            start = 0
            for x, e in zip(run, ends):
                out[x] = {**out[x], "text": "".join(chars[start:e])}
                start = e


def _plain(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if hasattr(value, "model_dump"):
        return value.model_dump(exclude_none=True)
    return value


def _structural_positions(
    info: _Info,
    text: str,
    messages: Sequence[Any],
    tools: Any,
    d: Dialect,
    add_generation_prompt: bool,
    options: Mapping[str, Any],
) -> tuple[list[tuple[int, int]], int]:
    """``(structural, typed)``: the (start, end) of the template's own special tokens in ``text``, and
    the number of special-token names typed in the input that ``text`` holds.

    Renders again with every typed occurrence defused (same length, never a name) and checks that the
    two renders differ exactly at the occurrences that are not the template's. Text parts that are
    written back to back can form a name together: the ways they may be adjacent are tried in turn
    (only a defusing that matches the render exactly is accepted)."""
    mtools = tools
    md = d
    if tools is not None and d.sort_tool_keys:
        from .oracle import deep_sort_dict

        # sort by the real keys, then keep that order (masking could reorder keys)
        mtools = deep_sort_dict(_plain(tools))
        md = dataclasses.replace(d, sort_tool_keys=False)
    occurrences = info.find(text)
    for breaks in _BREAK_MODES:
        try:
            masked = "".join(
                s.text
                for s in render_segments(
                    _mask(info, list(messages), breaks), tools=_mask(info, mtools, breaks), dialect=md,
                    add_generation_prompt=add_generation_prompt, **options,
                )
            )
        except ValueError:  # a defused string the renderer refuses: not this way
            continue
        if len(masked) != len(text):
            continue
        structural = info.find(masked)
        keep = set(structural)
        rebuilt: list[str] = []
        pos = 0
        typed = 0
        for a, b in occurrences:
            if (a, b) in keep:
                continue
            typed += 1
            rebuilt += [text[pos:a], "".join(map(_mask_char, text[a:b]))]
            pos = b
        rebuilt.append(text[pos:])
        if "".join(rebuilt) == masked:
            return structural, typed
    raise RenderError(  # pragma: no cover - a render path that does not copy strings verbatim
        "cannot tell the template's markers from special-token text typed in the input; "
        "use special_tokens='special' or remove the marker text"
    )


# --------------------------------------------------------------------------------------------------
# Tokenization and attribution
# --------------------------------------------------------------------------------------------------


def _encode_from(tok: KimiTokenizer, text: str, start: int, structural: list[tuple[int, int]] | None) -> list[int]:
    """Tokens of ``text[start:]`` as the official encode of the whole ``text`` gives them, given that a
    token boundary falls at ``start``. ``structural=None``: every special-token text is special;
    else only the listed ``(start, end)`` occurrences are."""
    enc = tok.encoding
    bounds = [start, *cut_points(text, start), len(text)]
    out: list[int] = []
    if structural is None:
        names = tok._special_names
        if len(bounds) == 2 and start == 0:
            return enc.encode(text, allowed_special=names, disallowed_special=())
        for a, b in zip(bounds, bounds[1:]):
            out += enc.encode(text[a:b], allowed_special=names, disallowed_special=())
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


_Pieces = tuple[Sequence[int], Optional[Sequence[bool]], Sequence[int]]


def _attribute(
    ids: list[int], parts: list[str], marks: list[tuple[int, int, bool]], info: _Info, text: str
) -> tuple[_Pieces, list[int] | None]:
    """``((message indices, trainable flags, token counts) per piece, mask or None)`` from the writer's
    parts and marks (:func:`kimi_chat.render._render_marked`): a token belongs to the piece of its first
    byte, and is in the mask only if every piece it covers is trainable. Counts may be 0. The mask is
    None when it follows from the pieces (no token crosses a piece boundary).

    C-level passes only: ``info.char_marks`` turns the ids into one byte per char of the prompt, 1 where
    a token starts (each char is counted at its UTF-8 lead byte), so a piece's token count is a
    ``bytes.count`` over its char range. When a token starts inside a char or runs across a piece
    boundary (BPE merged across it), :func:`_attribute_straddling` walks byte offsets instead."""
    n = len(ids)
    starts, idxs, trains = zip(*marks)
    off = [0, *accumulate(map(len, parts))]
    bounds = [*map(off.__getitem__, starts), off[-1]]  # piece k is text[bounds[k]:bounds[k + 1]]
    cm = info.char_marks
    buf = b"".join(itemgetter(*ids)(cm) if n > 1 else [cm[i] for i in ids]) + b"\x01"
    counts = list(map(buf.count, repeat(1), bounds, bounds[1:]))
    # sum(counts) < n: a token starts inside a char; a 0 at a boundary: a token runs across it
    if sum(counts) != n or len(buf) != len(text) + 1 or 0 in itemgetter(*bounds)(buf):
        return _attribute_straddling(ids, parts, starts, idxs, trains, info.lens)
    return (idxs, trains, counts), None


def _attribute_straddling(
    ids: list[int], parts: list[str], starts: Sequence[int], idxs: Sequence[int], trains: Sequence[bool],
    lens: list[int],
) -> tuple[_Pieces, list[int]]:
    """:func:`_attribute` by byte offsets, for any tokenization (tokens that start inside a char or
    run across piece boundaries)."""
    off = [0, *accumulate([len(p.encode("utf-8")) for p in parts])]
    seg_ends = [*map(off.__getitem__, starts[1:]), off[-1]]  # marks[0] starts at part 0
    ends = [0, *accumulate([lens[i] for i in ids])]  # 0, then each token's end byte
    n = len(ids)
    pieces = []  # the non-empty pieces: (end byte, message index, trainable)
    prev = 0
    for e, idx, train in zip(seg_ends, idxs, trains):
        if e > prev:
            pieces.append((e, idx, train))
            prev = e
    last = len(pieces) - 1
    mask: list[int] = []
    runs: list[tuple[int, int]] = []
    zero: list[int] = []
    lo = 0
    for j, (e, idx, train) in enumerate(pieces):
        hi = bisect_right(ends, e, lo + 1) - 1  # tokens [lo, hi) end inside this piece
        if hi < n and ends[hi] < e:
            # token `hi` starts in this piece and runs past its end (BPE merged across the boundary)
            if train:
                k = j + 1
                while k <= last and pieces[k - 1][0] < ends[hi + 1]:
                    if not pieces[k][2]:
                        zero.append(hi)
                        break
                    k += 1
            hi += 1
        if hi > lo:
            mask += [1 if train else 0] * (hi - lo)
            runs.append((idx, hi - lo))
            lo = hi
    for t in zero:
        mask[t] = 0
    return ([r[0] for r in runs], None, [r[1] for r in runs]), mask


def _typed_policy(
    info: _Info,
    text: str,
    messages: Sequence[Any],
    tools: Any,
    d: Dialect,
    add_generation_prompt: bool,
    options: Mapping[str, Any],
    policy: str,
    candidate: bool,
) -> tuple[list[tuple[int, int]] | None, bool]:
    """(structural positions or None when every special-token text is the template's, typed?)."""
    if not candidate:
        return None, False
    structural, typed = _structural_positions(info, text, messages, tools, d, add_generation_prompt, options)
    if not typed:
        return None, False
    if policy == "strict":
        _raise_strict(info, messages, tools)
    return structural, True


def _clean_end(info: _Info, ids: list[int], text: str, structural: list[tuple[int, int]] | None) -> bool:
    """Whether the prompt ends with one of the template's special tokens (so a token boundary, and
    nothing after it can merge into the prefix)."""
    if not ids:
        return False
    name = info.id_to_name.get(ids[-1])
    if name is None or not text.endswith(name):
        return False
    return structural is None or (len(text) - len(name), len(text)) in set(structural[-1:])


def _build(
    tok: KimiTokenizer,
    info: _Info,
    parts: list[str],
    marks: list[tuple[int, int, bool]],
    text: str,
    ids: list[int],
    structural: list[tuple[int, int]] | None,
    typed: bool,
    messages: list[Any],
    tools: Any,
    d: Dialect,
    add_generation_prompt: bool,
    options: dict[str, Any],
    policy: SpecialTokensPolicy,
) -> RenderedTokens:
    pieces, mask = _attribute(ids, parts, marks, info, text)
    return RenderedTokens(
        ids, pieces, mask, text, tok, messages, tools, d, add_generation_prompt, options, policy,
        _clean_end(info, ids, text, structural), typed,
    )


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
    parts, marks = _render_marked(messages, tools, d, add_generation_prompt, options)
    text = "".join(parts)
    info = _info(tokenizer)
    structural, typed = _typed_policy(info, text, messages, tools, d, add_generation_prompt, options, special_tokens,
                                      special_tokens != "special" and _has_typed_markers(info, messages, tools))
    ids = _encode_from(tokenizer, text, 0, structural)
    return _build(tokenizer, info, parts, marks, text, ids, structural, typed, list(messages), tools, d,
                  add_generation_prompt, dict(options), special_tokens)


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
    text after ``<|im_end|>``...). Whenever it returns, the result equals :func:`render_tokens` of the
    extended conversation (ids, message indices, mask, spans); only the new part is tokenized when the
    previous prompt ends with a special token.
    """
    tok = previous.tokenizer
    tools = previous.tools if tools is _SAME else tools
    opts = {**previous.options, **options}
    d = previous._dialect
    policy = previous.special_tokens
    messages = [*previous.messages, *new_messages]
    completion_ids = list(completion_ids)
    parts, marks = _render_marked(messages, tools, d, add_generation_prompt, opts)
    text = "".join(parts)
    prev_text = previous.text
    if not text.startswith(prev_text):
        return None
    info = _info(tok)
    n = len(previous.ids)
    if not (previous._clean_end and info.prefix_free):
        full = render_tokens(messages, tokenizer=tok, tools=tools, dialect=d, add_generation_prompt=add_generation_prompt,
                             special_tokens=policy, **opts)
        if full.ids[:n] != previous.ids or full.ids[n : n + len(completion_ids)] != completion_ids:
            return None
        return full
    candidate = policy != "special" and (
        previous._typed
        or _has_typed_markers(info, list(new_messages), tools if tools is not previous.tools else None)
    )
    structural, typed = _typed_policy(info, text, messages, tools, d, add_generation_prompt, opts, policy, candidate)
    tail = _encode_from(tok, text, len(prev_text), structural)
    if tail[: len(completion_ids)] != completion_ids:
        return None
    return _build(tok, info, parts, marks, text, previous.ids + tail, structural, typed, messages, tools, d,
                  add_generation_prompt, opts, policy)
