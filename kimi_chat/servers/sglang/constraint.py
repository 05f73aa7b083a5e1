"""``tool_choice: "required"``, named functions and ``response_format`` in SGLang: kimi_chat's constraint,
as the request's EBNF for SGLang's llguidance grammar backend.

SGLang (0.5.23) asks ``FunctionCallParser.get_structure_constraint`` for a forced tool choice's
constraint; for a detector with a structural tag that is an xgrammar structural tag of Kimi's format
(K2: xgrammar's built-in ``kimi``; K3: SGLang's ``kimik3_structural_tag``), whose arguments are xgrammar's
JSON-schema translation. :func:`install` wraps that method (SGLang builds ``FunctionCallParser`` itself,
so there is no subclass to hand it): for kimi_chat's detector it returns ``("ebnf", LARK)``, the Lark of
:func:`kimi_chat.grammar.constraint` (:mod:`kimi_chat.servers.forced`: the Kimi format the parser runs,
markers as special tokens, the tools' schemas compiled by llguidance). ``to_sampling_params`` puts it in
the sampling params' ``ebnf``; SGLang's llguidance backend (``GuidanceBackend.dispatch_ebnf``:
``llguidance.grammar_from("ebnf", …)``, which takes a grammar opening with ``start:`` as Lark) compiles it.
Any other detector gets SGLang's own answer.

SGLang asks for it without the request; :func:`install_request` wraps
``ChatCompletionRequest.to_sampling_params``, which has the request: the constraint (a :class:`ForcedLark`)
is rebuilt there for a request that switches thinking off, and ``response_format`` ``json_object`` /
``json_schema`` (which SGLang turns into the sampling params' ``json_schema`` there, where the tool parser
has no say) becomes kimi_chat's constraint of the turn (:func:`kimi_response_format`: the reply in K3's
response channel / K2's content, the request's tools and ``tool_choice``), where the server's tool-call
parser is kimi_chat's. The Responses API's request (``ResponsesRequest``) is not wrapped.

When it applies (otherwise SGLang's own constraint, the reason logged once at INFO):

* ``tool_choice`` is ``"required"`` or a named function and the request declares tools, or SGLang
  constrains a ``response_format`` (and no client ``ebnf`` / ``regex`` / ``structural_tag``);
* the family's serving hooks do not keep SGLang's constraint (``SGLANG_KEEPS_ITS_CONSTRAINT``);
* the server runs ``--grammar-backend llguidance``: xgrammar's EBNF (the default backend) and outlines
  cannot read the constraint (special tokens by name, ``%json``);
* the grammar's start is known: a model that reasons needs ``--reasoning-parser``. SGLang's
  ``ReasonerGrammarObject`` then applies the grammar once the reasoning detector's
  ``get_think_end_token_ids`` are generated (a token sequence, ``TokenSequenceMatcher``; typed marker text
  does not match): kimi_chat's detector gives the family's (``ServingHooks.sglang_think_end_ids``: K2
  ``</think>``, K3 ``<|close|>`` ``think`` ``<|sep|>``), and the constraint is built with
  ``after_reasoning=True`` (K2's body, K3 right after the think channel's close tag). A reasoning parser
  whose ids differ (SGLang's ``kimi_k2`` on K3) keeps SGLang's constraint. With ``thinking: false``
  SGLang's gate is open from the first token and the constraint is that output's (K3: inside the response
  channel); SGLang reads only ``thinking`` (the detector's ``reasoning_default``), so with
  ``enable_thinking: false`` alone its gate waits for a close that does not come (unconstrained). A model
  without reasoning (K2-Instruct) is constrained from its first token.

The dialect is ``$KIMI_CHAT_DIALECT``'s, else the one the served model's names choose where its template cannot
tell (``--served-model-name`` / ``--model-path`` ``moonshotai/Kimi-K2.7-Code``, as vLLM and ``serve`` choose it:
:func:`served_dialect`), else the family's one dialect (``kimi-k3``), else ``kimi-k2.6`` for a tokenizer with
``<think>``, else ``kimi-k2-instruct-0905``.
"""

