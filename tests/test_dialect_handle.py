"""The dialect is the handle: ``get_dialect`` takes a dialect name, an alias or a published model name and returns
one object whose methods render, tokenize, parse, stream, constrain and lint in that dialect, with its facts; the
registry refuses a name, alias or model name that is another dialect's already."""

from __future__ import annotations

import dataclasses

import pytest

import kimi_chat
from kimi_chat import (DIALECTS, Dialect, StreamParser, UnknownDialectError, get_dialect, lint, parse, register_dialect,
                       render, unregister_dialect)
from kimi_chat import markers as M
from kimi_chat.dialects import ALIASES, K2_DIALECTS, MODEL_NAMES, dialect_for_model
from kimi_chat.errors import ReferenceDataError

from conftest import needs_reference

MSGS = [{"role": "user", "content": "What is 2+2?"}]

PUBLISHED = {
    # the published spellings of each model (Hugging Face id, without the organisation, the API's lower case)
    "kimi-k2-instruct-0905": ["moonshotai/Kimi-K2-Instruct-0905", "Kimi-K2-Instruct-0905", "kimi-k2-instruct-0905",
                              "kimi-k2-0905-preview"],
    "kimi-k2-thinking@rev1": ["moonshotai/Kimi-K2-Thinking", "Kimi-K2-Thinking", "kimi-k2-thinking"],
    "kimi-k2.5": ["moonshotai/Kimi-K2.5", "Kimi-K2.5", "kimi-k2.5"],
    "kimi-k2.6": ["moonshotai/Kimi-K2.6", "Kimi-K2.6", "kimi-k2.6"],
    "kimi-k2.7-code": ["moonshotai/Kimi-K2.7-Code", "Kimi-K2.7-Code", "kimi-k2.7-code",
                       "mlx-community/Kimi-K2.7-Code-4bit"],
    "kimi-k3": ["moonshotai/Kimi-K3", "Kimi-K3", "kimi-k3"],
}


@pytest.mark.parametrize("dialect, names", sorted(PUBLISHED.items()))
def test_published_model_names_name_their_dialect(dialect: str, names: list[str]) -> None:
    for name in names:
        assert get_dialect(name) is DIALECTS[dialect], name
        assert dialect_for_model(name) == dialect, name


def test_every_name_and_alias_is_its_record() -> None:
    for name, d in DIALECTS.items():
        assert get_dialect(name) is d
        assert get_dialect(d) is d
        for alias in d.aliases:
            assert get_dialect(alias) is d
        for model in d.model_names:
            assert get_dialect(model) is d


def test_the_free_functions_take_model_names() -> None:
    assert render(MSGS, dialect="moonshotai/Kimi-K2.6") == render(MSGS, dialect="kimi-k2.6")
    out = "Let me see.</think>4"
    assert parse(out, dialect="Kimi-K2.7-Code") == parse(out, dialect="kimi-k2.7-code")
    assert StreamParser("moonshotai/Kimi-K3").dialect is DIALECTS["kimi-k3"]
    assert lint(MSGS, dialect="moonshotai/Kimi-K2.5", thinking2=True) == lint(MSGS, dialect="kimi-k2.5", thinking2=True)


def test_the_cli_dialect_flag_takes_a_model_name(capsys: pytest.CaptureFixture[str], tmp_path) -> None:
    import json

    from kimi_chat.cli import main

    f = tmp_path / "msgs.json"
    f.write_text(json.dumps(MSGS))
    assert main(["render", "-d", "moonshotai/Kimi-K2.7-Code", str(f)]) == 0
    assert capsys.readouterr().out == render(MSGS, dialect="kimi-k2.7-code")


def test_an_unknown_name_says_the_closest_and_the_known_ones() -> None:
    with pytest.raises(UnknownDialectError) as e:
        get_dialect("kimi-k2.66")
    message = str(e.value)
    assert message.startswith("unknown dialect 'kimi-k2.66'")
    assert "did you mean 'kimi-k2.6'" in message
    assert all(name in message for name in DIALECTS)
    with pytest.raises(UnknownDialectError) as e:
        get_dialect("llama-3")
    assert "did you mean" not in str(e.value) and "kimi-k2.6" in str(e.value)


def test_names_that_imply_no_dialect_stay_unknown() -> None:
    for name in ("kimi-k2.7", "moonshotai/Kimi-K2.7", "kimi-k3.1", "Kimi-K2-Base", "Kimi-K2.6-Base", "gpt-4o"):
        with pytest.raises(UnknownDialectError):
            get_dialect(name)


@pytest.mark.parametrize("name", list(DIALECTS))
def test_the_methods_are_the_stages_with_this_dialect(name: str) -> None:
    d = get_dialect(name)
    assert d.render(MSGS) == render(MSGS, dialect=name)
    assert d.render(MSGS, add_generation_prompt=False) == render(MSGS, dialect=name, add_generation_prompt=False)
    assert "".join(s.text for s in d.render_segments(MSGS)) == d.render(MSGS)
    assert d.lint(MSGS, unread_option=True) == lint(MSGS, dialect=name, unread_option=True)
    out = "The answer is 4."
    assert d.parse(out) == parse(out, dialect=name)
    p = d.stream()
    assert isinstance(p, StreamParser) and p.dialect is d
    p.feed(out)
    p.finish()
    assert p.message == parse(out, dialect=name)


