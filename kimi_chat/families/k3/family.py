"""The Kimi-K3 family's record (:class:`~kimi_chat.families.Family`): ``FAMILY``, what the registry loads."""

from __future__ import annotations

from types import ModuleType

from ... import markers as M
from .. import (CheckParts, Family, FamilyMarkers, GrammarParts, OfficialRendering, ServingParts,
                TokenPolicy)
from .format import FORMAT, TAGS, TOKEN_CLASSES
from .grammar import K3Translator
from .prompt_pass import turns_position_free
from .render import write_k3
from . import tooling, usage
from .lint import lint_k3
from .oracle import official_render


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
        turns_position_free=turns_position_free,
    ),
    grammar=GrammarParts(translator=K3Translator, constraint=_constraint),
    lint=lint_k3,
    serving=ServingParts(hooks=_serving, pending_prompt_tokens=usage.pending_prompt_tokens),
    official=OfficialRendering(render=official_render, jinja_templates=False),
    checks=CheckParts(fix_hint=tooling.K3_FIX_HINT, refusals_differ=True, probes=tooling.PROBES),
)
