"""What :class:`~kimi_chat.engines.native.NativeModel` does with a whole chat request: render, generate under a
grammar, parse (:func:`chat_stream`, its :class:`ChatResult`), and llama.cpp's own chat formatting of a GGUF's template
(:func:`apply_builtin_template`, :func:`render_embedded`). The methods of ``NativeModel`` of the same
names are the public API; they call these."""

from __future__ import annotations

import ctypes
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..dialect_records import DialectRecord as Dialect, get_dialect
from ..errors import KimiChatError
from ..output.format import format_for
from ..output import Delta, ParsedMessage, StreamParser

if TYPE_CHECKING:
    from ..tokens.tokenizer import KimiTokenizer

__all__ = ["ChatResult", "chat_stream", "apply_builtin_template", "render_embedded"]


class LoadedModel(Protocol):
    """What the chat helpers here and :mod:`kimi_chat.engines.conformance` use of a loaded model: the surface of
    :class:`kimi_chat.engines.native.NativeModel` (which imports these helpers, so they name this protocol, not it)."""

    path: Path
    backend: str
    dialect: Dialect
    dialect_source: str
    n_vocab: int
    _lib: Any
    """The llama.cpp bindings the model was loaded with (``llama_cpp``)."""
    @property
    def generate(self) -> Callable[..., Iterator[int]]:
        """``(ids, *, max_tokens, grammar, seed, temperature, ...) -> generated ids`` (:meth:`NativeModel.generate`)."""

    @property
    def embedded_chat_template(self) -> str | None: ...
    def is_eog(self, token_id: int) -> bool: ...
    def eog_ids(self) -> list[int]: ...
    def token_text(self, token_id: int) -> str: ...
    def token_attr(self, token_id: int) -> int: ...
    def tokenize(self, text: str, special: bool = True) -> list[int]: ...
    def piece(self, token_id: int, special: bool = True) -> bytes: ...
    def detokenize(self, ids: Iterable[int], special: bool = True) -> str: ...
    def tokenizer(self) -> KimiTokenizer: ...
    def prompt_ids(self, messages: Sequence[Any], *, tools: Sequence[Any] | None = None,
                   dialect: str | Dialect | None = None, **options: Any) -> list[int]: ...
    def chat(self, messages: Sequence[Any], **kwargs: Any) -> ChatResult: ...
    def apply_builtin_template(self, messages: Sequence[Mapping[str, Any]], *, add_generation_prompt: bool = True,
                               template: str | None = None) -> str: ...


@dataclass
class ChatResult:
    """What :meth:`NativeModel.chat` produced."""

    message: dict[str, Any]
    """OpenAI ``ChatCompletionMessage``-shaped (role, content, reasoning_content?, tool_calls?)."""
    finish_reason: str
    """``stop``, ``tool_calls`` or ``length`` (``max_tokens`` reached before the turn ended)."""
    parsed: ParsedMessage
    prompt_ids: list[int]
    completion_ids: list[int]
    text: str
    """The generated text, special tokens spelled out."""
    grammar: str | None = None
    """The grammar of the generation: the constraint's llguidance Lark, or the ``grammar=`` GBNF text."""
    constraint: Any = None
    """The :class:`~kimi_chat.grammar.Constraint` generation ran under (``None``: unconstrained or GBNF)."""
    mask: Any = None
    """The :class:`~kimi_chat.engines.constrain.TokenMask` that applied it (``step_seconds``: its cost)."""
    model: str = ""
    created: int = field(default_factory=lambda: int(time.time()))

    @property
    def usage(self) -> dict[str, int]:
        return {
            "prompt_tokens": len(self.prompt_ids),
            "completion_tokens": len(self.completion_ids),
            "total_tokens": len(self.prompt_ids) + len(self.completion_ids),
        }

    def to_openai(self, id: str | None = None) -> dict[str, Any]:
        """An OpenAI ``chat.completion`` object."""
        return {
            "id": id or f"chatcmpl-kimi-{self.created}",
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [{"index": 0, "message": self.message, "finish_reason": self.finish_reason,
                         "logprobs": None}],
            "usage": self.usage,
        }


