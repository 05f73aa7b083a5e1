"""Each family owns its dialect records: ``families/<name>/dialects.py`` lists them (``RECORDS``, oldest first), the
registry (:mod:`kimi_chat.dialect_records`) registers what each registered family gives
(:func:`kimi_chat.families.family_dialects`), in registry order, and a family's records module gives only records
of its own family."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest

from kimi_chat import dialect_records
from kimi_chat.dialect_records import DialectRecord
from kimi_chat.families import REGISTRY, family_dialects, family_names
from kimi_chat.families.k2 import dialects as k2_records
from kimi_chat.families.k3 import dialects as k3_records

BUILT_IN = ["kimi-k2-instruct@rev1", "kimi-k2-instruct@rev2", "kimi-k2-instruct-0905", "kimi-k2-thinking@rev1",
            "kimi-k2.5", "kimi-k2.6", "kimi-k2.7-code", "kimi-k3"]
"""The built-in dialects in the order the CLI lists them: the K2 revisions by release date, then Kimi-K3
(the order of ``docs/dialects-and-fidelity.md``'s provenance table)."""


def _fields(d: DialectRecord) -> dict[str, object]:
    return {f.name: getattr(d, f.name) for f in dataclasses.fields(DialectRecord)}


def test_the_registry_holds_each_familys_records_in_order() -> None:
    given = [d for family in family_names() for d in family_dialects(family)]
    names = [d.name for d in given]
    assert names == BUILT_IN
    assert [n for n in dialect_records.DIALECTS if n in BUILT_IN] == BUILT_IN
    for record in given:  # the registry holds the record's handle: the same fields
        held = dialect_records.DIALECTS[record.name]
        assert _fields(held) == _fields(record), record.name


def test_each_family_module_gives_its_own_records() -> None:
    assert family_dialects("k2") == k2_records.RECORDS
    assert family_dialects("k3") == k3_records.RECORDS == (k3_records.KIMI_K3,)
    assert {d.family for d in k2_records.RECORDS} == {"k2"} and k3_records.KIMI_K3.family == "k3"
    assert set(dialect_records.K2_DIALECTS) == {d.name for d in k2_records.RECORDS}
    assert dialect_records.KIMI_K3 is k3_records.KIMI_K3


def test_kimi_k27_code_is_a_replace_of_kimi_k26() -> None:
    k26, k27 = (next(d for d in k2_records.RECORDS if d.name == n) for n in ("kimi-k2.6", "kimi-k2.7-code"))
    differ = {k for k, v in _fields(k27).items() if _fields(k26)[k] != v}
    assert differ == {"name", "summary", "spec", "options", "oracle_options", "model_names", "known_problems"}
    assert (k27.oracle, k27.status) == (k26.oracle, k26.status)


def test_an_unregistered_family_has_no_records() -> None:
    with pytest.raises(KeyError, match="no format family 'kx'"):
        family_dialects("kx")


def test_a_record_of_another_family_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # a made-up family package whose records module lists a K2 record: the registry names the record and its family
    package = tmp_path / "kx_family_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "family.py").write_text("FAMILY = None\n")
    (package / "dialects.py").write_text("from kimi_chat.dialect_records import get_dialect\n"
                                         "RECORDS = (get_dialect('kimi-k2.6'),)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(REGISTRY, "kx", "kx_family_pkg.family")
    try:
        with pytest.raises(ValueError, match=r"kx_family_pkg\.dialects\.RECORDS\[0\] \('kimi-k2\.6'\) is a dialect "
                                             r"of family 'k2', not 'kx'"):
            family_dialects("kx")
    finally:
        for name in ("kx_family_pkg", "kx_family_pkg.family", "kx_family_pkg.dialects"):
            sys.modules.pop(name, None)