from __future__ import annotations

import functools
import logging
import sys
from typing import Any

from pathlib import Path

from ..family import choose_family, model_names, named_dialect, override
from ...caches import LRUCache
from ...dialect_records import DialectRecord as Dialect
from ..forced import forced, forced_dialect, forced_grammar, log_kept, thinking_off
from ..hooks import ServingHooks, serving_of
from ..stages import tools_as_dicts

__all__ = ["install", "install_request", "ForcedLark", "kimi_structure_constraint", "kimi_response_format",
           "server_tokenizer", "served_names", "served_dialect", "grammar_backend", "reasoning_parser", "LOGGER"]

LOGGER = logging.getLogger("kimi_chat.integrations.sglang")
"""Where both detectors and the constraint log parse warnings, withheld calls and kept constraints."""
_HTTP_SERVER = "sglang.srt.entrypoints.http_server"
_WRAPPED = "__kimi_chat_wrapped__"


def grammar_backend() -> str | None:
    """The grammar backend the server runs (``--grammar-backend``, resolved: SGLang's runtime context),
    or ``None`` where no server configuration is published in this process."""
    from sglang.srt.runtime_context import get_exec

    try:
        return str(get_exec().kernel.grammar_backend)
    except (ValueError, AttributeError, KeyError):
        return None


def reasoning_parser() -> str | None:
    """The server's ``--reasoning-parser`` (``None``: none, or no published configuration)."""
    from sglang.srt.runtime_context import get_serving

    try:
        return get_serving().reasoning_parser or None
    except (ValueError, AttributeError, KeyError):
        return None


def _keep(logger: logging.Logger, what: str, why: str) -> None:
    log_kept(logger, what, "SGLang", why)


def _start(serving: ServingHooks, tokenizer: Any, logger: logging.Logger, what: str) -> tuple[Dialect, bool] | None:
    """The dialect of kimi_chat's constraint and whether it starts after the reasoning, where it applies
    (module docstring); ``None``: SGLang's own (the reason logged once)."""
    keeps = getattr(serving, "SGLANG_KEEPS_ITS_CONSTRAINT", None)
    if keeps is not None:
        _keep(logger, what, keeps)
        return None
    backend = grammar_backend()
    if backend != "llguidance":
        _keep(logger, what, f"the grammar backend is {backend or 'not known'}; kimi_chat's constraint needs "
                            "--grammar-backend llguidance")
        return None
    d = served_dialect()  # $KIMI_CHAT_DIALECT, or the model's names (SGLang passes no chat_template_kwargs here)
    reasons = serving.ALWAYS_REASONS or serving.reasons(tokenizer, d)
    after = reasons and reasoning_parser() is not None
    if reasons and not after:
        _keep(logger, what, "the model reasons and no --reasoning-parser runs: where SGLang builds the "
                            "constraint the request's thinking switch is not known")
        return None
    if after and (why := _gate_differs(serving, tokenizer)) is not None:
        _keep(logger, what, why)
        return None
    return (d if d is not None else forced_dialect(None, reasons, serving)), after


def served_names() -> list[str]:
    """The names the SGLang server's model goes by: ``--served-model-name``, then ``--model-path`` (a local
    directory: its names, :func:`kimi_chat.servers.family.model_names`); ``[]`` where no server
    configuration is published in this process."""
    from sglang.srt.runtime_context import get_model, get_serving

    names: list[str] = []
    for bag, key in ((get_serving, "served_model_name"), (get_model, "model_path")):
        try:
            value = getattr(bag(), key)
        except (ValueError, AttributeError, KeyError):
            continue
        for v in value if isinstance(value, (list, tuple)) else (value,):
            if isinstance(v, str) and v and v not in names:
                names.append(v)
    out: list[str] = []
    for n in names:
        out += model_names(n) if Path(n).is_dir() else [n]
    return out


