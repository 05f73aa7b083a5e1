"""Constrained generation in the native engines: a llguidance matcher's token masks applied to the logits.

:class:`TokenMask` is a llama-cpp-python logits processor (``Llama.generate(logits_processor=[mask])``;
ik_llama.cpp's loop in :mod:`kimi_chat.engines.ik` calls it the same way). At each step it feeds the
matcher the ids sampled since the previous step, asks it for the set of ids that may come next, and sets
every other logit to ``-inf``; the end-of-turn ids of the dialect are allowed exactly when the matcher
accepts (the output so far is a complete assistant turn). The matcher works on token ids, so a marker
the model would spell with ordinary tokens (``<|`` ``tool`` ...) never satisfies a marker of the
grammar: only the marker's special id does.

:func:`request_constraint` builds the constraint of a request (:func:`kimi_chat.grammar.constraint`:
the Kimi format of the dialect, the JSON schemas compiled by llguidance) and :func:`mask_for` the
processor over a model's tokenizer. After generation :func:`check_arguments` validates the calls of a
constraint that is not exact (``Constraint.exact`` False: some schema keyword is enforced only
afterwards) with ``jsonschema``.

Needs ``llguidance`` and ``numpy`` (extra ``native``); ``jsonschema`` for the post-validation.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from typing import Any

from ..dialect_records import DialectRecord as Dialect
from ..errors import KimiChatError
from ..output.format import format_for

__all__ = ["TokenMask", "ConstraintViolation", "request_constraint", "mask_for", "check_arguments"]


class ConstraintViolation(KimiChatError):
    """The engine produced a token the constraint does not allow (a bug of the engine loop or of the
    matcher: the mask should have made it impossible)."""


class TokenMask:
    """A logits processor masking every id ``matcher`` (an ``llguidance.LLMatcher``) refuses.

    ``n_vocab``: the size of the matcher's vocabulary (its tokenizer's; the engine's logits may be
    fewer); ``prompt_len``: the number of prompt ids at the start of the ``input_ids`` the engine passes (the
    ids after them are the generated ones, fed to the matcher); ``end_ids``: the end-of-turn ids,
    allowed whenever the matcher accepts. ``step_seconds`` holds the time each call took (feeding
    the matcher, computing and applying the mask)."""

    def __init__(self, matcher: Any, *, n_vocab: int, prompt_len: int, end_ids: Iterable[int] = ()) -> None:
        import numpy as np

        self._np = np
        self.matcher = matcher
        self._pos = prompt_len
        self._end_ids = sorted(set(end_ids))
        self._bitmask = np.full(((n_vocab + 31) // 32,), -1, dtype=np.int32)
        self._ended = False
        self.step_seconds: list[float] = []

    def _check(self) -> None:
        if self.matcher.is_error():
            raise ConstraintViolation(f"the constraint's matcher failed: {self.matcher.get_error()}")

    def feed(self, ids: Sequence[int]) -> None:
        """Advance the matcher over generated ``ids``; an end-of-turn id ends the turn (it is not fed:
        the engine stops there)."""
        for tid in ids:
            tid = int(tid)
            if self._ended:
                raise ConstraintViolation(f"token {tid} generated after the end of the turn")
            if tid in self._end_ids and self.matcher.is_accepting():
                self._ended = True
                continue
            if not self.matcher.consume_token(tid):
                raise ConstraintViolation(f"token {tid} is not allowed by the constraint: "
                                          f"{self.matcher.get_error()}")

    def allowed(self) -> Any:
        """The ids that may come next, as a boolean numpy array over the matcher's vocabulary."""
        np = self._np
        self._check()
        self.matcher.unsafe_compute_mask_ptr(self._bitmask.ctypes.data, self._bitmask.nbytes)
        self._check()
        ok = np.unpackbits(self._bitmask.view(np.uint8), bitorder="little").view(np.bool_)
        if self._end_ids and self.matcher.is_accepting():
            ok[self._end_ids] = True
        return ok

    def __call__(self, input_ids: Sequence[int], scores: Any) -> Any:
        """llama-cpp-python's ``LogitsProcessor``: ``input_ids`` are the prompt and the ids generated so
        far, ``scores`` the next id's logits (changed in place and returned)."""
        t0 = time.perf_counter()
        self.feed(input_ids[self._pos:])
        self._pos = len(input_ids)
        ok = self.allowed()
        n = len(scores)
        scores[~ok[:n]] = -self._np.inf
        self.step_seconds.append(time.perf_counter() - t0)
        return scores

    @property
    def accepting(self) -> bool:
        """Whether the ids fed so far are a complete output under the constraint."""
        return self._ended or bool(self.matcher.is_accepting())


def request_constraint(tools: Sequence[Any] | None, *, dialect: Dialect, tool_choice: Any = None,
                       parallel_tool_calls: bool = True, **options: Any) -> Any:
    """The :class:`~kimi_chat.grammar.Constraint` of one request (``tool_choice`` ``None``: ``auto``)."""
    from ..grammar import constraint

    return constraint(tools, dialect=dialect, tool_choice="auto" if tool_choice is None else tool_choice,
                      parallel_tool_calls=parallel_tool_calls, **options)


def mask_for(constraint: Any, tokenizer: Any, *, dialect: Dialect, prompt_len: int) -> TokenMask:
    """The :class:`TokenMask` of ``constraint`` over ``tokenizer`` (a KimiTokenizer) for a prompt of
    ``prompt_len`` ids, the dialect's end-of-turn ids allowed where the constraint accepts."""
    return TokenMask(constraint.matcher(tokenizer), n_vocab=tokenizer.vocab_size, prompt_len=prompt_len,
                     end_ids=format_for(dialect).end_of_turn_ids)


def check_arguments(constraint: Any, parsed: Any) -> Any:
    """``parsed`` (a :class:`~kimi_chat.output.ParsedMessage`) with each call's arguments validated
    against its tool's schema (``Constraint.validate``) when the constraint is not exact; unchanged
    when it is."""
    return parsed if constraint.exact else constraint.validate(parsed)
