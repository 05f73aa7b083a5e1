"""The Kimi-K2 family's record (:class:`~kimi_chat.families.Family`): ``FAMILY``, what the registry loads."""

from __future__ import annotations

from types import ModuleType

from ... import markers as M
from .. import (CheckParts, Family, FamilyMarkers, GrammarParts, OfficialRendering, ServingParts,
                TokenPolicy)
from .format import FORMAT, TOKEN_CLASSES
from .grammar import K2Translator
from .render import render_k2
from ...prompt.template import template_writer
from . import tooling, usage
from .lint import lint_k2
from .oracle import official_k2_render


def _serving() -> ModuleType:
    """The family's server hooks (:mod:`.serving`), imported on first use (by :func:`kimi_chat.servers.hooks.serving_of`)."""
    from . import serving

    return serving


def _constraint() -> ModuleType:
    """The family's part of a llguidance constraint (:mod:`.constraint`), imported on first use (it needs the
    ``constraints`` extra only when a constraint is built)."""
    from . import constraint

    return constraint


FAMILY = Family(
    name="k2",
    title="Kimi-K2",
    markers=FamilyMarkers(
        all=tuple(M.MARKERS),
        output=tuple(m for ms in TOKEN_CLASSES.values() for m in ms if m.id is not None),
        vocabulary=(M.IM_END, M.IM_USER, M.IM_ASSISTANT, M.IM_SYSTEM, M.IM_MIDDLE),
        turn_end=M.IM_END,
        inspected=tooling.inspected_markers,
    ),
    output_format=FORMAT,
    write_prompt=template_writer(render_k2),
    tokens=TokenPolicy(
        segment_wise=False,
        base_tokenizer="k2",
        reference_tokenizer=tooling.reference_tokenizer,
        snapshot_tokenizer=tooling.snapshot_tokenizer,
    ),
    grammar=GrammarParts(translator=K2Translator, constraint=_constraint),
    lint=lint_k2,
    serving=ServingParts(hooks=_serving, pending_prompt_tokens=usage.pending_prompt_tokens),
    official=OfficialRendering(render=official_k2_render, jinja_templates=True),
    checks=CheckParts(fix_hint=None, refusals_differ=False, probes=()),
)
