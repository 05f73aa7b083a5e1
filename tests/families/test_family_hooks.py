"""The hooks of the family record used by the checks, the engines, the CLI and the reference: each
registered family's record says what these stages need, and the stages ask the record (no family by name).
Run once per registered family, so a new family is tested by registering it."""

from __future__ import annotations

from dataclasses import replace

import pytest
from conftest import needs_reference

from kimi_chat import lint, render
from kimi_chat.checks.inspection import _markers_for, _turn_end
from kimi_chat.checks.verification.probes import PROBES, SHARED_PROBES
from kimi_chat.dialects import DIALECTS
from kimi_chat.families import REGISTRY, family_of
from kimi_chat.templates import template_path

FAMILIES = sorted(REGISTRY)


def _dialects(family: str) -> list[str]:
    return [n for n, d in DIALECTS.items() if d.family == family]


def test_probes_are_the_shared_ones_then_each_familys_own_compared_with_its_dialects_only():
    own = [replace(p, families=(name,)) for name in REGISTRY for p in family_of(name).checks.probes]
    assert PROBES == SHARED_PROBES + tuple(own)
    for p in own:
        assert p.families is not None
        for d in DIALECTS.values():
            assert p.applies_to(d) == (d.family in p.families), (p.name, d.name)
    assert all(p.applies_to(d) for p in SHARED_PROBES for d in DIALECTS.values())


@pytest.mark.parametrize("family", FAMILIES)
def test_inspect_reads_the_markers_and_turn_end_of_the_dialects_family(family):
    record = family_of(family)
    assert record.markers.turn_end in record.markers.all
    for name in _dialects(family):
        markers = _markers_for(name)
        assert markers == record.markers.inspected(DIALECTS[name])
        assert set(markers) <= set(record.markers.all) and _turn_end(name) == record.markers.turn_end


@pytest.mark.parametrize("family", FAMILIES)
def test_a_family_ships_templates_exactly_when_its_record_says_so(family):
    for name in _dialects(family):
        if family_of(family).official.jinja_templates:
            assert template_path(name).name == f"{name}.jinja"
        else:
            with pytest.raises(FileNotFoundError, match="has no Jinja chat template"):
                template_path(name)


@pytest.mark.parametrize("family", FAMILIES)
def test_every_marker_of_the_family_typed_in_text_is_linted(family):
    for name in _dialects(family):
        for m in family_of(family).markers.all:
            found = lint([{"role": "user", "content": f"a {m.text} b"}], dialect=name)
            assert [w.field for w in found if w.code == "typed-marker"] == ["content"], (name, m.text)


@pytest.mark.parametrize("family", FAMILIES)
def test_a_non_bool_add_generation_prompt_is_refused_alike_in_every_family(family):
    # one check for every family (it was written twice, with two messages)
    for name in _dialects(family):
        with pytest.raises(TypeError, match=r"^add_generation_prompt must be a bool \(True or False\), got 1$"):
            render([{"role": "user", "content": "Hi"}], dialect=name, add_generation_prompt=1)


@needs_reference
@pytest.mark.parametrize("family", FAMILIES)
def test_render_official_is_the_familys_official_rendering(family):
    from kimi_chat.reference.oracle import render_official

    msgs = [{"role": "user", "content": "Hi"}]
    for name in _dialects(family):
        d = DIALECTS[name]
        assert render_official(msgs, dialect=name) == family_of(family).official.render(msgs, None, d, True)
        assert render_official(msgs, dialect=name) == render(msgs, dialect=name)