def served_dialect() -> Dialect | None:
    """The dialect the server is told to serve: ``$KIMI_CHAT_DIALECT``'s, else the one the served model's names
    choose where a template cannot tell (``moonshotai/Kimi-K2.7-Code``: :func:`served_names`,
    :func:`kimi_chat.servers.family.named_dialect`, as vLLM's renderer and ``serve`` choose it); ``None``:
    neither says (the tokenizer's family decides)."""
    ov = override(None)
    if ov is not None:
        return ov[0]
    names = tuple(served_names())
    hit = _NAMED.get(names, _MISSING)
    if hit is _MISSING:
        hit = named_dialect(list(names))
        _NAMED.put(names, hit)
    return hit


_MISSING = object()
_NAMED: LRUCache[Dialect | None] = LRUCache("sglang.named_dialects", 8)
"""The dialect the served model's names choose, by names (a model directory's names are read from its files)."""


def kimi_structure_constraint(tools: Any, tool_choice: Any, parallel_tool_calls: bool, *, serving: ServingHooks,
                              tokenizer: Any, logger: logging.Logger) -> tuple[str, str] | None:
    """``("ebnf", LARK)``: kimi_chat's constraint of a forced tool choice where it applies (module
    docstring); ``None``: SGLang's own."""
    if not tools or not forced(tool_choice):
        return None
    start = _start(serving, tokenizer, logger, "a forced tool choice")
    if start is None:
        return None
    d, after = start
    args = (tools_as_dicts(tools), tool_choice, parallel_tool_calls)
    return "ebnf", ForcedLark(forced_grammar(*args, dialect=d, after_reasoning=after), args, d, after)


def server_tokenizer() -> Any:
    """The tokenizer of the SGLang server this process runs (its ``http_server`` global state: one
    model per server), or ``None`` (no server running here)."""
    mod = sys.modules.get(_HTTP_SERVER)
    state = mod.get_global_state() if mod is not None and hasattr(mod, "get_global_state") else None
    manager = getattr(state, "tokenizer_manager", None)
    return getattr(manager, "tokenizer", None)


def _kimi_tool_parser() -> bool:
    """Whether the server's ``--tool-call-parser`` is kimi_chat's detector."""
    from sglang.srt.function_call.function_call_parser import FunctionCallParser
    from sglang.srt.runtime_context import get_serving

    try:
        name = get_serving().tool_call_parser
    except (ValueError, AttributeError, KeyError):
        return False
    return hasattr(FunctionCallParser.ToolCallParserEnum.get(name or ""), "kimi_structure_constraint")


def kimi_response_format(request: Any, params: dict[str, Any], *, logger: logging.Logger = LOGGER) -> None:
    """Where SGLang constrains a ``response_format`` (``json_object`` / ``json_schema``: the sampling
    params' ``json_schema``) and kimi_chat's detector is the tool-call parser, put kimi_chat's
    constraint of the turn in its place, in place: the Kimi format with the reply constrained (K3's
    response channel, K2's content), the request's tools and ``tool_choice``, as the ``ebnf``."""
    rf = request.response_format
    if rf is None or rf.type not in ("json_object", "json_schema") or not params.get("json_schema"):
        return
    if params.get("ebnf") or params.get("regex") or params.get("structural_tag") or not _kimi_tool_parser():
        return
    tokenizer = server_tokenizer()
    serving = serving_of(choose_family(tokenizer, None, logger))
    start = _start(serving, tokenizer, logger, "response_format")
    if start is None:
        return
    d, after = start
    tools = tools_as_dicts(request.tools) if request.tools and request.tool_choice != "none" else None
    params["ebnf"] = forced_grammar(tools, request.tool_choice if tools else "none", request.parallel_tool_calls,
                                    dialect=d, after_reasoning=after,
                                    thinking=not thinking_off(request.chat_template_kwargs),
                                    response_format=rf.model_dump(by_alias=True, exclude_none=True))
    del params["json_schema"]


