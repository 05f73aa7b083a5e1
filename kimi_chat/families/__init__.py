"""Format families: everything one family of Kimi formats needs, behind one record.

A *family* is a way of writing a conversation and an assistant turn: Kimi-K2's ``<|im_*|>`` turns,
``<think>`` and tool-call sections (``k2``); Kimi-K3's XTML tags ``<|open|>TAG attrs<|sep|>`` …
``<|close|>TAG<|sep|>`` and ``<|end_of_msg|>`` (``k3``). Each is one package, ``kimi_chat.families.<name>``,
whose ``FAMILY`` is its :class:`Family` record; each dialect record (:mod:`kimi_chat.dialects`) names its
family. The stages (:mod:`kimi_chat.prompt`, :mod:`kimi_chat.tokens`, :mod:`kimi_chat.output`,
:mod:`kimi_chat.grammar`, :mod:`kimi_chat.checks`, :mod:`kimi_chat.servers`, …) ask :func:`family_of` for
the record and know no family by name.

Adding a family is one new folder (``families/<name>/``, its ``__init__`` building ``FAMILY``) and one line
in :data:`REGISTRY`. The registry holds module paths, imported on first use: a family package builds on the
family-agnostic core (markers, messages, the prompt writer, the PEG engine, the tokenizer) and the stages
reach it only through this lookup, so no import cycle runs through it.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..markers import Marker
    from ..grammar.translate import FormatTranslator
    from ..output.format import OutputFormat
    from ..prompt.template import PromptWriter

__all__ = ["Family", "REGISTRY", "family_of", "family_names"]


@dataclass(frozen=True, kw_only=True)
class Family:
    """One format family: what the family-agnostic stages need of it.

    ``name`` is the registry key (``Dialect.family``); ``title`` how users read it (``"Kimi-K2"``);
    ``markers`` every special marker of the family (``kimi_chat.markers``); ``output_format`` the
    assistant output as data, run by the parser (:mod:`kimi_chat.output`) and translated into grammars
    (:mod:`kimi_chat.grammar`). The other fields are the family's hooks, grouped by the stage that calls them."""

    name: str
    title: str
    markers: tuple[Marker, ...]
    output_format: OutputFormat

    # -- prompt, tokens, grammar, output --
    format_markers: tuple[Marker, ...]
    """The markers with a special-token id that the output format writes (:func:`kimi_chat.grammar.format_markers`)."""
    grammar_translator: type[FormatTranslator]
    """The GBNF translation of ``output_format.grammar`` (:func:`kimi_chat.grammar.tool_call_grammar`)."""
    write_prompt: PromptWriter
    """Writes the prompt into a :class:`~kimi_chat.prompt.writer.Writer`: template literals (markers) and input
    text apart, with the attribution marks (:func:`kimi_chat.prompt.write_prompt`; a template family's:
    :func:`kimi_chat.prompt.template.template_writer` around its renderer)."""
    segment_wise: bool
    """The token-encoding policy: ``False``, the official tokenizer encodes the whole prompt text with the
    markers special (K2); ``True``, segment by segment, each part the writer wrote on its own (K3,
    :mod:`kimi_chat.tokens.segments`; :func:`kimi_chat.prompt.render_segments` then gives those parts)."""
    vocabulary: tuple[Marker, ...]
    """Special tokens a tokenizer must have to encode the family's prompts (:mod:`kimi_chat.tokens.vocabulary`)."""
    reference_tokenizer: str
    """The name of the family's tokenizer in the reference data (``KimiTokenizer.from_reference(name)``)."""

    # -- servers --
    serving: str
    """The module of the family's server hooks (``kimi_chat.families.<name>.serving``), imported on first use
    by :func:`kimi_chat.servers.hooks.serving_of`: what the streaming stages, the family detection and the
    vLLM/SGLang plugins ask of the family (:class:`kimi_chat.servers.hooks.ServingHooks`)."""

    # -- checks, engines, cli, reference --


REGISTRY: dict[str, str] = {
    "k2": "kimi_chat.families.k2",
    "k3": "kimi_chat.families.k3",
}
"""Family name -> the package whose ``FAMILY`` is its :class:`Family`. Adding a family is adding a line."""


def family_names() -> tuple[str, ...]:
    """The registered families' names, in registry order."""
    return tuple(REGISTRY)


def family_of(dialect_or_name: Any) -> Family:
    """The :class:`Family` of a dialect (a :class:`~kimi_chat.dialects.Dialect`, or anything with a
    ``family`` attribute) or of a family name. ``KeyError`` names an unregistered family."""
    name = dialect_or_name if isinstance(dialect_or_name, str) else getattr(dialect_or_name, "family", "k2")
    try:
        module = REGISTRY[name]
    except KeyError:
        raise KeyError(f"no format family {name!r} (families: {', '.join(REGISTRY)})") from None
    return importlib.import_module(module).FAMILY  # type: ignore[no-any-return]
