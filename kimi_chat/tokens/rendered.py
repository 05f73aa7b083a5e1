"""Token-level rendering: the prompt as token ids, which message each token belongs to, which tokens a
model produced (the training mask), and prefix-stable extension to the next turn.

:func:`render_tokens` builds on :func:`kimi_chat.prompt.render_layout`: the prompt text is tokenized
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

The template's markers are told from typed text by the renderer itself: it writes template literals
and input text as separate parts (:func:`kimi_chat.prompt.render_layout`), so a special-token name
wholly inside a literal is the template's and any other is typed. One render; the prompt is walked
name by name only when the input parts hold special-token text (a C-speed check).

**Cost** (100-message tool conversation, ``benchmarks/render_tokens.py``): about 1.2x ``render`` +
``encode``: the tokenization itself, the renderer's part marks (~0.1 ms more than ``render``), the
typed-text check over the input parts and the attribution (per-piece token counts by C-level passes,
:func:`_attribute`). ``assistant_mask``, ``message_index`` and ``spans`` are built from the per-piece
counts on first access (~0.02 ms each). :func:`extend_tokens` tokenizes only the new turn.

**Segment-wise families** (the record's ``segment_wise``: Kimi-K3, with ``KimiTokenizer.from_reference("k3")``):
the ids are the official segment-by-segment ``apply_chat_template(tokenize=True)``, *not* ``encode(render(...))``
(:mod:`kimi_chat.tokens.segments`, with what the policies mean there). A tokenizer without the dialect family's
special tokens is refused with a :class:`~kimi_chat.errors.RenderError` (:mod:`kimi_chat.tokens.vocabulary`).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from itertools import accumulate, repeat
from operator import itemgetter
from typing import Any, Literal, NamedTuple, Optional

from ..caches import PerTokenizer
from ..dialect_records import DEFAULT_DIALECT, DialectRecord as Dialect, get_dialect
from ..errors import RenderError
from ..messages import string_paths, to_plain
from ..prompt import Layout, render_layout, write_prompt
from ..prompt.writer import Writer
from ..surrogates import utf8_len as _utf8_len, warn_lone_surrogates
from .segments import encode_items, raise_typed, typed_special
from .live import PickledWithoutTokenizer, register_live
from .reasoning import reasoning_dropped, warn_training_example
from .text_ids import text_ids
from .tokenizer import KimiTokenizer, cut_points
from .prompt_ids import encode_whole as _encode_whole
from .vocabulary import check_vocabulary

__all__ = ["RenderedTokens", "Span", "render_tokens", "render_ids", "extend_tokens", "SpecialTokensPolicy"]

SpecialTokensPolicy = Literal["text", "strict", "special"]
_POLICIES = ("text", "strict", "special")


class Span(NamedTuple):
    """Tokens ``ids[start:end]`` belong to message ``message_index`` (-1: scaffolding of no message)."""

    message_index: int
    start: int
    end: int


_ONES = [1] * 4096


class RenderedTokens(PickledWithoutTokenizer):
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
    * ``text``: the prompt text (``tokenizer.decode(ids) == text``);
    * ``reasoning_dropped``: rendered by :func:`render_tokens` without a generation prompt (a training
      example), how many assistant messages carry reasoning the rendering does not write in their turn (the
      count its warning gives); ``None`` with a generation prompt or a continued final message, and from
      :func:`extend_tokens`.

    The other attributes record how it was rendered (for :func:`extend_tokens`): ``tokenizer``,
    ``messages``, ``tools``, ``dialect``, ``add_generation_prompt``, ``continue_final_message``, ``options``,
    ``special_tokens``.
    """

    __slots__ = (
        "ids", "text", "_tokenizer", "messages", "tools", "dialect", "add_generation_prompt", "options",
        "special_tokens", "continue_final_message", "_pieces", "_mask", "_message_index", "_spans", "_clean_end",
        "_dialect", "_tokenizer_ref", "reasoning_dropped",
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
        continue_final_message: bool = False,
    ) -> None:
        self._dialect = get_dialect(dialect)
        self.ids = ids
        # (message indices, trainable flags, token counts) of the pieces of the prompt, in order; counts
        # may be 0; the flags are None when the mask is given
        self._pieces = pieces
        self._mask = assistant_mask
        self.text = text
        self._tokenizer: KimiTokenizer | None = tokenizer
        self._tokenizer_ref: tuple[str, str, int, int | None] | None = None
        self.messages = messages
        self.tools = tools
        self.dialect = self._dialect.name
        self.add_generation_prompt = add_generation_prompt
        self.options = options
        self.special_tokens = special_tokens
        self._message_index: list[int] | None = None
        self._spans: list[Span] | None = None
        self._clean_end = clean_end
        self.continue_final_message = continue_final_message
        self.reasoning_dropped: int | None = None

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

