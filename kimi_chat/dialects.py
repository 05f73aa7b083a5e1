"""Dialects: one small declarative record per official Kimi chat-template revision.

What differs between the revisions is a handful of choices (default system prompt, how tools are
declared, role header names, tool-call id policy, tool result layout, ``<think>`` policy, end-of-turn
policy, how the tokenizer pre-processes tools). One renderer (:mod:`kimi_chat.render`) serves them
all; adding a revision is adding a record here.

Each dialect carries its provenance status, from ``../shared/reference/PROVENANCE.md``:

* ``verified``: the oracle template is byte-identical in two or more independent sources;
* ``single-source``: one verbatim copy plus evidence that it is official;
* ``unverified``: copied from a doc or code file, not from a template file;
* ``reconstructed``: rebuilt by us from a renamed or partial copy.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Literal

from .errors import UnknownDialectError

__all__ = [
    "Status",
    "Dialect",
    "DIALECTS",
    "K2_DIALECTS",
    "ALIASES",
    "DEFAULT_DIALECT",
    "KIMI_K3",
    "get_dialect",
    "dialect_names",
    "dialect_for_model",
]


class Status(str, Enum):
    """How sure we are that a dialect's oracle template is the official text."""

    VERIFIED = "verified"
    SINGLE_SOURCE = "single-source"
    UNVERIFIED = "unverified"
    RECONSTRUCTED = "reconstructed"


@dataclass(frozen=True)
class Dialect:
    """One official template revision, as a set of rendering choices.

    The fields are read by :mod:`kimi_chat.render` (prompt), :mod:`kimi_chat.parse` (output) and the
    CLI. They are facts read off the oracle template named by ``oracle``.
    """

    name: str
    """Canonical name, e.g. ``kimi-k2-instruct@rev2``."""
    status: Status
    oracle: str
    """Path of the oracle template, relative to the reference directory."""
    summary: str
    default_system: str | None
    """System prompt inserted when the first message is not a system message (``None``: never)."""
    tools_prefix: str = ""
    """Text between ``<|im_middle|>`` and the tools JSON of the ``tool_declare`` block."""
    tools_separators: tuple[str, str] | None = None
    """``separators`` of the template's ``tojson`` (``None``: ``', '`` and ``': '``)."""
    tools_typescript: bool = False
    """The tokenizer passes a TypeScript-style declaration (``tools_ts_str``) in place of the JSON."""
    sort_tool_keys: bool = False
    """The official tokenizer sorts the keys of every dict in ``tools`` before rendering."""
    role_names: Literal["fixed", "name_or_role"] = "fixed"
    """``fixed``: headers say ``system/user/assistant/tool``; ``name_or_role``: ``message.name`` or role."""
    tool_calls: bool = True
    """The template renders ``assistant.tool_calls`` (rev1 silently drops them)."""
    tool_call_ids: Literal["given", "regenerate"] = "given"
    """``regenerate``: ids are rewritten as ``functions.NAME:INDEX`` (index within the message)."""
    string_arguments: Literal["raw", "json"] = "raw"
    """``raw``: string arguments are written as they are; ``json``: JSON-encoded again (double)."""
    tool_result_header: str | None = "\n"
    """Text between ``## Return of ID`` and the result (``None``: no ``## Return of`` header)."""
    content_style: Literal["rev1", "k2", "macro"] = "k2"
    """How message bodies are written; see :mod:`kimi_chat.render`."""
    media: Literal["k2", "k25"] = "k2"
    """Media parts of list content. ``k2``: a part of type ``image`` or with an ``image`` /
    ``image_url`` key is ``<|media_start|>image<|media_content|><|media_pad|><|media_end|>`` (plus a
    newline, except in ``rev1`` content style); video parts render as nothing. ``k25``: parts are told
    by their type: images ``<|media_begin|>...`` and videos the K2.5 placeholder, each plus a newline."""
    think: Literal["none", "history_split", "k25"] = "none"
    """``<think>`` policy for assistant turns. ``history_split``: assistant turns up to the last one
    without tool calls get ``<think></think>``, later ones their reasoning. ``k25`` (K2.5, K2.6): the
    same, plus the generation prompt opens ``<think>`` (or ``<think></think>`` with ``thinking=False``)
    and later turns get ``<think></think>`` with ``thinking=False`` (K2.6: unless ``preserve_thinking``,
    which also drops the history split, when the dialect reads it, see :attr:`options`)."""
    reasoning_key: Literal["reasoning_content", "reasoning"] = "reasoning_content"
    """The key a kept turn's reasoning is read from first. ``reasoning_content``: the template reads
    only it, which transformers fills from ``reasoning_content``, ``thinking`` or ``reasoning`` (the
    first given); ``reasoning`` (K2.6): ``reasoning`` when the message has it, else the former."""
    omit_last_im_end_without_generation_prompt: bool = False
    """0905: without a generation prompt, the last message gets no ``<|im_end|>`` (prefill mode)."""
    options: tuple[str, ...] = ()
    """Render options (template kwargs) this dialect reads, e.g. ``thinking``."""
    aliases: tuple[str, ...] = field(default=())
    family: Literal["k2", "k3"] = "k2"
    """The format family: which renderer (:mod:`kimi_chat.render`) and output format serve it. ``k2``:
    ``<|im_*|>`` turns and tool-call sections (every K2 revision); ``k3``: XTML, rendered in Python by the
    official ``encoding_k3`` (the K2 fields above do not apply to it)."""

    @property
    def reads_preserve_thinking(self) -> bool:
        """Whether the template reads ``preserve_thinking`` (K2.6): with it true, every assistant
        turn keeps its reasoning."""
        return "preserve_thinking" in self.options

    @property
    def reasoning(self) -> bool:
        """Whether the model's output may carry ``<think>`` reasoning."""
        return self.think != "none"

    def check_options(self, options: Mapping[str, object], *, what: str = "option", require_bool: bool = True) -> None:
        """Refuse template options this dialect does not read (and, with ``require_bool``, non-bool
        values): the check of :func:`~kimi_chat.output.parse` (``render`` ignores unread kwargs, as the
        templates do, and :func:`kimi_chat.lint` reports them).

        ``what`` is how the message calls an option (``"option"``, ``"render option"``). Raises
        ``TypeError`` naming the option and listing the dialect's options.
        """
        for key, value in options.items():
            if key not in self.options:
                takes = ", ".join(self.options) if self.options else "none"
                raise TypeError(f"dialect {self.name} takes no {what} {key!r} (its options: {takes})")
            if require_bool and type(value) is not bool:
                raise TypeError(f"{what} {key!r} of dialect {self.name} must be a bool, got {value!r}")

    def prefills_think(self, **options: object) -> bool:
        """Whether the generation prompt already opens ``<think>``, so the model's output starts
        inside reasoning (K2.5 and K2.6 with ``thinking`` on)."""
        return self.think == "k25" and options.get("thinking", True) is not False


