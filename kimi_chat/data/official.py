"""``reasoning="official"``: one official rendering of a conversation (no generation prompt) as its sample, every
assistant turn as the template writes it there (reasoning dropped where it drops it), and the count of what it
drops (:func:`kimi_chat.data.conversation_samples` warns with it)."""

from __future__ import annotations

from collections.abc import Mapping
from itertools import compress
from typing import Any

from ..dialect_records import DialectRecord as Dialect
from ..tokens.rendered import render_tokens
from ..tokens.tokenizer import KimiTokenizer
from .sample import IGNORE_INDEX, Sample

__all__ = ["official_samples"]


def official_samples(msgs: list[Any], tools: Any, d: Dialect, tok: KimiTokenizer, opts: Mapping[str, Any],
                     special_tokens: str, turns: list[int],
                     carried: Mapping[int, list[str]]) -> tuple[list[Sample], int]:
    """One official rendering of the conversation up to its last trained turn, no generation prompt, as one
    sample; and how many assistant messages' reasoning it drops (``carried``: the reasoning texts per message): a
    message's reasoning is kept where the trainable ids of one run of its tokens (the last with any) hold it."""
    if not turns:
        return [], 0
    # no warning: the dropped reasoning is counted here, the open last turn is lint's finding
    r = render_tokens(msgs[: turns[-1] + 1], tokenizer=tok, tools=tools, dialect=d, add_generation_prompt=False,
                      special_tokens=special_tokens, warn=False, **opts)  # type: ignore[arg-type]
    trained = set(turns)
    ids = r.ids
    labels = [IGNORE_INDEX] * len(ids)
    runs: dict[int, tuple[int, int]] = {}
    kept: dict[int, list[int]] = {}
    idxs, trains, counts = r._pieces
    if trains is None:  # a token across pieces: by the mask, span by span
        mask = r.assistant_mask
        for j, a, b in r.spans:
            m = mask[a:b]
            if j < 0 or 1 not in m:
                continue
            if j in trained:
                runs[j] = (a + m.index(1), b - m[::-1].index(1))
                labels[a:b] = [x if k else IGNORE_INDEX for x, k in zip(ids[a:b], m)]
            if j in carried:
                kept[j] = list(compress(ids[a:b], m))
    else:  # by the pieces: a run of one message's pieces is a span, a trainable piece's ids its trained ids
        cur, first, last, own = -1, -1, -1, []  # the run's message, trainable start and end, trainable ids
        pos = 0
        for j, train, c in (*zip(idxs, trains, counts), (-2, False, 1)):  # a sentinel closes the last run
            if not c:
                continue
            if j != cur:
                if first >= 0 and cur >= 0:
                    if cur in trained:
                        runs[cur] = (first, last)
                    if cur in carried:
                        kept[cur] = own
                cur, first, last, own = j, -1, -1, []
            if train:
                if first < 0:
                    first = pos
                last = pos + c
                if j in trained:
                    labels[pos:last] = ids[pos:last]
                if j in carried:
                    own += ids[pos:last]
            pos += c
    decode = tok.encoding.decode
    dropped = sum(1 for j, c in carried.items() if j <= turns[-1] and not any(x in decode(kept.get(j, [])) for x in c))
    return [Sample(list(ids), labels, list(turns), [runs.get(i, (0, 0)) for i in turns])], dropped
