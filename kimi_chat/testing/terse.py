"""The terse tiny model (``build_tiny_model(..., terse=True)``, ``kimi-chat tiny-model --terse``): the same
random model with a bias built into its weights so that its turns end: replies are short and constrained
calls complete, so finish-dependent checks (``finish_reason`` ``stop`` / ``tool_calls``, a forced call's
arguments, a JSON reply) run on a CPU in seconds.

The bias is a bigram table hidden in three control dimensions of the residual stream, which no layer writes
(their rows of every output projection are zero):

* dimension ``A`` is a large constant in every token's embedding, so after the final norm it dominates
  the hidden state whatever the layers add; dimension ``B`` is set on the tokens after which a reply's
  text starts (K2 ``<|im_middle|>`` and ``</think>``, K3 ``<|sep|>``); dimension ``T`` on K2's ``<think>``;
* the output rows read them: after ordinary text the end-of-turn marker is first (K2 ``<|im_end|>``, K3
  ``<|end_of_msg|>``), then the structure-closing markers (K2 ``<|tool_call_end|>``,
  ``<|tool_calls_section_end|>``, ``<|tool_calls_section_begin|>`` (it ends the text before the calls),
  ``</think>``; K3 ``<|close|>``), then the JSON closers (every token made of ``"``, ``}`` and ``]``
  only; those that start with ``"``, which end a string, first), then the value separators (those
  tokens with a ``,``: a number ends as soon as it can), then everything else; tokens of
  whitespace alone come last (no layout in a terse reply). After a
  text-start token the word ``OK`` is first; after ``<think>``, ``</think>``.

So an unconstrained reply is ``OK`` and the end of the turn (K2.5/K2.6 with thinking: an empty think block
first; K3 with thinking on: ``OK`` as the reasoning), and under a grammar that masks the end of the turn
(a forced call, a JSON schema) each string closes at once and each structure as soon as the grammar lets
it. The margins (tens of logits over every other token) make the choice the same at any temperature up
to about 1 in practice, and exactly the same greedily.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from .. import markers as M
from ..dialect_records import DialectRecord as Dialect
from ..tokens.tokenizer import KimiTokenizer

__all__ = ["terse_shaping", "TERSE_WORD", "CONTROL_DIMS"]

TERSE_WORD = "OK"
"""The text a terse reply writes (one token of the Kimi vocabulary)."""

CONTROL_DIMS = 3
"""Hidden dimensions ``0`` (``A``), ``1`` (``B``) and ``2`` (``T``): the control dimensions."""

_A, _B, _T = 0, 1, 2
_EMBED = 1000.0  # the control value in the embeddings (F16 holds it); the layers' outputs are O(10)
# output weights (A, B, T) per class; after the final norm a token with one control dimension has 8 there
# (sqrt(hidden)), one with two 5.66 in each: the logits are these times 8 (text) or 5.66 (text start)
_END = (6.0, -12.0, -12.0)       # text: 48; text start / think: -34
_MARKER = (5.0, 0.0, 0.0)        # text: 40; text start: 28
_STRING_CLOSER = (4.5, 0.0, 0.0)  # text: 36 (a JSON closer that starts with '"': it ends a string)
_JSON_CLOSER = (4.0, 0.0, 0.0)   # text: 32; text start: 23
_SEPARATOR = (3.5, 0.0, 0.0)     # text: 28 (a token of closers with a ',': it ends a value, e.g. a number)
_SPACE = (-4.0, -4.0, 0.0)       # text: -32; text start: -45
_WORD = (0.0, 12.0, 0.0)         # text start: 68
_THINK_END = (5.0, 0.0, 15.0)    # text: 40; think: 113 (a structure-closing marker too)


def _base_ids(tok: KimiTokenizer, keep: Callable[[bytes], bool]) -> list[int]:
    return [i for b, i in tok.mergeable_ranks.items() if b and keep(b)]


def _classes(tok: KimiTokenizer, d: Dialect) -> dict[str, Any]:
    """Token ids of each class (see the module doc) for ``d``'s family, told by the tokenizer's specials."""
    specials = tok.special_tokens
    k3 = M.K3_OPEN.text in specials and M.K3_SEP.text in specials

    def ids(*markers: M.Marker) -> list[int]:  # by id: the July-2025 K2 config names some of them reserved
        return [m.id for m in markers if m.id is not None]

    word = tok.encode(TERSE_WORD, allow_special=False)
    if len(word) != 1:  # pragma: no cover - a fact of the Kimi vocabulary
        raise ValueError(f"{TERSE_WORD!r} is not one token of this vocabulary")
    if k3:
        end, markers, starts, thinks, think_end = ids(M.K3_END_OF_MSG), ids(M.K3_CLOSE), ids(M.K3_SEP), [], []
    else:
        end = ids(M.IM_END) + ([tok.eos_id] if tok.eos_id is not None else [])
        markers = ids(M.TOOL_CALL_END, M.TOOL_CALLS_SECTION_END, M.TOOL_CALLS_SECTION_BEGIN)
        starts, thinks, think_end = ids(M.IM_MIDDLE, M.THINK_END), ids(M.THINK_BEGIN), ids(M.THINK_END)
    return {
        "end": sorted(set(end)), "markers": markers, "starts": starts, "thinks": thinks, "think_end": think_end,
        "word": word, "json": _base_ids(tok, lambda b: set(b) <= set(b'"}]')),
        "string": _base_ids(tok, lambda b: set(b) <= set(b'"}]') and b[:1] == b'"'),
        "separator": _base_ids(tok, lambda b: set(b) <= set(b',"}]') and b"," in b),
        "space": _base_ids(tok, lambda b: b.isspace()),
    }


def _rows(out: Any, rows: Iterable[int], weights: tuple[float, float, float]) -> None:
    for i in rows:
        if i < out.shape[0]:
            out[i, :CONTROL_DIMS] = weights


def terse_shaping(tok: KimiTokenizer, d: Dialect) -> Callable[[str, Any], Any]:
    """A function ``(tensor name, array) -> array`` that gives the tiny model's tensors the terse bias
    (the module doc): the embeddings and output matrix get the control dimensions, every projection that
    writes the residual stream (attention output, FFN / expert / shared-expert down) loses its rows there."""
    c = _classes(tok, d)

    def shape(name: str, a: Any) -> Any:
        if name == "token_embd.weight":
            a[:, :CONTROL_DIMS] = 0
            a[:, _A] = _EMBED
            a[[i for i in c["starts"] if i < a.shape[0]], _B] = _EMBED
            a[[i for i in c["thinks"] if i < a.shape[0]], _T] = _EMBED
        elif name == "output.weight":
            a[:, :CONTROL_DIMS] = 0
            _rows(a, c["space"], _SPACE)
            _rows(a, c["separator"], _SEPARATOR)
            _rows(a, c["json"], _JSON_CLOSER)
            _rows(a, c["string"], _STRING_CLOSER)
            _rows(a, c["markers"], _MARKER)
            _rows(a, c["think_end"], _THINK_END)
            _rows(a, c["word"], _WORD)
            _rows(a, c["end"], _END)
        elif name.endswith(("attn_output.weight", "ffn_down.weight", "ffn_down_shexp.weight")):
            a[:CONTROL_DIMS, :] = 0
        elif name.endswith("ffn_down_exps.weight"):
            a[:, :CONTROL_DIMS, :] = 0
        return a

    return shape
