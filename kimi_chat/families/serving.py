"""What a format family's ``serving`` module defines: :class:`ServingHooks`, the names the server stages ask of a
family (its reasoning and tool sections, its vocabulary, the vLLM and SGLang glue), and the types they are
written in (:data:`Decode`, :data:`PromptMode`).

It sits in the family contract, beside :class:`~kimi_chat.families.Family`, so a family's ``serving`` module
(:mod:`kimi_chat.families.k2.serving`, :mod:`kimi_chat.families.k3.serving`) names its types without importing
the servers; :mod:`kimi_chat.servers.hooks` re-exports them with :func:`~kimi_chat.servers.hooks.serving_of`,
which hands a family's module out as a :class:`ServingHooks`.

Hooks that reach into a server framework (``vllm_*``, ``sglang_*``) import it when called: the
family's module stays importable without vLLM or SGLang.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    import re

    from ..dialect_records import DialectRecord as Dialect
    from ..markers import Marker
    from ..output import MarkerLexer, StreamParser
    from ..output.peg import Machine

__all__ = ["Decode", "PromptMode", "ServingHooks"]

Decode = Callable[[Sequence[int]], str]
"""Token ids -> text, special tokens spelled (a server tokenizer's ``decode``)."""

PromptMode = Literal["none", "prefilled", "may_open"]
"""Where the output starts, after the prompt: ``none`` (no reasoning: everything is the body),
``prefilled`` (inside reasoning, the prompt opened it), ``may_open`` (the output may open reasoning)."""


class ServingHooks(Protocol):
    """The names a family's ``serving`` module defines (a module is the object: its constants and
    functions are the hooks)."""

    # -- which family a tokenizer speaks, what ends a turn --
    VOCABULARY: tuple[Marker, ...]
    """Special tokens only this family's vocabulary has at their ids (empty: none, the family is
    recognised by name only)."""
    END_OF_TURN: Marker
    """The marker that ends an assistant turn (a served model's ``eos_token_id``)."""
    MODEL_TYPES: tuple[str, ...]
    """``config.json`` ``model_type`` prefixes of the family's model directories (``kimi_k3``): how
    ``--tokenizer-mode kimi_chat`` knows a directory's family before its tokenizer is loaded (else by a
    tokenizer config holding :data:`VOCABULARY` at its ids; else the default dialect's family)."""
    SERVED_DIALECT: str | None
    """The dialect a model with the family's :data:`VOCABULARY` is served in (``kimi-k3``); ``None``: the
    dialect is identified from the model's chat template (:func:`kimi_chat.servers.vllm.tokenizer.model_dialect`)."""

    # -- the streaming stages --
    ALWAYS_REASONS: bool
    """Every model of the family reasons in a channel of its own (a body parser may always start after
    it); otherwise :func:`reasons` asks the tokenizer."""
    ANSWER_OPEN: str | None
    """What a prompt with thinking off pre-fills that the body parser must be fed to be where the output
    starts (``None``: nothing, the body starts plain)."""
    TOOL_SECTION: tuple[str, str]
    """The spellings that open and close the tool calls of a turn."""
    MARKER_PATTERN: re.Pattern[str]
    """Matches any of the family's markers in text."""

    def reasons(self, tokenizer: Any, dialect: Dialect | None) -> bool:
        """Whether the served model reasons: ``dialect`` (an override) says so, else ``tokenizer``."""
        ...

    def reasoning_stage(self, prefilled: bool, tokenizer: Any) -> tuple[bool, StreamParser, Machine, MarkerLexer | None]:
        """``(prefilled, parser, machine, lexer)`` of a reasoning stage: whether the output starts inside
        reasoning, the parser, the compiled grammar that says where reasoning ends, and the lexer for it
        (``None``: the machine's marker lexer)."""
        ...

    def body_parser(self, tools: Sequence[Any] | None, *, after_reasoning: bool, thinking: bool,
                    tokenizer: Any) -> tuple[StreamParser, str]:
        """``(parser, lead)`` of a body stage (calls streamed as written, ``include_invalid``): ``lead``
        is fed first and decides nothing (it puts the parser where the text handed over starts)."""
        ...

    # -- the prompt and the output, read by token ids --
    def prompt_mode(self, prompt_ids: Sequence[int] | None, thinking_off: bool, decode: Decode) -> PromptMode:
        """Where the output starts after the prompt ``prompt_ids`` (``None``: not known, then by
        ``thinking_off``, the request's switch); only the current assistant turn is read."""
        ...

    def reasoning_ended(self, ids: Sequence[int], decode: Decode) -> bool:
        """Whether reasoning is over at the end of ``ids`` (a prompt, or prompt + output)."""
        ...

    def reasoning_ends_in(self, ids: Sequence[int], delta: Sequence[int], decode: Decode) -> bool:
        """Whether reasoning ends within ``delta``, the last ids of ``ids`` (O(delta))."""
        ...

    def content_ids(self, ids: list[int], decode: Decode) -> list[int]:
        """The ids after reasoning (all of them if reasoning does not end in them)."""
        ...

    # -- vLLM --
    VLLM_STRUCTURAL_TAG_MODEL: str
    """vLLM's ``structural_tag_model`` for the tool parser (``required``/named tool choice)."""
    VLLM_KEEPS_ITS_CONSTRAINT: str | None
    """Why a forced tool choice keeps vLLM's own structural tag instead of kimi_chat's constraint
    (:mod:`kimi_chat.servers.vllm.structured`); ``None``: kimi_chat's constraint is installed."""
    TEXT_PART_LISTS: bool
    """A list of text parts as message content renders as given (vLLM's chat parser may be skipped)."""

    def vllm_thinking_kwargs(self, dialect: Dialect, kwargs: dict[str, Any]) -> None:
        """Map vLLM's ``enable_thinking`` / ``reasoning_effort`` onto the dialect's options, in place
        (``setdefault``: an explicit option wins), as vLLM's own renderer for the family maps them."""
        ...

    def vllm_conversation(self, conversation: list[Any]) -> list[Any]:
        """vLLM's parsed conversation as the family's renderer takes it (vLLM's normalisation)."""
        ...

    def vllm_request_options(self, tool_choice: Any, response_format: Any) -> dict[str, Any]:
        """Render options a request's ``tool_choice`` / ``response_format`` give (none: ``{}``)."""
        ...

    # -- SGLang --
    SGLANG_KEEPS_ITS_CONSTRAINT: str | None
    """Why a forced tool choice keeps SGLang's own constraint instead of kimi_chat's
    (:mod:`kimi_chat.servers.sglang.constraint`); ``None``: kimi_chat's constraint is installed."""
    SGLANG_STRUCTURAL_TAG_NAME: str | None
    """xgrammar's built-in structural tag for the format (``None``: none, see
    :func:`sglang_structural_tag`)."""

    def sglang_think_end_ids(self, tokenizer: Any) -> list[int] | None:
        """The token ids that end reasoning, as SGLang's reasoning gate (``ReasonerGrammarBackend``, which
        matches a sequence) and reasoning-token count take them from the reasoning detector's
        ``get_think_end_token_ids`` (``None``: SGLang's own, ``</think>`` encoded)."""
        ...

    def sglang_call_structure(self) -> Callable[[str], tuple[str, str, str]]:
        """Tool name -> ``(begin, end, trigger)`` of one forced call (SGLang's ``StructureInfo``);
        ``NotImplementedError`` where the family has its own structural tag only."""
        ...

    def sglang_structural_tag(self, tools: Any, tool_choice: Any, thinking_mode: bool,
                              parallel_tool_calls: bool) -> Any | None:
        """The structural tag of a tool choice (``None``: the detector's default)."""
        ...

    def sglang_auto_structural_tag(self, tools: Any, thinking_mode: bool, parallel_tool_calls: bool) -> Any | None:
        """The structural tag of ``tool_choice="auto"`` (``None``: the detector's default)."""
        ...
