"""Untrusted templates run within bounds: identify, verify and inspect_path render
templates from strangers; a template that loops for ever, allocates without end or writes without end is
stopped at the bounds of kimi_chat.checks.verification.bounded.LIMITS and reported as such (the known problem
``template-exceeds-limits`` for identify / inspect, TemplateLimitError for verify and render_with_dialect);
other template errors pass through unchanged."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers", reason="verify renders templates with transformers")

from jinja2.exceptions import TemplateError  # noqa: E402

from kimi_chat.checks.inspection import inspect_path  # noqa: E402
from kimi_chat.reference.oracle import oracle_template  # noqa: E402
from kimi_chat.checks.verification import TemplateLimitError, identify, render_with_dialect, verify  # noqa: E402
from kimi_chat.checks.verification import bounded  # noqa: E402

from conftest import needs_reference  # noqa: E402

LOOPS = "{% for a in range(100000) %}{% for b in range(100000) %}x{% endfor %}{% endfor %}"
HUGE = "{{ ('x' * 10 ** 11) | length }}"  # one allocation of 100 GB
DOUBLING = ("{% set ns = namespace(s='x') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}"
            "{{ ns.s | length }}")
WRITES = "{% for a in range(100000) %}{{ 'abcdefghij' }}{% endfor %}"
MSGS = [{"role": "user", "content": "hi"}]
K2 = "kimi-k2-instruct@rev2"


@pytest.fixture
def tight(monkeypatch):
    monkeypatch.setattr(bounded.LIMITS, "seconds", 1.0)
    monkeypatch.setattr(bounded.LIMITS, "output_chars", 100_000)


@pytest.mark.parametrize("template, limit", [(LOOPS, "time"), (HUGE, "memory"), (DOUBLING, ("time", "memory")),
                                             (WRITES, "output")])
@pytest.mark.parametrize("dialect", [K2, "kimi-k3"])
def test_render_with_dialect_stops_a_hostile_template(tight, template, limit, dialect):
    with pytest.raises(TemplateLimitError) as info:
        render_with_dialect(template, MSGS, dialect)
    assert info.value.limit in limit if isinstance(limit, tuple) else info.value.limit == limit
    # the worker is replaced: the next template renders
    text = render_with_dialect("{{ messages[0].content }}", MSGS, dialect)
    assert text == "hi"


def test_other_template_errors_pass_through(tight):
    with pytest.raises(TemplateError, match="boom"):
        render_with_dialect("{{ raise_exception('boom') }}", MSGS, K2)
    with pytest.raises(ZeroDivisionError):
        render_with_dialect("{{ 1 // 0 }}", MSGS, K2)


@pytest.mark.parametrize("template", [LOOPS, WRITES])
def test_identify_reports_a_hostile_template(tight, template):
    ident = identify(template)
    assert ident.kind == "unknown" and ident.dialect is None
    assert [p.code for p in ident.problems] == ["template-exceeds-limits"]
    assert any("limit" in n or "within" in n for n in ident.notes), ident.notes


def test_inspect_reports_a_hostile_template(tight, tmp_path):
    path = tmp_path / "chat_template.jinja"
    path.write_text(LOOPS, encoding="utf-8")
    ins = inspect_path(path)
    assert [p.code for p in ins.identification.problems] == ["template-exceeds-limits"]
    assert "exceeds the rendering limits" in ins.format_text()


def test_verify_raises_for_a_hostile_template(tight):
    with pytest.raises(TemplateLimitError, match="within 1 s") as info:
        verify(LOOPS, K2, examples=3, seed=1)
    assert info.value.limit == "time"


@needs_reference
def test_official_templates_render_within_the_bounds(tight):
    for d in (K2, "kimi-k2.5"):
        text = "{%- set unused = 1 -%}" + oracle_template(d)  # not the exact text: identified by its renderings
        ident = identify(text)
        assert ident.dialect == d and ident.kind == "equivalent", ident


def test_a_template_nested_too_deeply_to_compile_is_reported():
    deep = "{% if true %}" * 5000 + "x" + "{% endif %}" * 5000
    ident = identify(deep)
    assert ident.description == "not valid Jinja"
    assert any("nested too deeply" in n for n in ident.notes), ident.notes
