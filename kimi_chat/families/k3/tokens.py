"""Token-level rendering for the Kimi-K3 family: :func:`kimi_chat.tokens.rendered.render_tokens` and
:func:`kimi_chat.tokens.rendered.extend_tokens` with ``dialect="kimi-k3"`` land here.

The official K3 tokenizer encodes the prompt **segment by segment** (``encoding_k3.build_chat_segments``):
each marker (``<|open|>``, ``<|close|>``, ``<|sep|>``, ``<|end_of_msg|>``, image prompts) with special
tokens allowed, every other segment as ordinary text. :mod:`kimi_chat.families.k3.render` writes exactly those
segments, so the ids are its segment-wise encoding (``== render_k3_ids == apply_chat_template(
tokenize=True)``) and every token belongs to one segment: BPE never merges across segments, so the
attribution (``message_index``, ``spans``, ``assistant_mask`` from the segments' ``trainable`` flags)
is a per-segment token count, with no straddling token.

**Special-token policy** for K3 (``special_tokens=``), for special-token text (``<|open|>``,
``<|end_of_msg|>``, ``[EOS]``, ``<|reserved_token_163700|>``...) typed in a text segment (content,
names, tool names, arguments, tools, the response schema):

* ``"text"`` (default): ordinary text, as the official K3 tokenizer itself encodes it (its text
  segments disallow special tokens). The ids equal the oracle's.
* ``"strict"``: :class:`~kimi_chat.errors.RenderError` naming the message index and field (``tools``,
  ``response_schema``... for text of no message) when such text is in a text segment. Use it to
  refuse input that a server encoding the prompt *text* with special tokens allowed (a Jinja port
  such as llama.cpp's) would turn into markers.
* ``"special"``: each text segment encoded with special tokens allowed, so typed special-token text
  becomes the special id (segment by segment: what such a server's ids would be if it kept the official
  segmentation). Not what the official K3 tokenizer does; for reproducing or testing such servers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ... import markers as M
from ...dialects import Dialect
from ...errors import RenderError
from ...messages import to_plain
from ...prompt import _k3_call
from .render import _build_split, _ids, _Marker
from ...tokens.tokenizer import KimiTokenizer

if TYPE_CHECKING:  # pragma: no cover
    from ...tokens.rendered import RenderedTokens, SpecialTokensPolicy

__all__ = ["render_tokens_k3", "extend_tokens_k3", "check_vocabulary", "vocabulary_problem"]

_K3_NAMES = tuple(m.text for m in (M.K3_OPEN, M.K3_CLOSE, M.K3_SEP, M.K3_END_OF_MSG))
_K2_NAMES = tuple(m.text for m in (M.IM_END, M.IM_USER, M.IM_ASSISTANT, M.IM_SYSTEM, M.IM_MIDDLE))


def vocabulary_problem(tokenizer: KimiTokenizer, d: Dialect) -> str | None:
    """Why ``tokenizer`` cannot encode ``d``'s prompts (its special tokens are not those of ``d``'s family:
    a K2 tokenizer for a K3 dialect, a K3 tokenizer for a K2 one), naming the missing special token; ``None``
    when it can. (The one check behind :func:`check_vocabulary` and the CLI's tokenizer flags.)"""
    names = _K3_NAMES if d.family == "k3" else _K2_NAMES
    specials = tokenizer.special_tokens
    missing = [n for n in names if n not in specials]
    if not missing:
        return None
    other = "a Kimi-K3" if d.family != "k3" else "a Kimi-K2"
    return (f"the tokenizer has no special token {missing[0]} that dialect {d.name} ({d.family} family) writes "
            f"(is it {other} tokenizer?)")


def check_vocabulary(tokenizer: KimiTokenizer, d: Dialect) -> None:
    """Refuse a tokenizer whose special tokens are not those of ``d``'s family
    (:func:`vocabulary_problem`): :class:`~kimi_chat.errors.RenderError` (a ``ValueError``)."""
    problem = vocabulary_problem(tokenizer, d)
    if problem is not None:
        ref = "k3" if d.family == "k3" else "k2"
        raise RenderError(f"{problem}; use KimiTokenizer.from_reference({ref!r}) or that model's tokenizer")


def _typed(info: Any, parts: list[str], marks: list[tuple[int, int, bool]]) -> tuple[int, str] | None:
    """``(message_index, name)`` of the first special-token name inside a text segment, or None."""
    texts = [p for p in parts if type(p) is not _Marker]
    if info.first("\n".join(texts)) is None:  # a name holds no whitespace: a C-speed check first
        return None
    bounds = [*marks, (len(parts), -1, False)]
    for (a, idx, _), (b, _, _) in zip(bounds, bounds[1:]):
        for p in parts[a:b]:
            if type(p) is not _Marker:
                name = info.first(p)
                if name is not None:
                    return idx, name
    return None  # pragma: no cover - the joined check only finds names inside a segment


def _raise_strict(
    at: tuple[int, str], messages: Sequence[Any], tools: Any, options: Mapping[str, Any]
) -> None:
    from ...tokens.rendered import _walk

    owner, name = at
    why = (
        f"contains the special-token text {name!r}; special_tokens='strict' refuses it "
        "(the default 'text' encodes it as ordinary text, as the official K3 tokenizer does)"
    )
    if owner >= 0:
        path = next((p for p, s in _walk(to_plain(messages[owner]), "") if name in s), None)
        raise RenderError(why, message_index=owner, field=path or None)
    sources = [("tools", tools), *((k, v) for k, v in options.items() if k != "image_prompts")]
    for root, value in sources:
        path = next((p for p, s in _walk(to_plain(value), root) if name in s), None)
        if path is not None:
            raise RenderError(f"{path} {why}")
    raise RenderError(f"the prompt {why}")


def render_tokens_k3(
    messages: Sequence[Any],
    tokenizer: KimiTokenizer,
    tools: Sequence[Any] | None,
    d: Dialect,
    add_generation_prompt: bool | None,
    continue_final_message: bool,
    policy: "SpecialTokensPolicy",
    options: dict[str, Any],
    *,
    strict: bool = False,
) -> "RenderedTokens":
    """:func:`kimi_chat.tokens.rendered.render_tokens` for a K3-family dialect (see the module docstring)."""
    from ...surrogates import warn_lone_surrogates
    from ...tokens.rendered import RenderedTokens, _info

    call = _k3_call(d, add_generation_prompt, continue_final_message, options, messages, strict, tools)
    if call is None:
        raise ValueError(f"{d.name} is not a Kimi-K3 dialect")
    check_vocabulary(tokenizer, d)
    marks: list[tuple[int, int, bool]] = []
    parts = _build_split(messages, tools, call, marks)  # type: ignore[arg-type]
    if not marks or marks[0][0] != 0:
        marks.insert(0, (0, -1, False))
    if policy == "strict":
        typed = _typed(_info(tokenizer), parts, marks)
        if typed is not None:
            _raise_strict(typed, messages, tools, options)
    warn_lone_surrogates(parts, marks, messages, tools, options, stacklevel=3)
    cuts = [m[0] for m in marks[1:]] + [len(parts)]
    ids, ends = _ids(parts, tokenizer, cuts, policy == "special")
    counts = [e - s for s, e in zip([0, *ends], ends)]
    idxs = [m[1] for m in marks]
    trains = [m[2] for m in marks]
    text = "".join(parts)
    return RenderedTokens(
        ids, (idxs, trains, counts), None, text, tokenizer, list(messages), tools, d,
        call["add_generation_prompt"], dict(options), policy, False, False,
    )


def extend_tokens_k3(
    previous: "RenderedTokens",
    completion_ids: Sequence[int],
    new_messages: Sequence[Any],
    tools: Sequence[Any] | None,
    add_generation_prompt: bool,
    options: dict[str, Any],
) -> "RenderedTokens | None":
    """:func:`kimi_chat.tokens.rendered.extend_tokens` for a K3-family dialect: the full render of the extended
    conversation when it starts with ``previous.ids + completion_ids``, else None (trailing
    ``tool-choice`` / ``response-format`` messages, changed options or tools, a completion not
    tokenized as the official encoder tokenizes the assistant message...)."""
    full = render_tokens_k3(
        [*previous.messages, *new_messages], previous.tokenizer, tools, previous._dialect, add_generation_prompt,
        False, previous.special_tokens, options,
    )
    n = len(previous.ids)
    completion_ids = list(completion_ids)
    if full.ids[:n] != previous.ids or full.ids[n : n + len(completion_ids)] != completion_ids:
        return None
    return full