def _gate_differs(serving: ServingHooks, tokenizer: Any) -> str | None:
    """Why SGLang's reasoning gate would not start the grammar where the constraint starts (``None``: it
    does): the running reasoning parser's ``think_end_token_ids`` are not the family's."""
    ours = serving.sglang_think_end_ids(tokenizer)
    if ours is None or tokenizer is None:
        return None
    from sglang.srt.parser.reasoning_parser import ReasoningParser

    name = reasoning_parser()
    theirs = ReasoningParser(model_type=name, stream_reasoning=False, tokenizer=tokenizer).detector
    if list(theirs.get_think_end_token_ids(tokenizer)) != list(ours):
        return (f"--reasoning-parser {name} ends reasoning at other token ids than the family's close of "
                "reasoning: the grammar would start elsewhere")
    return None


class ForcedLark(str):
    """The Lark of a forced tool choice (a ``str``: what SGLang puts in the sampling params' ``ebnf``),
    remembering what built it: SGLang asks for the constraint without the request's thinking switch,
    and :func:`install_request` rebuilds it where the request switches thinking off."""

    args: tuple[Any, Any, Any]
    dialect: Dialect
    after_reasoning: bool

    def __new__(cls, lark: str, args: tuple[Any, Any, Any], dialect: Dialect, after_reasoning: bool) -> ForcedLark:
        self = super().__new__(cls, lark)
        self.args, self.dialect, self.after_reasoning = args, dialect, after_reasoning
        return self

    def __reduce__(self) -> tuple[type[str], tuple[str]]:
        """Pickled (SGLang sends sampling params to its scheduler) as the plain ``str`` it is."""
        return str, (str(self),)

    def for_request(self, chat_template_kwargs: Any) -> str:
        """The grammar for a request with these ``chat_template_kwargs`` (a plain ``str``): with thinking
        off (SGLang's gate then applies the grammar from the first token, the prompt having closed or
        skipped the reasoning: K3, inside the response channel) the constraint of that output."""
        if not thinking_off(chat_template_kwargs):
            return str(self)
        return forced_grammar(*self.args, dialect=self.dialect, after_reasoning=self.after_reasoning,
                              thinking=False)


def install_request(request_cls: Any) -> None:
    """Wrap ``request_cls.to_sampling_params`` (SGLang's ``ChatCompletionRequest``) once: a
    :class:`ForcedLark` tool-call constraint becomes the request's grammar (:meth:`ForcedLark.for_request`).
    Idempotent."""
    original = request_cls.to_sampling_params
    if getattr(original, _WRAPPED, False):
        return

    @functools.wraps(original)
    def to_sampling_params(self: Any, *args: Any, **kwargs: Any) -> Any:
        found = kwargs.get("tool_call_constraint", args[2] if len(args) > 2 else None)
        if found is not None and isinstance(found[1], ForcedLark):
            found = (found[0], found[1].for_request(self.chat_template_kwargs))
            if len(args) > 2:
                args = (*args[:2], found, *args[3:])
            else:
                kwargs["tool_call_constraint"] = found
        params = original(self, *args, **kwargs)
        kimi_response_format(self, params)
        return params

    setattr(to_sampling_params, _WRAPPED, True)
    request_cls.to_sampling_params = to_sampling_params


def install(parser_cls: Any) -> None:
    """Wrap ``parser_cls.get_structure_constraint`` (SGLang's ``FunctionCallParser``) once: a detector
    with a ``kimi_structure_constraint`` method (kimi_chat's) is asked first; ``None`` from it, or any
    other detector, gets SGLang's own method. Idempotent."""
    original = parser_cls.get_structure_constraint
    if getattr(original, _WRAPPED, False):
        return

    @functools.wraps(original)
    def get_structure_constraint(self: Any, tool_choice: Any, parallel_tool_calls: bool = True,
                                 thinking_mode: bool = False) -> Any:
        ours = getattr(self.detector, "kimi_structure_constraint", None)
        if ours is not None:
            found = ours(self.tools, tool_choice, parallel_tool_calls)
            if found is not None:
                return found
        return original(self, tool_choice, parallel_tool_calls=parallel_tool_calls, thinking_mode=thinking_mode)

    setattr(get_structure_constraint, _WRAPPED, True)
    parser_cls.get_structure_constraint = get_structure_constraint