_K2_SYSTEM_V1 = "You are a helpful assistant"
_K2_SYSTEM_V2 = "You are Kimi, an AI assistant created by Moonshot AI."

DIALECTS: dict[str, Dialect] = {
    d.name: d
    for d in (
        Dialect(
            name="kimi-k2-instruct@rev1",
            status=Status.VERIFIED,
            oracle="Kimi-K2-Instruct/chat_template.rev1.jinja",
            summary="Kimi-K2-Instruct, July 2025 original: no tool-call support (tool calls are dropped)",
            default_system=_K2_SYSTEM_V1,
            role_names="fixed",
            tool_calls=False,
            tool_result_header=None,
            content_style="rev1",
        ),
        Dialect(
            name="kimi-k2-instruct@rev2",
            status=Status.SINGLE_SOURCE,
            oracle="Kimi-K2-Instruct/chat_template.rev2.jinja",
            summary="Kimi-K2-Instruct, Jul-Aug 2025: first with tool calls; ids regenerated, "
            "string arguments JSON-encoded twice, literal backslash-n after '## Return of'",
            default_system=_K2_SYSTEM_V1,
            role_names="fixed",
            tool_call_ids="regenerate",
            string_arguments="json",
            tool_result_header="\\n",
            content_style="k2",
        ),
        Dialect(
            name="kimi-k2-instruct-0905",
            status=Status.UNVERIFIED,
            oracle="unverified/Kimi-K2-Instruct-0905.chat_template.candidate-A.jinja",
            summary="Kimi-K2-Instruct-0905: ids kept, '# Tools' header, name-or-role headers",
            default_system=_K2_SYSTEM_V2,
            tools_prefix="\n  # Tools\n  ",
            sort_tool_keys=True,
            role_names="name_or_role",
            tool_result_header="\n    ",
            content_style="k2",
            omit_last_im_end_without_generation_prompt=True,
            aliases=("kimi-k2-instruct",),
        ),
        Dialect(
            name="kimi-k2-thinking@rev1",
            status=Status.SINGLE_SOURCE,
            oracle="Kimi-K2-Thinking/chat_template.rev1.jinja",
            summary="Kimi-K2-Thinking, Nov 2025 initial: <think> kept after the last plain assistant turn",
            default_system=_K2_SYSTEM_V2,
            sort_tool_keys=True,
            role_names="name_or_role",
            content_style="macro",
            think="history_split",
            aliases=("kimi-k2-thinking",),
        ),
        Dialect(
            name="kimi-k2.5",
            status=Status.RECONSTRUCTED,
            oracle="unverified/Kimi-K2.5.chat_template.reconstructed-v2.jinja",
            summary="Kimi-K2.5: generation prompt pre-fills <think> (thinking=True) or <think></think>; "
            "TypeScript tool declarations; <|media_begin|> images, video placeholder; no default system; "
            "reasoning from reasoning_content; no preserve_thinking",
            default_system=None,
            tools_separators=(",", ":"),
            tools_typescript=True,
            sort_tool_keys=True,
            role_names="name_or_role",
            content_style="macro",
            media="k25",
            think="k25",
            options=("thinking",),
        ),
        Dialect(
            name="kimi-k2.6",
            status=Status.RECONSTRUCTED,
            oracle="unverified/Kimi-K2.6.chat_template.reconstructed.jinja",
            summary="Kimi-K2.6: Kimi-K2.5's format plus preserve_thinking (reasoning kept on every "
            "assistant turn); reasoning read from `reasoning` first; eos <|im_end|>",
            default_system=None,
            tools_separators=(",", ":"),
            tools_typescript=True,
            sort_tool_keys=True,
            role_names="name_or_role",
            content_style="macro",
            media="k25",
            think="k25",
            reasoning_key="reasoning",
            options=("thinking", "preserve_thinking"),
        ),
    )
}
"""Every dialect, by canonical name."""

