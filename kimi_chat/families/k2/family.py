"""The Kimi-K2 family's record (:class:`~kimi_chat.families.Family`): ``FAMILY``, what the registry loads."""

from __future__ import annotations

from ... import markers as M
from .. import (CheckParts, Family, FamilyMarkers, GrammarParts, OfficialRendering, ServingParts, TokenPolicy,
                lazy_module)
from .format import FORMAT, TOKEN_CLASSES
from .grammar import K2Translator
from .render import render_k2
from ...prompt.template import template_writer
from . import tooling, usage
from .lint import lint_k2
from .oracle import official_k2_render


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
    grammar=GrammarParts(translator=K2Translator, constraint=lazy_module(__package__, "constraint")),
    lint=lint_k2,
    serving=ServingParts(hooks=lazy_module(__package__, "serving"), pending_prompt_tokens=usage.pending_prompt_tokens),
    official=OfficialRendering(render=official_k2_render, jinja_templates=True),
    checks=CheckParts(fix_hint=None, refusals_differ=False, probes=()),
)
