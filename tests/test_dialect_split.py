"""The dialect record and the handle: :mod:`kimi_chat.dialect_records` holds the records and the registry (what the
stages import), :mod:`kimi_chat.dialects` the handle (a record with the stages' methods) and re-exports the
records' names. Once the handle is imported the registry holds handles, so a record registered or passed anywhere
comes back as a handle, the same object by every name."""

from __future__ import annotations

import dataclasses

import kimi_chat
from kimi_chat import dialect_records, dialects
from kimi_chat.dialect_records import DialectRecord

MSGS = [{"role": "user", "content": "What is 2+2?"}]


def _plain(d: DialectRecord, **changes: object) -> DialectRecord:
    """``d``'s fields as a plain record (not a handle), with ``changes``."""
    fields = {f.name: getattr(d, f.name) for f in dataclasses.fields(DialectRecord)}
    return DialectRecord(**{**fields, **changes})


def test_the_handle_module_reexports_the_records() -> None:
    for name in ("DIALECTS", "K2_DIALECTS", "ALIASES", "MODEL_NAMES", "DEFAULT_DIALECT", "Status", "DialectRecord",
                 "dialect_for_model", "dialect_names", "dialect_for_served_model", "model_key"):
        assert getattr(dialects, name) is getattr(dialect_records, name), name
    assert issubclass(dialects.Dialect, DialectRecord) and kimi_chat.Dialect is dialects.Dialect


def test_the_registry_holds_handles() -> None:
    for name, d in dialect_records.DIALECTS.items():
        assert type(d) is dialects.Dialect, name
        assert dialect_records.get_dialect(name) is d and kimi_chat.get_dialect(name) is d
    assert dialects.KIMI_K3 is dialect_records.DIALECTS["kimi-k3"]


def test_a_plain_record_becomes_a_handle() -> None:
    k26 = kimi_chat.get_dialect("kimi-k2.6")
    plain = _plain(k26)
    assert type(plain) is DialectRecord and not hasattr(plain, "render")
    handle = dialect_records.get_dialect(plain)
    assert type(handle) is dialects.Dialect and handle == k26
    assert handle.render(MSGS) == k26.render(MSGS)
    assert dialects.Dialect.of(k26) is k26


def test_a_plain_record_registered_is_served_by_its_handle() -> None:
    before = dict(dialect_records.DIALECTS), dict(dialect_records.MODEL_NAMES)
    plain = _plain(kimi_chat.get_dialect("kimi-k2.6"), name="kimi-k2.6-split", model_names=("example/Kimi-Split",))
    held = dialect_records.register_dialect(plain)
    try:
        assert type(held) is dialects.Dialect and kimi_chat.get_dialect("Kimi-Split") is held
        assert kimi_chat.render(MSGS, dialect="kimi-k2.6-split") == kimi_chat.render(MSGS, dialect="kimi-k2.6")
    finally:
        assert kimi_chat.unregister_dialect("kimi-k2.6-split") is held
    assert (dict(dialect_records.DIALECTS), dict(dialect_records.MODEL_NAMES)) == before
