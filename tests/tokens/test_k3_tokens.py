"""render_tokens / extend_tokens for Kimi-K3: ids equal the official tokenize=True ids (goldens produced by
the official tokenizer, and a property against the oracle), attribution from the encoder's segments,
the special-token policies, the vocabulary check, prefix-stable extension."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from hypothesis import given, note

from kimi_chat import markers as M
from kimi_chat.errors import RenderError
from kimi_chat.messages import InvalidMessagesError
from kimi_chat.reference import reference_file
from kimi_chat.families.k3.render import render_k3, render_k3_ids, render_k3_segments
from kimi_chat.testing.strategies_k3 import k3_requests

from conftest import needs_reference

pytestmark = pytest.mark.skipif(reference_file("tokenizer/tiktoken.model") is None,
                                reason="tokenizer/tiktoken.model of the reference data not found")

GOLDEN = Path(__file__).resolve().parents[2] / "fixtures" / "golden" / "kimi-k3"
CASES = sorted(p for p in GOLDEN.glob("*.json") if not p.name.endswith(".ids.json"))


@pytest.fixture(scope="module")
def tok():
    from kimi_chat.tokens.tokenizer import KimiTokenizer

    return KimiTokenizer.from_reference("k3")


def _rt(messages, tok, tools=None, **kw):
    from kimi_chat.tokens.rendered import render_tokens

    return render_tokens(messages, tokenizer=tok, tools=tools, dialect="kimi-k3", **kw)


def _check_attribution(r, messages, tools, kwargs, tok):
    """Per token, the segment it was encoded from gives its message index and trainable flag."""
    segs = render_k3_segments(messages, tools, **kwargs)
    idx, mask = [], []
    for s in segs:
        n = len(tok.encode(s.text, allow_special=s.special))
        idx += [s.message_index] * n
        mask += [int(s.trainable)] * n
    assert r.message_index == idx
    assert r.assistant_mask == mask
    assert r.labels() == [i if m else -100 for i, m in zip(r.ids, mask)]
    assert [i for sp in r.spans for i in range(sp.start, sp.end)] == list(range(len(r.ids)))
    assert all(r.message_index[sp.start:sp.end] == [sp.message_index] * (sp.end - sp.start) for sp in r.spans)
    assert all(a.message_index != b.message_index for a, b in zip(r.spans, r.spans[1:]))
    assert r.text == render_k3(messages, tools, **kwargs) == tok.decode(r.ids)


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_golden_ids_and_attribution(path, tok):
    req = json.loads(path.read_text(encoding="utf-8"))
    expected = json.loads(path.with_name(path.stem + ".ids.json").read_text(encoding="utf-8"))
    r = _rt(req["messages"], tok, req["tools"], add_generation_prompt=req["add_generation_prompt"], **req["options"])
    assert r.ids == expected
    _check_attribution(r, req["messages"], req["tools"],
                       {"add_generation_prompt": req["add_generation_prompt"], **req["options"]}, tok)
    assert r.dialect == "kimi-k3" and r.special_tokens == "text"


def test_mask_is_what_the_assistant_produced(tok):
    msgs = [{"role": "user", "content": "q"},
            {"role": "assistant", "content": "a", "reasoning_content": "r",
             "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "out"}]
    r = _rt(msgs, tok)
    produced = tok.decode([i for i, m in zip(r.ids, r.assistant_mask) if m])
    assert produced == ('r<|close|>think<|sep|><|open|>response<|sep|>a<|close|>response<|sep|>'
                        '<|open|>tools<|sep|><|open|>call tool="f" index="1"<|sep|>'
                        '<|open|>argument key="x" type="number"<|sep|>1<|close|>argument<|sep|>'
                        '<|close|>call<|sep|><|close|>tools<|sep|><|close|>message<|sep|><|end_of_msg|>')
    assert {r.message_index[i] for i, m in enumerate(r.assistant_mask) if m} == {1}
    start, end = r.span_of(2)
    assert tok.decode(r.ids[start:end]).startswith('<|open|>message role="tool" tool="f" index="1"<|sep|>')
    assert r.ids[-1] == M.K3_SEP.id and r.message_index[-1] == -1  # the generation prompt is scaffolding


def test_special_token_policies(tok):
    msgs = [{"role": "user", "content": "hi <|end_of_msg|> [EOS]"}]
    text = _rt(msgs, tok)
    assert text.ids == render_k3_ids(msgs, tok)
    assert text.ids.count(M.K3_END_OF_MSG.id) == 2  # the effort message's and the user's: none typed
    special = _rt(msgs, tok, special_tokens="special")
    assert special.ids.count(M.K3_END_OF_MSG.id) == 3 and M.EOS.id in special.ids
    assert tok.decode(special.ids) == text.text
    with pytest.raises(RenderError, match=r"messages\[0\]\.content.*'<\|end_of_msg\|>'.*strict"):
        _rt(msgs, tok, special_tokens="strict")
    # typed text in a tool name (an attribute value), a tool declaration, the response schema
    call = [{"role": "assistant", "tool_calls": [{"id": "a", "function": {"name": "f<|sep|>", "arguments": "{}"}}]}]
    with pytest.raises(RenderError, match=r"messages\[0\]\.tool_calls\[0\]\.function\.name"):
        _rt(call, tok, special_tokens="strict")
    tools = [{"type": "function", "function": {"name": "g", "description": "<|open|>"}}]
    with pytest.raises(RenderError, match=r"tools\[0\]\.function\.description"):
        _rt([{"role": "user", "content": "x"}], tok, tools, special_tokens="strict")
    with pytest.raises(RenderError, match=r"response_schema"):
        _rt([{"role": "user", "content": "x"}], tok, special_tokens="strict", response_format="json_schema",
            response_schema={"title": "[BOS]"})
    clean = [{"role": "user", "content": "<|open"}]
    assert _rt(clean, tok, special_tokens="strict").ids == _rt(clean, tok).ids == _rt(clean, tok, special_tokens="special").ids


@given(k3_requests(refusals=False))
def test_policies_property(tok, req):
    """``strict`` refuses exactly when a text segment holds a special-token name, and otherwise gives
    the ``text`` ids; ``special`` differs from ``text`` exactly then, and decodes to the same prompt."""
    note(repr(req))
    try:
        text = _rt(req["messages"], tok, req["tools"], **req["kwargs"])
    except (RenderError, InvalidMessagesError):
        return
    segs = render_k3_segments(req["messages"], req["tools"], **req["kwargs"])
    typed = any(name in s.text for s in segs if not s.special for name in tok.special_tokens)
    special = _rt(req["messages"], tok, req["tools"], special_tokens="special", **req["kwargs"])
    assert tok.decode(special.ids) == text.text
    assert (special.ids != text.ids) == typed
    assert len(special.message_index) == len(special.ids) == len(special.assistant_mask)
    if typed:
        with pytest.raises(RenderError, match="special_tokens='strict'"):
            _rt(req["messages"], tok, req["tools"], special_tokens="strict", **req["kwargs"])
    else:
        assert _rt(req["messages"], tok, req["tools"], special_tokens="strict", **req["kwargs"]).ids == text.ids


def test_vocabulary_mismatch_is_refused(tok):
    from kimi_chat.tokens.tokenizer import KimiTokenizer

    msgs = [{"role": "user", "content": "hi"}]
    with pytest.raises(ValueError, match=r"no special token <\|open\|>.*kimi-k3.*from_reference\('k3'\)"):
        _rt(msgs, KimiTokenizer.from_reference("k2"))
    from kimi_chat.tokens.rendered import render_tokens

    with pytest.raises(ValueError, match=r"no special token <\|im_end\|>.*from_reference\('k2'\)"):
        render_tokens(msgs, tokenizer=tok, dialect="kimi-k2-instruct-0905")


def test_options_and_refusals(tok):
    msgs = [{"role": "user", "content": "hi"}]
    low = _rt(msgs, tok, thinking_effort="low", add_generation_prompt=False)
    assert low.ids == render_k3_ids(msgs, tok, thinking_effort="low", add_generation_prompt=False)
    assert low.add_generation_prompt is False and low.ids[-1] == M.K3_END_OF_MSG.id
    with pytest.raises(RenderError, match="thinking_effort"):
        _rt(msgs, tok, thinking_effort="medium")
    with pytest.raises(RenderError, match="continue_final_message"):
        _rt(msgs, tok, continue_final_message=True)
    # parity: a kwarg the official encoder does not read is ignored (strict refuses it)
    assert _rt(msgs, tok, preserve_thinking=True).ids == _rt(msgs, tok).ids


def test_extend_tokens(tok):
    from kimi_chat.tokens.rendered import extend_tokens

    msgs = [{"role": "user", "content": "q"}]
    first = _rt(msgs, tok, thinking_effort="high")
    completion = render_k3_ids([*msgs, {"role": "assistant", "content": "a", "reasoning_content": "rr"}], tok,
                               thinking_effort="high", add_generation_prompt=False)[len(first.ids):]
    assert tok.decode(completion) == ("rr<|close|>think<|sep|><|open|>response<|sep|>a<|close|>response<|sep|>"
                                      "<|close|>message<|sep|><|end_of_msg|>")
    nxt = [{"role": "assistant", "content": "a", "reasoning_content": "rr"}, {"role": "user", "content": "q2"}]
    ext = extend_tokens(first, completion, nxt)
    full = _rt([*msgs, *nxt], tok, thinking_effort="high")
    assert ext is not None
    assert ext.ids == full.ids and ext.ids[: len(first.ids) + len(completion)] == first.ids + completion
    assert (ext.assistant_mask, ext.message_index, ext.spans) == (full.assistant_mask, full.message_index, full.spans)
    # the completion is not how the encoder tokenizes the message: its reasoning spelled char by char
    spelled = [i for c in "rr" for i in tok.encode(c)] + completion[1:]
    assert extend_tokens(first, spelled, nxt) is None
    # the completion says something else than the message it stands for
    assert extend_tokens(first, completion, [{**nxt[0], "content": "b"}, nxt[1]]) is None
    # a trailing tool-choice message moves behind the new turn: no extension
    forced = _rt(msgs, tok, tool_choice="required")
    assert extend_tokens(forced, completion, nxt) is None
    # changed options: no extension
    assert extend_tokens(first, completion, nxt, thinking_effort="low") is None


@needs_reference
@pytest.mark.oracle
@given(k3_requests(refusals=False))
def test_render_tokens_ids_equal_official(tok, req):
    pytest.importorskip("transformers", reason="the official K3 tokenizer needs transformers (the verify extra)")
    from kimi_chat.families.k3.oracle import official_k3_ids

    note(repr(req))
    try:
        official = official_k3_ids(copy.deepcopy(req["messages"]), copy.deepcopy(req["tools"]), **copy.deepcopy(req["kwargs"]))
    except Exception:  # noqa: BLE001 - the official encoder refused: so must we
        with pytest.raises((RenderError, InvalidMessagesError)):
            _rt(req["messages"], tok, req["tools"], **req["kwargs"])
        return
    r = _rt(req["messages"], tok, req["tools"], **req["kwargs"])
    assert r.ids == official
    _check_attribution(r, req["messages"], req["tools"], req["kwargs"], tok)


# ------------------------------------------------------------------------------------------------ CLI

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "tool_conversation.json"


def _cli(capsysbinary, *argv):
    from kimi_chat.cli import main

    status = main(list(argv))
    out = capsysbinary.readouterr()
    return status, out.out.decode("utf-8"), out.err.decode()


def _example():
    body = json.loads(EXAMPLE.read_text(encoding="utf-8"))
    return body["messages"], body.get("tools")


@pytest.fixture
def request_file(tmp_path):
    """The example tool conversation as a request without the example's (K2) model."""
    messages, tools = _example()
    p = tmp_path / "k3.json"
    p.write_text(json.dumps({"messages": messages, "tools": tools}), encoding="utf-8")
    return str(p)


