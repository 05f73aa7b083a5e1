"""Token ids make markers certain: which marker spellings in the text are real markers.

A marker the model emits is ONE special token; the same spelling written by ordinary tokens (text
a user typed and the model echoed, e.g. a string argument ``<|close|>argument<|sep|>``) is text.
When the caller passes each chunk's token ids (``StreamParser.feed(text, token_ids)``), a spelling
that has a special id (:data:`kimi_chat.markers` gives them) is a marker only where an id of it
came; spellings with no id of their own (K2's singular ``<|tool_call_section_begin|>``) are still
decided by the text.

:class:`TokenMarkers` keeps one *credit* per special id seen, per spelling; the lexer asks
:meth:`TokenMarkers.real` at each occurrence of a spelling, and an occurrence is a marker only if
it takes a credit. Credits carry over chunks, so a server whose text lags its ids (a detokenizer
that holds back an incomplete character or a possible stop string) is served too: with a decoder
exactly (the ids' text and the text are matched across chunks, so a typed copy that arrives while
the real marker's id is already in is still text); without one in order, warned ``ambiguous_marker``
when text after the end of the turn holds a copy of a spelling with no id left after an earlier copy
took one (one of them was typed: ``'say <|im_end|> ok'`` lagging its ids).

* **With a decoder** (``tokenizer=``: a :class:`~kimi_chat.tokens.tokenizer.KimiTokenizer`, a ``transformers``
  tokenizer or a callable ``id -> bytes``, see :func:`token_bytes`) the ids' bytes are decoded
  incrementally, as a streaming detokenizer does; when they spell the chunk's text (the usual case),
  each credit holds the offset of its marker: exact for any chunking. When the text is only the start
  of what the ids spell (a server leaves out the stop token's text, or its text lags the ids), the
  markers within the text have offsets and the rest a lower bound (the end of the text). A chunk whose text is not its ids' (a relay
  stripped or altered it, a server handed over part of the text with all the ids) gives credits
  without offsets, as without a decoder.
* **Without one**, credits are taken in order, first occurrence first. Exact when no chunk holds,
  for one spelling, both a real marker and a typed copy (every chunk of one token, the usual
  stream, is exact); otherwise which occurrences are real is a guess, warned ``ambiguous_marker``.
  A credit whose text never comes (a relay stripped the marker but passed its id) waits for the
  next occurrence of its spelling.
* A chunk whose ids hold no special id holds no marker of a spelling that has one.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from .. import markers as M
from .peg import MarkerTable
from .lexer import Utf8Chunks
from .types import Warn

__all__ = ["TokenMarkers", "token_bytes"]

_SPELLING_ID: dict[str, int] = {m.text: m.id for m in (*M.MARKERS, *M.K3_MARKERS) if m.id is not None}
"""Marker spelling -> its special id (a spelling has the same id in every family that has it)."""


def token_bytes(tokenizer: Any) -> Callable[[int], bytes]:
    """The ``id -> bytes`` function of ``tokenizer``: a :class:`~kimi_chat.tokens.tokenizer.KimiTokenizer`
    (``id_to_bytes``), a ``transformers`` tokenizer of a byte-level vocabulary (``convert_ids_to_tokens``:
    GPT-2 byte-level token strings, special tokens by name, as the Kimi tokenizers give them), or a
    callable ``id -> bytes`` itself. ``TypeError`` for anything else."""
    f = getattr(tokenizer, "id_to_bytes", None)
    if callable(f):
        return f  # type: ignore[no-any-return]
    conv = getattr(tokenizer, "convert_ids_to_tokens", None)
    if callable(conv):
        from ..tokens.tokenizer import BYTE_DECODER

        def hf_bytes(i: int) -> bytes:
            t = conv(i)
            if isinstance(t, bytes):
                return t
            try:
                return bytes([BYTE_DECODER[c] for c in t])
            except KeyError:  # not a byte-level spelling (an added token's name): its text
                return str(t).encode("utf-8")

        return hf_bytes
    if callable(tokenizer):
        return tokenizer  # type: ignore[no-any-return]
    raise TypeError(f"tokenizer= takes a KimiTokenizer, a transformers tokenizer or a callable id -> bytes, "
                    f"not {type(tokenizer).__name__}")


class TokenMarkers:
    """The credits of one parse (see the module docstring).

    ``table``: the lexer's marker table; ``warn(kind, message, offset, text="")``: where warnings go;
    ``tokenizer``: optional decoder, as :func:`token_bytes` takes.
    """

    __slots__ = ("ids", "credits", "warn", "_bytes", "_utf8", "_memo", "_sync", "_ahead_ids", "_ahead_text",
                 "_taken", "_warned", "_tail", "_seen")

    def __init__(self, table: MarkerTable, warn: Warn, tokenizer: Any = None) -> None:
        self.ids: dict[int, str] = {_SPELLING_ID[s]: s for s in table.classes if s in _SPELLING_ID}
        """Special id -> its spelling, for the spellings of ``table`` that have an id."""
        self.credits: dict[str, deque[int | None]] = {s: deque() for s in self.ids.values()}
        """Per spelling: an offset (the marker is there) or ``None`` (the next occurrence)."""
        self.warn = warn
        self._bytes = None if tokenizer is None else token_bytes(tokenizer)
        self._utf8 = Utf8Chunks()
        self._memo: dict[int, bytes] = {}  # id -> its bytes, as decoded so far
        # with a decoder: the text and the ids' text agree up to offset _sync; beyond it, what one
        # side has that the other has not yet (the text lags its ids, or runs ahead of them)
        self._sync = 0
        self._ahead_ids = ""
        self._ahead_text = ""
        self._taken: set[str] = set()  # without a decoder: spellings that took a credit (in order)
        self._warned: set[str] = set()
        self._tail = ""  # the end of the text after the turn, a spelling may start in it
        self._seen: set[str] = set()  # spellings the lexer met in the text (real or typed)

    def add(self, text: str, token_ids: Sequence[int], offset: int) -> None:
        """The ids of the chunk ``text`` that starts at ``offset``: one credit per special id. With
        a decoder, each credit holds the offset of its marker while the text is the ids' text (in
        the same chunk, or lagging behind them or ahead of them across chunks); once they disagree
        (a relay altered the text), until they agree again at a chunk boundary, credits have no
        offset, as without a decoder."""
        ids = self.ids
        credits = self.credits
        if self._bytes is not None:
            to_bytes, decode, memo = self._bytes, self._utf8.decode, self._memo
            parts: list[str] = []
            found: list[tuple[str, int]] = []
            n = 0
            for i in token_ids:
                b = memo.get(i)
                if b is None:
                    b = memo[i] = to_bytes(i)
                out = decode(b)
                parts.append(out)
                n += len(out)
                s = ids.get(i)
                if s is not None:
                    found.append((s, n - len(s)))
            if offset != self._sync + len(self._ahead_text):  # text came without ids: start again here
                self._sync, self._ahead_ids, self._ahead_text = offset, "", ""
            mine = "".join(parts)
            a, b = self._ahead_ids + mine, self._ahead_text + text
            k = min(len(a), len(b))
            if a[:k] == b[:k]:  # the ids spell the text (both may run ahead of the other)
                base = self._sync + len(self._ahead_ids)
                for s, at in found:
                    credits[s].append(base + at)
                self._sync += k
                self._ahead_ids, self._ahead_text = a[k:], b[k:]
                return
            self._sync, self._ahead_ids, self._ahead_text = offset + len(text), "", ""
        for i in token_ids:  # no decoder, or the text is not the ids' (it was altered)
            s = ids.get(i)
            if s is not None:
                credits[s].append(None)
        self._check_ambiguous(text, token_ids, offset)

    def lagging(self, spellings: frozenset[str]) -> bool:
        """Whether the ids' text runs ahead of the text by more than ``spellings`` (end-of-turn
        markers a relay may strip): their text is still to come, so the end waits for it."""
        ahead = self._ahead_ids
        if not ahead:
            return False
        changed = True
        while ahead and changed:
            changed = False
            for s in spellings:
                if ahead.endswith(s):
                    ahead, changed = ahead[:-len(s)], True
        return bool(ahead)

    def after_end(self, text: str, offset: int) -> None:
        """Text after the end of the turn (at ``offset``), without a decoder: a spelling there with no
        id left for it, after an earlier copy took one (in order), says one of them was typed (the
        text lagged its ids): warned ``ambiguous_marker``, which one cannot be told."""
        if self._bytes is not None or not self._taken:
            return  # with a decoder the credits are placed: nothing to guess
        tail = self._tail + text
        offset -= len(self._tail)
        self._tail = tail[-max(map(len, self._taken)) + 1:]
        for s in self._taken - self._warned:
            at = tail.find(s)
            if at >= 0 and not self.credits[s]:
                self._warned.add(s)
                self.warn("ambiguous_marker", f"{s} came as text with no token id left for it after an earlier "
                          f"{s} took one (text lagging its ids?): which one the model typed cannot be told "
                          "without tokenizer=; the earlier was taken as the marker", offset + at, s)

    def unmatched(self, after_end: str, skip: frozenset[str], end: int) -> None:
        """At the end of the input: warn ``marker_without_text`` for each spelling (but ``skip``: the
        end-of-turn ones, which end the turn by id) whose ids came while its text never did, not even
        after the end of the turn (``after_end``): a relay stripped special tokens' text and passed their
        ids, so the text was read without those markers (the text on their two sides may be joined)."""
        for s, q in self.credits.items():
            if q and s not in skip and s not in self._seen and s not in after_end:
                at = next((o for o in q if o is not None), end)
                self.warn("marker_without_text", f"{len(q)} token id(s) of {s} came but never its text: special "
                          "tokens' text was stripped (serve with skip_special_tokens=False); the text was read "
                          "without that marker, so the text on its two sides may be joined", at, s)

    def _check_ambiguous(self, text: str, token_ids: Sequence[int], offset: int) -> None:
        if len(token_ids) < 2:
            return
        for s, q in self.credits.items():
            if q and text.count(s) > len(q):
                self.warn("ambiguous_marker", f"a chunk holds {s} {text.count(s)} times for {len(q)} token "
                          "id(s) of it: the first ones are taken as the markers (exact: the chunk's own ids and tokenizer=)",
                          offset, s)

    def real(self, spelling: str, offset: int) -> bool:
        """Whether the occurrence of ``spelling`` at ``offset`` is a marker (it takes a credit)."""
        q = self.credits.get(spelling)
        if q is None:  # a spelling with no id of its own: the text decides
            return True
        self._seen.add(spelling)
        while q:
            want = q[0]
            if want is None:
                q.popleft()
                self._taken.add(spelling)
                return True
            if want == offset:
                q.popleft()
                return True
            if want > offset:
                return False
            q.popleft()  # an aligned chunk's marker is always scanned: only a skipped text passes one
        return False
