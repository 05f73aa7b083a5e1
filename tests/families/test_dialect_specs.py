"""A dialect record is a shared header plus its family's spec: the K2-only switches live in ``K2Spec`` (not in the
header every dialect shares), each switch is named by what it does (no version names among its values), a record
whose spec is another family's is refused, and Kimi-K2.7-Code differs from Kimi-K2.6 only where it behaves
differently."""

from __future__ import annotations

import dataclasses
import re
import typing

import pytest

from kimi_chat.dialects import DIALECTS, Dialect, K2_DIALECTS, Status, get_dialect
from kimi_chat.families import Family
from kimi_chat.families.k2.spec import K2Spec
from kimi_chat.families.k3.spec import K3Spec


def test_each_record_carries_its_familys_spec() -> None:
    for name, d in DIALECTS.items():
        assert isinstance(d.spec, K2Spec if d.family == "k2" else K3Spec), name
    assert set(K2_DIALECTS) == {n for n, d in DIALECTS.items() if isinstance(d.spec, K2Spec)}


def test_the_header_holds_no_k2_switch() -> None:
    header = {f.name for f in dataclasses.fields(Dialect)}
    switches = {f.name for f in dataclasses.fields(K2Spec)}
    assert not header & switches, header & switches
    for k2_only in ("tools_prefix", "content_style", "think", "media", "role_names", "default_system"):
        assert not hasattr(get_dialect("kimi-k3"), k2_only), k2_only


def test_switch_values_name_behaviour_not_versions() -> None:
    version = re.compile(r"^(k\d+|rev\d+)$|^macro$")
    for f in dataclasses.fields(K2Spec):
        hint = typing.get_type_hints(K2Spec)[f.name]
        for value in typing.get_args(hint):
            assert not (isinstance(value, str) and version.search(value)), (f.name, value)


def test_a_spec_of_another_family_is_refused() -> None:
    with pytest.raises(TypeError, match="kimi-k2-wrong.*K2Spec"):
        Dialect(name="kimi-k2-wrong", status=Status.RECONSTRUCTED, oracle="x.jinja", summary="wrong spec",
                spec=K3Spec())
    with pytest.raises(ValueError, match="keeps_every_reasoning"):
        K2Spec(keeps_every_reasoning=True)  # only the line whose generation prompt opens <think> keeps it all


def test_k27_code_differs_from_k26_only_where_it_behaves_differently() -> None:
    k26, k27 = get_dialect("kimi-k2.6"), get_dialect("kimi-k2.7-code")
    differ = {f.name for f in dataclasses.fields(Dialect) if getattr(k26, f.name) != getattr(k27, f.name)}
    assert differ == {"name", "summary", "spec", "options", "oracle_options", "model_names", "known_problems"}
    assert dataclasses.replace(k26.spec, keeps_every_reasoning=True) == k27.spec


def test_the_family_record_is_about_ten_members_by_role() -> None:
    members = [f.name for f in dataclasses.fields(Family)]
    assert members == ["name", "title", "markers", "output_format", "write_prompt", "tokens", "grammar", "lint",
                       "serving", "official", "checks"]