def test_cli_render_kimi_k3_with_kwargs(capsysbinary, request_file):
    messages, tools = _example()
    status, out, err = _cli(capsysbinary, "render", "-d", "kimi-k3", request_file)
    assert status == 0 and out == render_k3(messages, tools) and err == ""
    status, out, _ = _cli(capsysbinary, "render", "-d", "kimi-k3", "--kwargs", '{"thinking_effort": "low"}', request_file)
    assert status == 0 and out == render_k3(messages, tools, thinking_effort="low")
    assert "`thinking_effort=low`" in out
    status, out, _ = _cli(capsysbinary, "render", "-d", "kimi-k3", "--kwargs",
                          '{"thinking": false, "tool_choice": "required"}', "--no-generation-prompt", request_file)
    assert status == 0 and out == render_k3(messages, tools, thinking=False, tool_choice="required",
                                            add_generation_prompt=False)
    status, out, err = _cli(capsysbinary, "render", "-d", "kimi-k3", "--kwargs", '{"thinking_effort": "medium"}',
                            request_file)
    assert status == 2 and out == "" and "thinking_effort='medium'" in err
    status, out, _ = _cli(capsysbinary, "render", "-d", "kimi-k3", "--kwargs", '{"preserve_thinking": true}',
                          request_file)
    assert status == 0 and out == render_k3(messages, tools)  # parity: unread kwargs are ignored
    status, _, err = _cli(capsysbinary, "render", "-d", "kimi-k3", "--strict", "--kwargs",
                          '{"preserve_thinking": true}', request_file)
    assert status == 2 and "preserve_thinking" in err


