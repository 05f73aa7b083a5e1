"""``dialect_for_model`` over every published Kimi model name: the Hugging Face ids
of moonshotai, with and without the organisation, in other cases and spellings (API names, GGUF
``general.name``), and the Kimi models of other formats, which imply no K2/K3 dialect."""

from __future__ import annotations

import pytest

from kimi_chat.dialects import DIALECTS, dialect_for_model

PUBLISHED = {
    # Hugging Face repository (moonshotai/...) -> the dialect its chat format is
    "Kimi-K3": "kimi-k3",
    "Kimi-K2.6": "kimi-k2.6",
    "Kimi-K2.5": "kimi-k2.5",
    "Kimi-K2-Thinking": "kimi-k2-thinking@rev1",
    "Kimi-K2-Instruct-0905": "kimi-k2-instruct-0905",
    "Kimi-K2-Instruct": None,  # its template had several revisions (rev1, rev2, ...): the name does not tell
    "Kimi-K2-Base": None,  # a base model: no chat format to imply
    # Kimi models of other formats (no K2/K3 in the name)
    "Kimi-VL-A3B-Thinking": None,
    "Kimi-VL-A3B-Instruct": None,
    "Kimi-Linear-48B-A3B-Instruct": None,
    "Kimi-Dev-72B": None,
    "Kimi-Audio-7B-Instruct": None,
}


def spellings(name: str) -> list[str]:
    return [name, f"moonshotai/{name}", name.lower(), name.upper(), f"moonshotai/{name}".lower(),
            name.replace("-", "_"), name.replace("-", " "), f"unsloth/{name}-GGUF"]


@pytest.mark.parametrize("name, dialect", sorted(PUBLISHED.items()))
def test_published_names(name, dialect):
    for spelling in spellings(name):
        assert dialect_for_model(spelling) == dialect, spelling
    assert dialect is None or dialect in DIALECTS


@pytest.mark.parametrize("name, dialect", [
    ("kimi-k3", "kimi-k3"), ("Kimi K3", "kimi-k3"), ("KimiK3", "kimi-k3"),
    ("kimi-k2.6", "kimi-k2.6"), ("Kimi-K2-6-GGUF", "kimi-k2.6"), ("Kimi_K26", "kimi-k2.6"),
    ("kimi-k2.5", "kimi-k2.5"), ("Kimi_K25", "kimi-k2.5"),
    ("kimi-k2-thinking", "kimi-k2-thinking@rev1"), ("kimi-k2-thinking-turbo", "kimi-k2-thinking@rev1"),
    ("kimi-k2-0905-preview", "kimi-k2-instruct-0905"), ("Kimi K2 Instruct 0905", "kimi-k2-instruct-0905"),
    ("kimi-k2-0711-preview", None), ("kimi-k2-turbo-preview", None),  # which revision: not told
    ("kimi-thinking-preview", None), ("kimi-latest", None),  # Kimi API models of the K1.5 line
    ("moonshot-v1-8k", None), ("gpt-4o", None), ("", None),
    ("kimi-k3.1", None), ("kimi-k2.7", None),  # an unknown version implies nothing
])
def test_api_and_gguf_names(name, dialect):
    assert dialect_for_model(name) == dialect


def test_cli_request_naming_kimi_k3_renders_k3(capsysbinary, tmp_path):
    """A request body naming ``moonshotai/Kimi-K3`` renders the K3 prompt (it rendered K2-0905's)."""
    import json

    from kimi_chat import render
    from kimi_chat.cli import main

    msgs = [{"role": "user", "content": "hi"}]
    body = tmp_path / "req.json"
    body.write_text(json.dumps({"model": "moonshotai/Kimi-K3", "messages": msgs}))
    assert main(["render", str(body)]) == 0
    out, err = capsysbinary.readouterr()
    assert out.decode() == render(msgs, dialect="kimi-k3")
    assert "model 'moonshotai/Kimi-K3' -> dialect kimi-k3" in err.decode()
