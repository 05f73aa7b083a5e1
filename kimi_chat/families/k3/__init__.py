"""The Kimi-K3 family: XTML, ``<|open|>TAG attrs<|sep|>`` … ``<|close|>TAG<|sep|>``, turns ended by ``<|end_of_msg|>``.

Dialect: Kimi-K3 (:mod:`kimi_chat.dialects`). Modules: :mod:`.inputs` (the encoder's input handling),
:mod:`.render` (the official encoder's segments), :mod:`.tokens` (segment-wise ids), :mod:`.format` (the output
format as data), :mod:`.tags` (the tag lexer), :mod:`.calls` (typed arguments), :mod:`.grammar`, :mod:`.lint`,
:mod:`.oracle` (the release's encoder).
"""

from __future__ import annotations

from types import ModuleType

from ... import markers as M
from .. import Family
from .format import FORMAT, TAGS, TOKEN_CLASSES
from .grammar import K3Translator
from .render import write_k3
from . import tooling
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
    markers=tuple(M.K3_MARKERS),
    output_format=FORMAT,
    # -- prompt, tokens, grammar, output --
    format_markers=(*(M.K3_BY_TEXT[t] for t in (TAGS.open, TAGS.close, TAGS.sep)),
                    *(m for ms in TOKEN_CLASSES.values() for m in ms if isinstance(m, M.Marker))),
    grammar_translator=K3Translator,
    write_prompt=write_k3,
    segment_wise=True,
    vocabulary=(M.K3_OPEN, M.K3_CLOSE, M.K3_SEP, M.K3_END_OF_MSG),

    # -- servers --
    serving=_serving,
    usage="kimi_chat.families.k3.usage",
    constraint=_constraint,

    # -- checks, engines, cli, reference --
    lint=lint_k3,
    official_render=official_render,
    jinja_templates=False,
    turn_end=M.K3_END_OF_MSG,
    inspected_markers=tooling.inspected_markers,
    fix_hint=tooling.K3_FIX_HINT,
    verify_requests=tooling.verify_requests,
    refusals_differ=True,
    probes=tooling.PROBES,
    reference_tokenizer=lambda d: "k3",
    base_tokenizer="k3",
    snapshot_tokenizer=tooling.snapshot_tokenizer,
    keeps_all_reasoning=True,
)