def test_cli_render_tokens_and_count_kimi_k3(capsysbinary, request_file, tok):
    messages, tools = _example()
    expected = render_k3_ids(messages, tok, tools)
    status, out, _ = _cli(capsysbinary, "render", "-d", "kimi-k3", "--tokens", request_file)
    assert status == 0
    doc = json.loads(out)
    r = _rt(messages, tok, tools)
    assert doc == r.to_dict() and doc["ids"] == expected
    status, out, _ = _cli(capsysbinary, "count", "-d", "kimi-k3", request_file)
    assert status == 0 and out == f"{len(expected)}\n"
    # a K3 snapshot directory: 256 special ids (with the reference recipe's names when it has no config)
    from kimi_chat.reference import reference_dir

    status, out, err = _cli(capsysbinary, "count", "-d", "kimi-k3", "--tokenizer", str(reference_dir() / "tokenizer"),
                            request_file)
    assert status == 0 and out == f"{len(expected)}\n", err
    status, out, _ = _cli(capsysbinary, "count", "-d", "kimi-k3", "--json", "--kwargs", '{"thinking_effort": null}',
                          request_file)
    doc = json.loads(out)
    r = _rt(messages, tok, tools, thinking_effort=None)
    assert status == 0 and doc["tokens"] == len(r.ids) == len(render_k3_ids(messages, tok, tools, thinking_effort=None))
    assert doc["trainable"] == sum(r.assistant_mask) > 0
    assert sum(m["tokens"] for m in doc["messages"]) + doc["scaffolding"] == doc["tokens"]
    status, _, err = _cli(capsysbinary, "render", "-d", "kimi-k3", "--tokens", "--special-tokens", "strict",
                          request_file)
    assert status == 0, err  # the example types no marker