_CONTINUATION_BYTES = bytes(range(0x80, 0xC0))


class _Info:
    __slots__ = ("names", "shape", "first_chars", "lens", "char_marks", "prefix_free", "id_to_name", "special_ids")

    def __init__(self, tok: KimiTokenizer) -> None:
        self.names = frozenset(tok.special_tokens)
        tables = text_ids(tok)  # the per-tokenizer name tables, computed there once
        self.shape = tables.shape
        # every name starts with one of these chars: str.find (memchr speed) rules most text out
        self.first_chars = tuple(sorted({n[0] for n in self.names}))
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
        self.prefix_free = tables.prefix_free
        self.id_to_name = tables.id_to_name
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


_INFO: PerTokenizer[_Info] = PerTokenizer("tokens.special_names")


def _info(tok: KimiTokenizer) -> _Info:
    return _INFO.get(tok, _Info)


# --------------------------------------------------------------------------------------------------
# Special-token text typed in the input
# --------------------------------------------------------------------------------------------------


def _structure(info: _Info, lay: Layout, text: str) -> tuple[list[tuple[int, int]] | None, tuple[int, int] | None]:
    """``(structural, first_typed)``: the ``(start, end)`` of the template's own special tokens in
    ``text`` (``None`` when every special-token text in it is the template's) and the first one typed
    in the input (``None``: none).

    The renderer says which parts are input text (:class:`~kimi_chat.prompt.Layout`): a special-token
    name lies wholly inside a template literal (the template's marker) or holds input text (typed).
    The input parts are checked first, back to back (a C-speed pass; parts written back to back can
    form a name together); only when a name shows up there is the prompt walked name by name."""
    parts, texts = lay.parts, lay.texts
    if not texts:
        return None, None
    inputs = itemgetter(*texts)(parts) if len(texts) > 1 else (parts[texts[0]],)
    if info.first("".join(inputs)) is None:
        return None, None
    off = [0, *accumulate(map(len, parts))]
    literal = [True] * len(parts)
    for k in texts:
        literal[k] = False
    structural: list[tuple[int, int]] = []
    first_typed = None
    for a, b in info.find(text):
        k = bisect_right(off, a) - 1  # the (non-empty) part the name starts in
        if literal[k] and b <= off[k + 1]:
            structural.append((a, b))
        elif first_typed is None:
            first_typed = (a, b)
    return (None if first_typed is None else structural), first_typed


def _check_policy(policy: str) -> None:
    if policy not in _POLICIES:
        raise ValueError(f"special_tokens must be one of {', '.join(map(repr, _POLICIES))}, got {policy!r}")


def _raise_strict(lay: Layout, text: str, at: tuple[int, int], messages: Sequence[Any], tools: Any) -> None:
    """The ``strict`` policy's error for the typed special-token text at ``at``: the message (from the
    renderer's marks) and the field holding it."""
    name = text[at[0] : at[1]]
    pos = 0
    owner = -1
    starts = {m[0]: m[1] for m in lay.marks}
    for k, part in enumerate(lay.parts):
        owner = starts.get(k, owner)
        pos += len(part)
        if pos > at[0]:
            break
    value = to_plain(messages[owner]) if owner >= 0 else to_plain(tools)
    path = next((p for p, s in string_paths(value, "" if owner >= 0 else "tools") if name in s), None)
    why = (
        f"contains the special-token text {name!r}; special_tokens='strict' refuses it "
        "(the default 'text' encodes it as ordinary text, 'special' as the special token)"
    )
    if owner < 0:
        raise RenderError(f"{path or 'tools'} {why}")
    raise RenderError(why, message_index=owner, field=path or None)


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
            return _encode_whole(tok, text)
        for a, b in zip(bounds, bounds[1:]):
            out += enc.encode(text[a:b], allowed_special=names, disallowed_special=())
        return out
    k = bisect_left(structural, (start, -1))
    sp = tok.special_tokens
    ordinary = text_ids(tok).ids  # each stretch between special tokens on its own: its ids, cached
    for a, b in zip(bounds, bounds[1:]):
        pos = a
        while k < len(structural) and structural[k][0] < b:
            s, e = structural[k]
            if s < a or e > b:  # cut through by a long-input cut: text, as in the official encode
                k += 1
                continue
            if pos < s:
                out += ordinary(text[pos:s])
            out.append(sp[text[s:e]])
            pos = e
            k += 1
        if pos < b:
            out += ordinary(text[pos:b])
    return out


