"""``kimi-chat count`` and the tokenizer helpers of the CLI."""

from __future__ import annotations

import argparse
import json

import pytest

pytest.importorskip("tiktoken", reason="the `tokenizer` extra (tiktoken) is not installed")

from kimi_chat.cli import main  # noqa: E402
from kimi_chat.cli.count import add_tokenizer_arguments, tokens_json  # noqa: E402
from kimi_chat.reference import reference_dir  # noqa: E402
from kimi_chat.prompt import render  # noqa: E402
from kimi_chat.tokens.tokenizer import KimiTokenizer  # noqa: E402
from kimi_chat.tokens.rendered import render_tokens  # noqa: E402

from conftest import needs_reference  # noqa: E402

REF = reference_dir()
pytestmark = [
    pytest.mark.oracle,
    needs_reference,  # the reference tokenizers (the skip reason names what is missing)
]

REQ = {
    "messages": [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "Sunny."},
        {"role": "user", "content": "typed <|im_end|> marker"},
    ],
}


@pytest.fixture
def req_file(tmp_path):
    p = tmp_path / "req.json"
    p.write_text(json.dumps(REQ))
    return str(p)


def test_count_matches_encode_of_render(req_file, capsys):
    tok = KimiTokenizer.from_reference("k2")
    assert main(["count", req_file]) == 0
    n = int(capsys.readouterr().out)
    # by default the typed marker is ordinary text (several tokens), where encode(render) makes it one id
    assert n == len(render_tokens(REQ["messages"], tokenizer=tok).ids) > len(tok.encode(render(REQ["messages"])))
    assert main(["count", req_file, "--special-tokens", "special"]) == 0
    assert int(capsys.readouterr().out) == len(tok.encode(render(REQ["messages"])))
    assert main(["count", req_file, "--no-generation-prompt", "--special-tokens", "special"]) == 0
    assert int(capsys.readouterr().out) == len(tok.encode(render(REQ["messages"], add_generation_prompt=False)))


def test_count_json_and_per_message(req_file, capsys):
    assert main(["count", req_file, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [m["role"] for m in doc["messages"]] == ["user", "assistant", "user"]
    assert doc["tokens"] == doc["scaffolding"] + sum(m["tokens"] for m in doc["messages"])
    assert doc["trainable"] == doc["messages"][1]["trainable"] == 4  # "S", "unny", ".", "<|im_end|>"
    assert main(["count", req_file, "--per-message"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert int(lines[0]) == doc["tokens"]
    assert lines[1].split() == ["message", "tokens", "trainable"]  # the table's header
    assert lines[2].split() == ["scaffolding", str(doc["scaffolding"]), "0"]
    rows = [ln.split() for ln in lines[3:]]
    assert rows == [[str(m["index"]), m["role"], str(m["tokens"]), str(m["trainable"])] for m in doc["messages"]]


def test_count_errors(req_file, tmp_path, capsys):
    assert main(["count", req_file, "--special-tokens", "strict"]) == 2
    assert "messages[2].content: contains the special-token text '<|im_end|>'" in capsys.readouterr().err
    assert main(["count", req_file, "--tokenizer", str(tmp_path / "missing")]) == 2
    assert "model snapshot directory not found" in capsys.readouterr().err
    assert main(["count", req_file, "--tokenizer-config", str(tmp_path / "x.json")]) == 2
    assert "--tokenizer-config needs --tokenizer DIR" in capsys.readouterr().err
    ok = main(["count", req_file, "--tokenizer", str(REF / "tokenizer"),
               "--tokenizer-config", str(REF / "Kimi-K2-Instruct" / "tokenizer_config.json")])
    assert ok == 0 and int(capsys.readouterr().out) > 0


def test_tokens_json_helper():
    p = argparse.ArgumentParser()
    add_tokenizer_arguments(p)
    args = p.parse_args([])
    req = {"messages": REQ["messages"], "tools": None, "dialect": "kimi-k2-instruct",
           "add_generation_prompt": True, "options": {}}
    doc = json.loads(tokens_json(args, req))
    assert set(doc) == {"ids", "spans", "assistant_mask"}
    assert doc["spans"][0] == {"message_index": -1, "start": 0, "end": doc["spans"][1]["start"]}
    assert doc["spans"][-1]["end"] == len(doc["ids"]) == len(doc["assistant_mask"])
