"""The Kimi-K3 family's record (:class:`~kimi_chat.families.Family`): ``FAMILY``, what the registry loads."""

from __future__ import annotations

from ... import markers as M
from .. import (CheckParts, Family, FamilyMarkers, GrammarParts, OfficialRendering, ServingParts, TokenPolicy,
                lazy_module)
from .format import FORMAT, TAGS, TOKEN_CLASSES
from .grammar import K3Translator
from .render import write_k3
from . import tooling, usage
from .lint import lint_k3
from .oracle import official_render


FAMILY = Family(
    name="k3",
    title="Kimi-K3",
    markers=FamilyMarkers(
        all=tuple(M.K3_MARKERS),
        output=(*(M.K3_BY_TEXT[t] for t in (TAGS.open, TAGS.close, TAGS.sep)),
                *(m for ms in TOKEN_CLASSES.values() for m in ms if isinstance(m, M.Marker))),
        vocabulary=(M.K3_OPEN, M.K3_CLOSE, M.K3_SEP, M.K3_END_OF_MSG),
        turn_end=M.K3_END_OF_MSG,
        inspected=tooling.inspected_markers,
    ),
    output_format=FORMAT,
    write_prompt=write_k3,
    tokens=TokenPolicy(
        segment_wise=True,
        base_tokenizer="k3",
        reference_tokenizer=lambda d: "k3",
        snapshot_tokenizer=tooling.snapshot_tokenizer,
    ),
    grammar=GrammarParts(translator=K3Translator, constraint=lazy_module(__package__, "constraint")),
    lint=lint_k3,
    serving=ServingParts(hooks=lazy_module(__package__, "serving"), pending_prompt_tokens=usage.pending_prompt_tokens),
    official=OfficialRendering(render=official_render, jinja_templates=False),
    checks=CheckParts(fix_hint=tooling.K3_FIX_HINT, refusals_differ=True, probes=tooling.PROBES),
)
