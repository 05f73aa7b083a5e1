"""The server hooks of every registered family: what :mod:`kimi_chat.servers` asks of a family
is there for each one, so a new family is checked by registering it. Hooks that call into vLLM or SGLang
are exercised by ``tests/adapters``."""

from __future__ import annotations


import pytest

from kimi_chat import markers as M
from kimi_chat.dialects import DIALECTS
from kimi_chat.families import REGISTRY, family_of
from kimi_chat.servers.family import choose_family, tokenizer_family
from kimi_chat.servers.hooks import ServingHooks, serving_of
from kimi_chat.servers.stages import BodyStage, ReasoningStage, tools_as_dicts

HOOKS = sorted(n for n in {*ServingHooks.__annotations__, *vars(ServingHooks)}
               if not n.startswith("_"))


@pytest.mark.parametrize("family", sorted(REGISTRY))
def test_every_family_has_every_server_hook(family: str) -> None:
    hooks = serving_of(family)
    missing = [n for n in HOOKS if not hasattr(hooks, n)]
    assert not missing, f"{family}: {hooks.__name__} lacks {missing}"  # type: ignore[attr-defined]
    assert serving_of(family_of(family)) is hooks


@pytest.mark.parametrize("family", sorted(REGISTRY))
def test_the_stages_take_a_record_or_a_name(family: str) -> None:
    record = family_of(family)
    assert ReasoningStage(prefilled=True, family=record).family == family
    assert BodyStage(tools=None, after_reasoning=True, family=record).family == family


class _Vocab:
    """A tokenizer as far as family detection reads it (``convert_tokens_to_ids``)."""

    def __init__(self, ids: dict[str, int]) -> None:
        self.ids = ids

    def convert_tokens_to_ids(self, text: str) -> int:
        return self.ids.get(text, 0)


def test_detection_returns_the_record() -> None:
    k3 = _Vocab({M.K3_OPEN.text: M.K3_OPEN.id, M.K3_END_OF_MSG.text: M.K3_END_OF_MSG.id})
    assert tokenizer_family(k3) is family_of("k3")
    assert tokenizer_family(_Vocab({M.K3_OPEN.text: M.K3_OPEN.id})) is family_of("k2")  # one of the two
    assert choose_family(None) is family_of("k2")
    assert choose_family(_Vocab({}), {"kimi_chat_dialect": "kimi-k3"}) is family_of("k3")


class _Tool:
    """A framework's tool model: ``model_dump`` with pydantic's ``exclude_none``."""

    def __init__(self, **fields: object) -> None:
        self.fields = fields

    def model_dump(self, exclude_none: bool = False) -> dict[str, object]:
        return {k: v for k, v in self.fields.items() if not (exclude_none and v is None)}


def test_tools_as_dicts_leaves_none_fields_out_and_keeps_dicts() -> None:
    plain = {"type": "function", "function": {"name": "a"}}
    got = tools_as_dicts([plain, _Tool(type="function", function={"name": "b"}, strict=None)])
    assert got == [plain, {"type": "function", "function": {"name": "b"}}]
    assert got[0] is plain
    assert tools_as_dicts([]) is None and tools_as_dicts(None) is None


FAMILY_DIALECTS = sorted((d.family, name) for name, d in DIALECTS.items())


@pytest.mark.parametrize("family, dialect", FAMILY_DIALECTS)
def test_the_records_module_paths_hold_what_their_users_read(family: str, dialect: str) -> None:
    """``serving.pending_prompt_tokens`` and ``grammar.constraint`` (the family package's accessor, imported on
    first use by :mod:`kimi_chat.grammar.request`) hold what their readers
    (:func:`kimi_chat.servers.contract.prompt_tokens`, the constraint) call, for every dialect of the family."""
    record = family_of(family)
    d = DIALECTS[dialect]
    assert record.serving.pending_prompt_tokens([]) == 0  # no prompt, nothing pending
    constraint = record.grammar.constraint()
    assert {"TRANSLATOR", "GRAMMAR", "special_markers", "end_markers"} <= set(constraint.__all__)
    family_markers = {m.text for m in record.markers.all}
    specials = constraint.special_markers(d)
    assert specials and all(m.id is not None and m.text in family_markers for m in specials)
    ends = constraint.end_markers(d)
    assert ends and set(ends) <= {m.text for m in specials}
    # the end of the turn the constraint allows is the one a prompt of this family ends an assistant turn with
    assert record.markers.turn_end.text in ends