def chat_stream(
    model: LoadedModel,
    messages: Sequence[Any],
    *,
    tools: Sequence[Any] | None = None,
    dialect: str | Dialect | None = None,
    tool_choice: Any = None,
    parallel_tool_calls: bool = True,
    grammar: bool | str | None = None,
    max_tokens: int = 256,
    temperature: float = 0.8,
    seed: int | None = None,
    reasoning: bool = True,
    **options: Any,
) -> "Iterator[Delta | ChatResult]":
    """:meth:`NativeModel.chat_stream <kimi_chat.engines.native.NativeModel.chat_stream>` of ``model``."""
    d = model.dialect if dialect is None else get_dialect(dialect)
    render_options = dict(options)
    if tool_choice is not None and "tool_choice" in d.options:
        render_options.setdefault("tool_choice", tool_choice)  # a prompt that says the choice (K3's encoder)
    prompt = model.prompt_ids(messages, tools=tools, dialect=d, **render_options)
    gbnf: str | None = None
    constraint = mask = None
    if isinstance(grammar, str):
        gbnf = grammar  # the user's own GBNF, applied by the engine's grammar sampler
    elif grammar is not False and (grammar is not None or tools or options.get("response_format")):
        from .constrain import mask_for, request_constraint

        constraint = request_constraint(tools, dialect=d, tool_choice=tool_choice,
                                        parallel_tool_calls=parallel_tool_calls, reasoning=reasoning, **options)
        mask = mask_for(constraint, model.tokenizer(), dialect=d, prompt_len=len(prompt))
    # each token's bytes go to the parser with its id: a marker spelled by ordinary tokens (the model
    # writing "Type <|im_end|> to stop." as text) stays text; only the special id is the marker
    parser = StreamParser(d, tools=tools, tokenizer=model.piece, **options)
    end_of_turn = format_for(d).end_of_turn_ids
    out: list[int] = []
    pieces: list[bytes] = []
    ended = False
    masked = {} if mask is None else {"mask": mask}
    for tid in model.generate(prompt, max_tokens=max_tokens, grammar=gbnf, seed=seed, temperature=temperature,
                              **masked):
        out.append(tid)
        if model.is_eog(tid):
            ended = True
            if tid in end_of_turn:  # <|im_end|>, [EOS] (K3: <|end_of_msg|>): the parser sees the end of the turn
                b = model.piece(tid)
                pieces.append(b)
                yield from parser.feed(b, (tid,))
            break
        b = model.piece(tid)
        pieces.append(b)
        yield from parser.feed(b, (tid,))
    yield from parser.finish()
    parsed = parser.message
    if constraint is not None:  # a schema the constraint enforces only in part: its calls validated here
        from .constrain import check_arguments

        parsed = check_arguments(constraint, parsed)
    if ended:
        finish = parsed.finish_reason() or "stop"  # "stop" when every call was left out as invalid
    else:
        finish = "length"
    yield ChatResult(
        message=parsed.to_openai(),
        finish_reason=finish,
        parsed=parsed,
        prompt_ids=prompt,
        completion_ids=out,
        text=b"".join(pieces).decode("utf-8", errors="replace"),
        grammar=gbnf if constraint is None else constraint.lark,
        constraint=constraint,
        mask=mask,
        model=model.path.name,
    )


def apply_builtin_template(model: LoadedModel, messages: Sequence[Mapping[str, Any]], *,
                           add_generation_prompt: bool = True, template: str | None = None) -> str:
    """:meth:`NativeModel.apply_builtin_template <kimi_chat.engines.native.NativeModel.apply_builtin_template>`."""
    lib = model._lib
    tmpl = template if template is not None else model.embedded_chat_template
    if tmpl is None:
        raise KimiChatError(f"{model.path}: the GGUF has no chat template")
    arr = (lib.llama_chat_message * len(messages))()
    keep = []
    for i, m in enumerate(messages):
        role, content = str(m["role"]).encode(), str(m.get("content") or "").encode()
        keep += [role, content]
        arr[i].role = role
        arr[i].content = content
    size = 4096 + sum(len(k) for k in keep) * 2
    buf = ctypes.create_string_buffer(size)
    n = lib.llama_chat_apply_template(tmpl.encode(), arr, len(messages), add_generation_prompt, buf, size)
    if n < 0:
        raise KimiChatError("llama.cpp does not recognise the chat template")
    if n > size:
        buf = ctypes.create_string_buffer(n)
        n = lib.llama_chat_apply_template(tmpl.encode(), arr, len(messages), add_generation_prompt, buf, n)
    return buf.raw[:n].decode("utf-8")


def render_embedded(model: LoadedModel, messages: Sequence[Any], *, tools: Sequence[Any] | None = None,
                    add_generation_prompt: bool = True, **kwargs: Any) -> str:
    """:meth:`NativeModel.render_embedded <kimi_chat.engines.native.NativeModel.render_embedded>`."""
    from llama_cpp.llama_chat_format import Jinja2ChatFormatter

    tmpl = model.embedded_chat_template
    if tmpl is None:
        raise KimiChatError(f"{model.path}: the GGUF has no chat template")
    tok = model.tokenizer()
    eos = tok.id_to_token(tok.eos_id) if tok.eos_id is not None else ""
    bos = tok.id_to_token(tok.bos_id) if tok.bos_id is not None else ""
    fmt = Jinja2ChatFormatter(tmpl, eos_token=eos, bos_token=bos, add_generation_prompt=add_generation_prompt)
    return fmt(messages=list(messages), tools=tools, **kwargs).prompt