_Pieces = tuple[Sequence[int], Optional[Sequence[bool]], Sequence[int]]


def _attribute(
    ids: list[int], parts: list[str], marks: list[tuple[int, int, bool]], info: _Info, text: str
) -> tuple[_Pieces, list[int] | None]:
    """``((message indices, trainable flags, token counts) per piece, mask or None)`` from the writer's parts and
    marks (a :class:`~kimi_chat.prompt.Layout`): a token belongs to the piece of its first byte, and is in the mask
    only if every piece it covers is trainable. Counts may be 0. The mask is None when it follows from the pieces
    (no token crosses a piece boundary).

    C-level passes only: ``info.char_marks`` turns the ids into one byte per char of the prompt, 1 where a token
    starts (each char is counted at its UTF-8 lead byte), so a piece's token count is a ``bytes.count`` over its
    char range. When a token starts inside a char or runs across a piece boundary (BPE merged across it),
    :func:`_attribute_straddling` walks byte offsets instead."""
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
    off = [0, *accumulate([_utf8_len(p) for p in parts])]
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


def _policy_structure(
    info: _Info, lay: Layout, text: str, policy: str, messages: Sequence[Any], tools: Any
) -> list[tuple[int, int]] | None:
    """The special tokens to encode as such: ``None`` for every special-token text in the prompt
    (policy ``special``, or nothing typed), else the template's own (``text``); ``strict`` raises."""
    if policy == "special":
        return None
    structural, typed = _structure(info, lay, text)
    if typed is not None and policy == "strict":
        _raise_strict(lay, text, typed, messages, tools)
    return structural


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
    lay: Layout,
    text: str,
    ids: list[int],
    structural: list[tuple[int, int]] | None,
    messages: list[Any],
    tools: Any,
    d: Dialect,
    add_generation_prompt: bool,
    continue_final_message: bool,
    options: dict[str, Any],
    policy: SpecialTokensPolicy,
) -> RenderedTokens:
    pieces, mask = _attribute(ids, lay.parts, lay.marks, info, text)
    return RenderedTokens(
        ids, pieces, mask, text, tok, messages, tools, d, add_generation_prompt, options, policy,
        _clean_end(info, ids, text, structural), continue_final_message,
    )


def _check_tokenizer(tokenizer: Any) -> None:
    if not isinstance(tokenizer, KimiTokenizer):
        raise TypeError(
            f"tokenizer must be a KimiTokenizer (e.g. KimiTokenizer.from_reference('k2')), got {type(tokenizer).__name__}"
        )
    register_live(tokenizer)  # a live tokenizer an unpickled result can take back (by its files)