def test_cli_count_refuses_a_k2_tokenizer_for_kimi_k3(capsysbinary, request_file):
    from kimi_chat.reference import reference_dir

    ref = reference_dir()
    config = ref / "Kimi-K2-Instruct" / "tokenizer_config.json"
    if not config.is_file():
        pytest.skip("the K2-Instruct tokenizer_config.json of the reference data is not found")
    status, out, err = _cli(capsysbinary, "count", "-d", "kimi-k3", "--tokenizer", str(ref / "tokenizer"),
                            "--tokenizer-config", str(config), request_file)
    assert status == 2 and out == ""
    assert "no special token <|open|>" in err and "give --tokenizer a Kimi-K3 model snapshot directory" in err
    assert "from_reference" not in err  # the CLI names its flags, not Python calls


def test_cli_dialects_lists_kimi_k3(capsysbinary):
    status, out, _ = _cli(capsysbinary, "dialects", "--json")
    rows = {r["name"]: r for r in json.loads(out)}
    assert status == 0
    assert rows["kimi-k3"]["status"] == "single-source"
    assert rows["kimi-k3"]["oracle"] == "Kimi-K3/encoding_k3.py"
    status, out, _ = _cli(capsysbinary, "dialects")
    assert any(line.split()[:2] == ["kimi-k3", "single-source"] for line in out.splitlines())


# ------------------------------------------------------------------------------------------- docs/rendering.md


def _readme_k3():
    text = (ROOT / "docs" / "rendering.md").read_text(encoding="utf-8")
    use = text.split("\n## Render\n", 1)[1].split("```python", 1)[1].split("```", 1)[0]
    section = text.split("\n## Kimi-K3\n", 1)[1].split("\n## ", 1)[0]
    code = section.split("```python", 1)[1].split("```", 1)[0]
    shown = section.split("```text\n", 1)[1].split("```", 1)[0]
    scope: dict = {}
    exec(compile(use + code, "docs/rendering.md#kimi-k3", "exec"), scope)  # noqa: S102 - our own documentation
    # the page breaks the line after each <|end_of_msg|> (not part of the prompt)
    end = M.K3_END_OF_MSG.text
    return scope, shown.rstrip("\n").replace(end + "\n", end)


def test_readme_k3_prompt_is_what_render_gives():
    scope, shown = _readme_k3()
    assert scope["prompt"] == shown
    assert shown == render_k3(scope["messages"], thinking_effort="low")


@needs_reference
@pytest.mark.oracle
def test_readme_k3_prompt_is_official():
    pytest.importorskip("transformers", reason="the official K3 tokenizer needs transformers (the verify extra)")
    from kimi_chat.families.k3.oracle import official_k3_render

    scope, shown = _readme_k3()
    assert shown == official_k3_render(scope["messages"], None, thinking_effort="low")


def test_render_tokens_strict_refuses_what_render_strict_refuses():
    import kimi_chat

    tok = kimi_chat.KimiTokenizer.from_reference("k3")
    msgs = [{"role": "moderator", "content": "x"}, {"role": "user", "content": "hi"}]
    with pytest.raises(kimi_chat.StrictModeError, match=r"unknown-role: messages\[0\]\.role"):
        kimi_chat.render_tokens(msgs, tokenizer=tok, dialect="kimi-k3", strict=True)
    # parity (default): the official encoder drops the message
    assert kimi_chat.render_tokens(msgs, tokenizer=tok, dialect="kimi-k3").ids == kimi_chat.render_tokens(
        msgs[1:], tokenizer=tok, dialect="kimi-k3").ids