def test_the_facts() -> None:
    policy = {name: d.reasoning_policy for name, d in DIALECTS.items()}
    assert policy == {
        "kimi-k2-instruct@rev1": "none", "kimi-k2-instruct@rev2": "none", "kimi-k2-instruct-0905": "none",
        "kimi-k2-thinking@rev1": "history-split",  # <think> after the last plain assistant turn only
        "kimi-k2.5": "history-split",  # no preserve_thinking
        "kimi-k2.6": "history-split-or-all",  # preserve_thinking keeps every turn's
        "kimi-k2.7-code": "all",  # every turn's, always
        "kimi-k3": "all",  # the K3 encoder writes every turn's reasoning
    }
    assert {n for n, d in DIALECTS.items() if d.thinking_switch} == {"kimi-k2.5", "kimi-k2.6", "kimi-k3"}
    for d in DIALECTS.values():
        assert d.family in ("k2", "k3") and d.status.value in ("verified", "single-source", "unverified",
                                                              "reconstructed")
        ends = d.end_markers
        assert (M.K3_END_OF_MSG.text in ends) if d.family == "k3" else (M.IM_END.text in ends), d.name
    assert get_dialect("kimi-k2.7-code").options == ()


@needs_reference
def test_the_tokenizer_is_the_reference_one_loaded_once() -> None:
    d = get_dialect("moonshotai/Kimi-K2.7-Code")
    tok = d.tokenizer()
    assert tok is d.tokenizer() is get_dialect("kimi-k2.6").tokenizer()  # the K2.6 tokenizer
    assert tok.token_to_id(M.THINK_BEGIN.text) == M.THINK_BEGIN.id
    rendered = d.render_tokens(MSGS)
    assert rendered.ids == tok.encode(d.render(MSGS))


def test_a_missing_tokenizer_says_the_fix(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ReferenceDataError, match="KIMI_CHAT_REFERENCE_DIR") as e:
        get_dialect("kimi-k2.5").tokenizer(reference_dir=tmp_path)  # an empty directory: no tokenizer files
    assert "kimi-k2.5" in str(e.value) and "from_dir" in str(e.value)


def test_the_registry_refuses_a_name_another_dialect_has() -> None:
    k26 = DIALECTS["kimi-k2.6"]
    before = (dict(DIALECTS), dict(K2_DIALECTS), dict(ALIASES), dict(MODEL_NAMES))
    clashes = [
        dataclasses.replace(k26, model_names=()),  # the name itself
        dataclasses.replace(k26, name="kimi-k2.6-copy", model_names=()),  # no clash: it would register
        dataclasses.replace(k26, name="kimi-k2.6-copy", model_names=("Kimi-K2.6",)),  # K2.6's model name
        dataclasses.replace(k26, name="kimi-k2.6-copy", model_names=(), aliases=("kimi-k2-thinking",)),  # an alias
        dataclasses.replace(k26, name="kimi-k2.6-copy", model_names=(), aliases=("moonshotai/kimi-k2.5",)),
        dataclasses.replace(k26, name="Kimi-K3", model_names=()),  # K3's model name, as a name
    ]
    for i, record in enumerate(clashes):
        if i == 1:
            continue
        with pytest.raises(ValueError, match="already"):
            register_dialect(record)
    with pytest.raises(ValueError, match="no format family"):
        register_dialect(dataclasses.replace(k26, name="kimi-k9", model_names=(), family="k9"))  # type: ignore[arg-type]
    assert (dict(DIALECTS), dict(K2_DIALECTS), dict(ALIASES), dict(MODEL_NAMES)) == before
    with pytest.raises(UnknownDialectError):
        unregister_dialect("kimi-k2.6-copy")


def test_dir_is_the_public_api() -> None:
    names = dir(kimi_chat)
    assert names == sorted([*kimi_chat.__all__, "__version__"])
    assert "annotations" not in names and not [n for n in names if n.startswith("_") and n != "__version__"]
    for name in kimi_chat.__all__:
        assert getattr(kimi_chat, name) is not None, name
    assert isinstance(get_dialect("kimi-k2.6"), kimi_chat.Dialect) and kimi_chat.Dialect is Dialect


def test_a_served_models_name_decides_what_its_template_cannot_tell() -> None:
    from kimi_chat.dialects import dialect_for_served_model as served

    # K2.7-Code's model carries K2.6's format: a K2.6 template (or one not identified) is served as K2.7-Code
    assert served(["moonshotai/Kimi-K2.7-Code"], "kimi-k2.6") == "kimi-k2.7-code"
    assert served(["", "Kimi-K2.7-Code-Q4_K_M"], None) == "kimi-k2.7-code"
    # otherwise the template decides, and a name alone does not serve a dialect that has a template of its own
    assert served(["Kimi-K2-Thinking"], "kimi-k2-instruct-0905") == "kimi-k2-instruct-0905"
    assert served(["moonshotai/Kimi-K2.7-Code"], "kimi-k2-instruct-0905") == "kimi-k2-instruct-0905"
    assert served(["Kimi-K2.6"], "kimi-k2.6") == "kimi-k2.6"
    assert served(["Kimi-K2.6"], None) is None
    assert served(["some-model"], "kimi-k2.5") == "kimi-k2.5"


@needs_reference
def test_a_missing_tiktoken_says_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from kimi_chat import dialects

    monkeypatch.setattr(dialects, "_TOKENIZERS", {})  # nothing loaded yet
    monkeypatch.setitem(sys.modules, "tiktoken", None)  # `import tiktoken` fails as where it is not installed
    with pytest.raises(ModuleNotFoundError, match=r"kimi-k2\.6 needs tiktoken: pip install -e '\.\[tokenizer\]' \(in the kimi_chat checkout\)"):
        get_dialect("kimi-k2.6").tokenizer()