def render_tokens(
    messages: Sequence[Any],
    *,
    tokenizer: KimiTokenizer,
    tools: Sequence[Any] | None = None,
    dialect: str | Dialect = DEFAULT_DIALECT,
    add_generation_prompt: bool | None = None,
    continue_final_message: bool = False,
    special_tokens: SpecialTokensPolicy = "text",
    strict: bool = False,
    warn: bool = True,
    **options: Any,
) -> RenderedTokens:
    """The prompt of :func:`kimi_chat.prompt.render` as token ids, with per-token message index, the assistant
    training mask and per-message spans (see :class:`RenderedTokens`).

    ``ids == tokenizer.encode(render(...))`` whenever no input string contains special-token text; with such text,
    ``special_tokens`` decides (module docstring): ``"text"`` (default) encodes it as ordinary text, ``"strict"``
    raises :class:`~kimi_chat.errors.RenderError` naming the message index, ``"special"`` encodes it as the special
    token. ``add_generation_prompt`` and ``continue_final_message`` are :func:`~kimi_chat.prompt.render`'s, and so
    is ``strict`` (refuse what :func:`~kimi_chat.lint` reports as an error; default: official parity). With a
    dialect that leaves the last turn open without a generation prompt (0905, the default) and a conversation ending
    with an assistant turn, a ``UserWarning`` says that turn's end is never labelled (lint's
    ``unterminated-last-turn``; the ids stay the official ones), and another when the rendering drops reasoning the
    assistant messages carry (the training-data trap: :mod:`kimi_chat.data`); ``warn=False`` gives neither (the
    count is on the result either way: ``reasoning_dropped``; the open last turn is lint's). Raises what
    :func:`~kimi_chat.prompt.render` raises for invalid input, and ``TypeError`` when ``tokenizer`` is not a
    :class:`~kimi_chat.tokens.tokenizer.KimiTokenizer`.

    For ``dialect="kimi-k3"`` the ids equal the official K3 ``apply_chat_template(tokenize=True)`` (segment by
    segment, see :mod:`kimi_chat.tokens.segments`); ``tokenizer`` must then be a K3 tokenizer
    (``KimiTokenizer.from_reference("k3")``): a tokenizer without the family's special tokens raises
    :class:`~kimi_chat.errors.RenderError`.
    """
    _check_tokenizer(tokenizer)
    _check_policy(special_tokens)
    d = get_dialect(dialect)
    check_vocabulary(tokenizer, d)
    if d.family_parts.tokens.segment_wise:
        r = _segment_tokens(messages, tokenizer, tools, d, add_generation_prompt, continue_final_message,
                            special_tokens, options, strict)
        lay = None
    else:
        lay, info, structural, ids = _k2_ids(messages, tokenizer, tools, d, add_generation_prompt,
                                             continue_final_message, special_tokens, strict, options)
        agp = not continue_final_message if add_generation_prompt is None else add_generation_prompt
        r = _build(tokenizer, info, lay, lay.text, ids, structural, list(messages), tools, d, agp,
                   continue_final_message, dict(options), special_tokens)
    if not (r.add_generation_prompt or continue_final_message):
        r.reasoning_dropped = reasoning_dropped(messages, r, lay)
        if warn:
            warn_training_example(messages, d, r, stacklevel=3, lay=lay)
    return r


def _segment_tokens(
    messages: Sequence[Any], tok: KimiTokenizer, tools: Sequence[Any] | None, d: Dialect, agp: bool | None,
    continue_final_message: bool, policy: SpecialTokensPolicy, options: dict[str, Any], strict: bool,
) -> RenderedTokens:
    """:func:`render_tokens` of a segment-wise family: each part of the layout encoded on its own
    (:mod:`kimi_chat.tokens.segments`), so every token belongs to one part (no straddling token)."""
    w = Writer(marked=True)
    agp = write_prompt(w, messages, tools, d, agp, continue_final_message, options, strict)
    if policy == "strict":
        typed = typed_special(w.layout(), _info(tok).first)
        if typed is not None:
            raise_typed(typed, messages, tools, options)
    items, marks = w.written_items()
    text = "".join(items)
    warn_lone_surrogates(items, marks, messages, tools, options, stacklevel=3, text=text)
    ids, ends = encode_items(items, tok, [m[0] for m in marks[1:]] + [len(items)], policy == "special")
    counts = [e - s for s, e in zip([0, *ends], ends)]
    return RenderedTokens(ids, ([m[1] for m in marks], [m[2] for m in marks], counts), None, text, tok,
                          list(messages), tools, d, agp, dict(options), policy, False, False)