KIMI_K3 = Dialect(
    name="kimi-k3",
    status=Status.SINGLE_SOURCE,
    oracle="Kimi-K3/encoding_k3.py",
    summary="Kimi-K3 (July 2026): XTML markup of <|open|>/<|close|>/<|sep|>/<|end_of_msg|>, no Jinja template; "
    "encoded segment by segment; thinking_effort low/high/max (default max); tool results re-ordered by id",
    default_system=None,
    family="k3",
    options=("thinking", "thinking_effort", "tool_choice", "response_format", "response_schema", "image_prompts"),
)
"""The Kimi-K3 dialect (rendered by :mod:`kimi_chat.families.k3.render`)."""
DIALECTS[KIMI_K3.name] = KIMI_K3

K2_DIALECTS: dict[str, Dialect] = {n: d for n, d in DIALECTS.items() if d.family == "k2"}
"""The K2-family dialects (those with a Jinja template: the oracle templates, our ``templates/``,
``identify`` / ``verify``)."""

ALIASES: dict[str, str] = {alias: d.name for d in DIALECTS.values() for alias in d.aliases}
"""Alias -> canonical dialect name."""

DEFAULT_DIALECT = "kimi-k2-instruct"


def get_dialect(name: str | Dialect) -> Dialect:
    """The dialect named ``name`` (a canonical name or an alias); a :class:`Dialect` passes through.

    Raises :class:`~kimi_chat.errors.UnknownDialectError` listing the known names otherwise.
    """
    if isinstance(name, Dialect):
        return name
    d = DIALECTS.get(ALIASES.get(name, name))
    if d is None:
        known = ", ".join(dialect_names())
        raise UnknownDialectError(f"unknown dialect {name!r}; known dialects and aliases: {known}")
    return d


def dialect_names(*, aliases: bool = True) -> list[str]:
    """Canonical dialect names (and aliases, after them)."""
    return list(DIALECTS) + (list(ALIASES) if aliases else [])


_MODEL_K3 = re.compile(r"kimi-?k3(?![0-9.])")
_MODEL_K26 = re.compile(r"k2[.-]?6(?![0-9])")
_MODEL_K25 = re.compile(r"k2[.-]?5(?![0-9])")
_MODEL_K2 = re.compile(r"k2(?![0-9.])")
_MODEL_BASE = re.compile(r"(?:^|-)base(?:$|-)")


def dialect_for_model(model: str) -> str | None:
    """The canonical dialect a model name implies (a Hugging Face id such as
    ``moonshotai/Kimi-K2-Thinking``, an API model name such as ``kimi-k2.5``, a GGUF ``general.name``
    such as ``Kimi K2 Instruct 0905``; case, ``_``/space for ``-`` and the organisation prefix do not
    matter), or ``None`` when the name does not tell:

    * ``Kimi-K3`` -> ``kimi-k3``; ``Kimi-K2.6`` / ``Kimi-K2.5`` (also ``K2-6``, ``K26``) -> ``kimi-k2.6`` /
      ``kimi-k2.5``; ``Kimi-K2-Thinking`` -> ``kimi-k2-thinking@rev1``; ``Kimi-K2-Instruct-0905`` ->
      ``kimi-k2-instruct-0905``;
    * ``None`` for ``Kimi-K2-Instruct`` (its template had several revisions), base models
      (``Kimi-K2-Base``: not trained on a chat format), and Kimi models of other formats (Kimi-VL,
      Kimi-Linear, Kimi-Dev, Kimi-Audio, ``kimi-thinking-preview``...), whose names have no ``K2``/``K3``."""
    n = model.lower().replace("_", "-").replace(" ", "-").rsplit("/", 1)[-1]
    if "kimi" not in n and "k2" not in n:
        return None
    if _MODEL_BASE.search(n):
        return None
    if _MODEL_K3.search(n):
        return KIMI_K3.name
    if _MODEL_K26.search(n):
        return "kimi-k2.6"
    if _MODEL_K25.search(n):
        return "kimi-k2.5"
    if not _MODEL_K2.search(n):
        return None
    if "thinking" in n:
        return "kimi-k2-thinking@rev1"
    if "0905" in n:
        return "kimi-k2-instruct-0905"
    return None