def _k2_ids(
    messages: Sequence[Any], tokenizer: KimiTokenizer, tools: Sequence[Any] | None, d: Dialect,
    add_generation_prompt: bool | None, continue_final_message: bool, policy: SpecialTokensPolicy, strict: bool,
    options: dict[str, Any],
) -> tuple[Layout, _Info, list[tuple[int, int]] | None, list[int]]:
    """(layout, tokenizer tables, structural special tokens, ids) of a K2-family prompt."""
    lay = render_layout(messages, tools=tools, dialect=d, add_generation_prompt=add_generation_prompt,
                        continue_final_message=continue_final_message, strict=strict, **options)
    info = _info(tokenizer)
    text = lay.text
    structural = _policy_structure(info, lay, text, policy, messages, tools)
    warn_lone_surrogates(lay.parts, lay.marks, messages, tools, options, stacklevel=3, text=text)
    return lay, info, structural, _encode_from(tokenizer, text, 0, structural)


def render_ids(
    messages: Sequence[Any],
    *,
    tokenizer: KimiTokenizer,
    tools: Sequence[Any] | None = None,
    dialect: str | Dialect = DEFAULT_DIALECT,
    add_generation_prompt: bool | None = None,
    continue_final_message: bool = False,
    special_tokens: SpecialTokensPolicy = "text",
    strict: bool = False,
    **options: Any,
) -> list[int]:
    """``render_tokens(...).ids`` without the per-token attribution (message index, mask, spans): for a server that
    needs only the prompt ids. Same arguments, errors and ids as :func:`render_tokens`."""
    _check_tokenizer(tokenizer)
    _check_policy(special_tokens)
    d = get_dialect(dialect)
    if d.family_parts.tokens.segment_wise:
        return render_tokens(messages, tokenizer=tokenizer, tools=tools, dialect=d,
                             add_generation_prompt=add_generation_prompt,
                             continue_final_message=continue_final_message, special_tokens=special_tokens,
                             strict=strict, **options).ids
    check_vocabulary(tokenizer, d)
    return _k2_ids(messages, tokenizer, tools, d, add_generation_prompt, continue_final_message, special_tokens,
                   strict, options)[3]


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
    """The next turn's prompt as ``previous.ids + completion_ids + <the new messages' tokens>``, or ``None`` when
    that is not exactly what a full :func:`render_tokens` of the extended conversation gives.

    ``previous`` is the prompt the model completed (usually rendered with the generation prompt), ``completion_ids``
    the ids it generated (normally ending with ``<|im_end|>``), ``new_messages`` the messages that follow
    ``previous.messages``: first the assistant message the completion stands for (as parsed from it), then tool
    results / the next user message. ``tools`` and ``options`` default to those of ``previous``; dialect, tokenizer
    and special-token policy are those of ``previous``.

    ``None`` when the prompt is not prefix-stable: the dialect re-renders earlier turns (a Thinking dialect drops
    earlier reasoning once a final answer follows), the tools or options changed, or the completion is not how the
    tokenizer encodes the assistant message (a non-canonical tokenization, text after ``<|im_end|>``...). Whenever
    it returns, the result equals :func:`render_tokens` of the extended conversation (ids, message indices, mask,
    spans); only the new part is tokenized when the previous prompt ends with a special token.
    """
    tok = previous.tokenizer
    tools = previous.tools if tools is _SAME else tools
    opts = {**previous.options, **options}
    d = previous._dialect
    policy = previous.special_tokens
    messages = [*previous.messages, *new_messages]
    completion_ids = list(completion_ids)
    if d.family_parts.tokens.segment_wise:  # the full render, when it starts with the previous ids and the completion
        full = _segment_tokens(messages, tok, tools, d, add_generation_prompt, False, policy, opts, False)
        n = len(previous.ids)
        if full.ids[:n] != previous.ids or full.ids[n : n + len(completion_ids)] != completion_ids:
            return None
        return full
    lay = render_layout(messages, tools=tools, dialect=d, add_generation_prompt=add_generation_prompt, **opts)
    text = lay.text
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
    structural = _policy_structure(info, lay, text, policy, messages, tools)
    warn_lone_surrogates(lay.parts, lay.marks, messages, tools, opts, stacklevel=2, text=text)
    tail = _encode_from(tok, text, len(prev_text), structural)
    if tail[: len(completion_ids)] != completion_ids:
        return None
    return _build(tok, info, lay, text, previous.ids + tail, structural, messages, tools, d, add_generation_prompt,
                  False, opts, policy)
