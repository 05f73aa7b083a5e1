"""Kimi-K3 renderer: goldens (from the official tokenizer, fixtures/golden/regenerate_k3.py), refusals,
segments and the K3 tokenizer. The golden text tests run without the reference data; the golden ids
tests need only ``tiktoken.model``; the last test re-checks the goldens against the oracle."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from kimi_chat import markers as M
from kimi_chat.errors import RenderError
from kimi_chat.families.k3.render import K3Segment, render_k3, render_k3_ids, render_k3_segments
from kimi_chat.messages import InvalidMessagesError
from kimi_chat.reference import reference_file

from conftest import needs_reference

GOLDEN = Path(__file__).resolve().parents[2] / "fixtures" / "golden" / "kimi-k3"
CASES = sorted(p for p in GOLDEN.glob("*.json") if not p.name.endswith(".ids.json"))
IDS = [f"kimi-k3/{p.stem}" for p in CASES]
HAS_TIKTOKEN = reference_file("tokenizer/tiktoken.model") is not None
needs_tiktoken = pytest.mark.skipif(not HAS_TIKTOKEN, reason="tokenizer/tiktoken.model of the reference data not found")


def _load(path: Path):
    req = json.loads(path.read_text(encoding="utf-8"))
    kwargs = {"add_generation_prompt": req["add_generation_prompt"], **req["options"]}
    return req, kwargs


@pytest.fixture(scope="module")
def tok():
    from kimi_chat.tokens.tokenizer import KimiTokenizer

    return KimiTokenizer.from_reference("k3")


def test_goldens_cover_the_format():
    assert len(CASES) >= 35
    texts = {p.stem: p.with_suffix(".txt").read_bytes().decode("utf-8") for p in CASES}
    every = "".join(texts.values())
    for needle in ('type="tool-declare"', "## New Tools Available", 'type="thinking-effort"', "thinking_effort=low",
                   "thinking_effort=high", "thinking_effort=max", 'type="tool-choice"', "tool_choice=none",
                   "tool_choice=required", "response_format=json_object", "response_format=json_schema",
                   '<|open|>json type="object"<|sep|>', 'type="boolean"', 'type="null"', 'type="number"',
                   'type="array"', 'type="object"', 'type="string"', 'role="tool" tool="', ' name="',
                   M.K3_IMAGE_PLACEHOLDER.text, "&quot;", "&amp;"):
        assert needle in every, needle
    assert texts["no_generation_prompt"].endswith(M.K3_END_OF_MSG.text)
    assert texts["thinking_off"].endswith('<|open|>response<|sep|>') and "<|open|>think" not in texts["thinking_off"]
    assert "dropped" not in texts["developer_role_dropped"]


@pytest.mark.parametrize("path", CASES, ids=IDS)
def test_golden_text(path):
    req, kwargs = _load(path)
    expected = path.with_suffix(".txt").read_bytes().decode("utf-8")
    assert render_k3(req["messages"], req["tools"], **kwargs) == expected
    segments = render_k3_segments(req["messages"], req["tools"], **kwargs)
    assert "".join(s.text for s in segments) == expected


@needs_tiktoken
@pytest.mark.parametrize("path", CASES, ids=IDS)
def test_golden_ids(path, tok):
    req, kwargs = _load(path)
    expected = json.loads(path.with_name(path.stem + ".ids.json").read_text(encoding="utf-8"))
    assert render_k3_ids(req["messages"], tok, req["tools"], **kwargs) == expected
    # and the ids are the segments encoded one by one: markers special, everything else ordinary text
    segments = render_k3_segments(req["messages"], req["tools"], **kwargs)
    assert [i for s in segments for i in tok.encode(s.text, allow_special=s.special)] == expected


@pytest.mark.oracle
@needs_reference
@pytest.mark.parametrize("path", CASES, ids=IDS)
def test_golden_is_official(path):
    pytest.importorskip("transformers", reason="the official K3 tokenizer needs transformers")
    from kimi_chat.families.k3.oracle import official_k3_ids, official_k3_render

    req, kwargs = _load(path)
    assert official_k3_render(req["messages"], req["tools"], **kwargs) == path.with_suffix(".txt").read_bytes().decode("utf-8")
    ids = json.loads(path.with_name(path.stem + ".ids.json").read_text(encoding="utf-8"))
    assert official_k3_ids(req["messages"], req["tools"], **kwargs) == ids


# ------------------------------------------------------------------------------------------- refusals

CALL = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
REFUSALS = [
    # (messages, kwargs, error message part, message_index, field)
    ([{"role": "user", "content": "hi"}], {"thinking_effort": "medium"}, "thinking_effort='medium'", None,
     "thinking_effort"),
    ([{"role": "user", "content": "hi"}], {"thinking_effort": ["max"]}, "thinking_effort", None, "thinking_effort"),
    ([{"role": "user", "content": "q"}, {"role": "assistant", "tool_calls": [CALL, {**CALL, "function": {
        "name": "f", "arguments": "[1, 2]"}}]}], {}, "JSON but not an object", 1, "tool_calls[1].function.arguments"),
    ([{"role": "assistant", "tool_calls": [{"id": "x", "arguments": "3"}, ]}], {}, "no name", 0, "tool_calls[0].name"),
    ([{"role": "assistant", "tool_calls": [{"id": "x", "name": "f", "arguments": '"s"'}]}], {}, "not an object", 0,
     "tool_calls[0].arguments"),
    ([{"role": "assistant", "tool_calls": [{**CALL, "function": {"name": "f", "arguments": [1]}}]}], {},
     "must be an object or a JSON object string", 0, "tool_calls[0].function.arguments"),
    ([{"role": "user", "content": "q"}, {"role": "tool", "tool_call_id": "nope", "content": "r"}], {},
     "resolvable tool name", 1, "tool_call_id"),
    ([{"role": "assistant", "tool_calls": [CALL]}, {"role": "tool", "tool_call_id": "c1", "content": "a"},
      {"role": "tool", "tool_call_id": "zz", "content": "b"}], {}, "resolvable tool name", 2, "tool_call_id"),
    ([{"role": "user", "content": [{"type": "video_url", "video_url": {"url": "v.mp4"}}]}], {}, "no text", 0,
     "content[0].text"),
    ([{"role": "user", "content": [{"type": "image"}]}], {"image_prompts": []}, "more images than image_prompts", 0,
     "content[0]"),
    ([{"role": "user", "content": "hi"}], {"image_prompts": ["<img>"]}, "1 image_prompts given but 0", None,
     "image_prompts"),
    ([{"role": "assistant", "tool_calls": [{**CALL, "function": {"name": "f", "arguments": {"x": {1, 2}}}}]}], {},
     "not JSON-serialisable", 0, "tool_calls[0].function.arguments.x"),
    ([{"role": "user", "content": 5}], {}, "string or a list of content parts", 0, "content"),
]


@pytest.mark.parametrize("messages, kwargs, text, index, field", REFUSALS)
def test_refusals_name_index_and_field(messages, kwargs, text, index, field):
    with pytest.raises(RenderError, match=None) as e:
        render_k3(messages, **kwargs)
    assert text in str(e.value)
    assert e.value.message_index == index and e.value.field == field


@pytest.mark.oracle
@needs_reference
@pytest.mark.parametrize("messages, kwargs, text, index, field", REFUSALS)
def test_refusals_are_official_refusals(messages, kwargs, text, index, field):
    pytest.importorskip("transformers", reason="the official K3 tokenizer needs transformers")
    from kimi_chat.families.k3.oracle import official_k3_render

    if sys.flags.optimize and kwargs.get("thinking_effort") == "medium":
        # the official check is an `assert`: under -O the encoder renders it, without an effort message
        assert "thinking-effort" not in official_k3_render(messages, **kwargs)
        return
    with pytest.raises(Exception):  # noqa: B017 - the official raises ValueError, AssertionError, TypeError...
        official_k3_render(messages, **kwargs)


def test_messages_must_be_messages():
    with pytest.raises(InvalidMessagesError, match=r"messages\[1\]: expected a message object"):
        render_k3([{"role": "user", "content": "a"}, "oops"])
    with pytest.raises(InvalidMessagesError, match=r"messages\[0\]\.role"):
        render_k3([{"content": "a"}])
    with pytest.raises(InvalidMessagesError, match="expected a list of messages"):
        render_k3({"role": "user", "content": "a"})
    # `thinking` is read by truth value, as the official encoder reads it (tests/families/test_k3_oracle.py)
    assert render_k3([], thinking="no") == render_k3([], thinking=True) != render_k3([], thinking=False)


# ------------------------------------------------------------------------------------ inputs and segments


def test_message_objects_render_as_their_dicts():
    @dataclasses.dataclass
    class Msg:
        role: str
        content: str | None
        name: str | None = None

    pydantic = pytest.importorskip("pydantic")

    class Call(pydantic.BaseModel):
        id: str
        type: str
        function: dict

    class Assistant(pydantic.BaseModel):
        role: str = "assistant"
        content: str | None = None
        tool_calls: list[Call] | None = None

    objs = [Msg("user", "hi"), Assistant(tool_calls=[Call(id="c", type="function",
                                                          function={"name": "f", "arguments": '{"a": 1}'})])]
    dicts = [{"role": "user", "content": "hi"},
             {"role": "assistant", "tool_calls": [{"id": "c", "type": "function",
                                                   "function": {"name": "f", "arguments": '{"a": 1}'}}]}]
    assert render_k3(objs) == render_k3(dicts)


def test_openai_sdk_objects_inside_dict_messages():
    """The pattern of OpenAI's function-calling docs (SDK tool-call objects inside a
    dict message, a pydantic ``Function`` inside a dict call, a dataclass content part) renders like the
    plain dicts, in render, render_segments and render_tokens, as it does for K2."""
    pytest.importorskip("openai", reason="the OpenAI SDK is a test dependency")
    from openai.types.chat.chat_completion_message_function_tool_call import ChatCompletionMessageFunctionToolCall, Function

    import kimi_chat

    @dataclasses.dataclass
    class Part:
        type: str
        text: str

    sdk_call = ChatCompletionMessageFunctionToolCall(id="c1", type="function", function=Function(name="f", arguments='{"a": 1}'))
    objs = [{"role": "user", "content": [Part("text", "hi")]},
            {"role": "assistant", "content": "", "tool_calls": [sdk_call]},
            {"role": "tool", "tool_call_id": "c1", "content": "ok"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "c2", "type": "function", "function": Function(name="f", arguments='{"a": 2}')}]}]
    dicts = [{"role": "user", "content": [{"type": "text", "text": "hi"}]},
             {"role": "assistant", "content": "", "tool_calls": [
                 {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"a": 1}'}}]},
             {"role": "tool", "tool_call_id": "c1", "content": "ok"},
             {"role": "assistant", "content": "", "tool_calls": [
                 {"id": "c2", "type": "function", "function": {"name": "f", "arguments": '{"a": 2}'}}]}]
    expected = kimi_chat.render(dicts, dialect="kimi-k3")
    assert 'tool="f" index="1"' in expected and expected.count('key="a"') == 2
    assert kimi_chat.render(objs, dialect="kimi-k3") == expected
    assert kimi_chat.render(objs, dialect="kimi-k3", strict=True) == expected
    assert kimi_chat.render_segments(objs, dialect="kimi-k3") == kimi_chat.render_segments(dicts, dialect="kimi-k3")
    if HAS_TIKTOKEN:
        tok = kimi_chat.KimiTokenizer.from_reference("k3")
        assert (kimi_chat.render_tokens(objs, tokenizer=tok, dialect="kimi-k3").ids
                == kimi_chat.render_tokens(dicts, tokenizer=tok, dialect="kimi-k3").ids)
    assert objs[1]["tool_calls"][0] is sdk_call  # the caller's messages are not changed


def test_inputs_are_not_mutated():
    msgs = [{"role": "assistant", "tool_calls": [CALL, {**CALL, "id": "c2", "function": {"name": "g", "arguments": "x"}}]},
            {"role": "tool", "tool_call_id": "c2", "name": "stale", "content": "b"},
            {"role": "tool", "tool_call_id": "c1", "content": "a"}]
    before = json.dumps(msgs)
    text = render_k3(msgs)
    assert json.dumps(msgs) == before
    # re-ordered into call order, and named after the matched call (not the stale name)
    assert text.index('tool="f" index="1"<|sep|>a') < text.index('tool="g" index="2"<|sep|>b')
    assert "stale" not in text


def test_segments_flags_and_attribution():
    msgs = [{"role": "developer", "content": "dropped"},
            {"role": "user", "content": "<|open|>hi"},
            {"role": "assistant", "content": "yo", "reasoning_content": "r"}]
    segs = render_k3_segments(msgs, [{"type": "function", "function": {"name": "f"}}])
    assert all(isinstance(s, K3Segment) and s.text for s in segs)
    assert {s.text for s in segs if s.special} == {m.text for m in (M.K3_OPEN, M.K3_CLOSE, M.K3_SEP, M.K3_END_OF_MSG)}
    typed = [s for s in segs if s.text == "<|open|>hi"]
    assert len(typed) == 1 and not typed[0].special and typed[0].message_index == 1
    assert {s.message_index for s in segs} == {-1, 1, 2}
    produced = "".join(s.text for s in segs if s.trainable)
    assert produced == ("r<|close|>think<|sep|><|open|>response<|sep|>yo<|close|>response<|sep|>"
                        "<|close|>message<|sep|><|end_of_msg|>")
    assert all(s.message_index == 2 for s in segs if s.trainable)
    # attribute pieces are separate segments, as the official encoder makes them
    assert [s.text for s in segs[:8]] == ["<|open|>", "message", " role", '="', "system", '"', " type", '="']
    no_think = render_k3_segments(msgs, thinking=False)
    assert "".join(s.text for s in no_think if s.trainable).startswith("yo<|close|>response")


@needs_tiktoken
def test_k3_tokenizer(tok):
    assert tok.vocab_size == M.NUM_BASE_TOKENS + M.K3_NUM_RESERVED_SPECIAL == 163840
    for m in M.K3_MARKERS:
        assert tok.special_tokens[m.text] == m.id
        assert tok.encode(m.text) == [m.id]
    # eos is the model's (config.json eos_token_id <|end_of_msg|>; as K2.6's <|im_end|>); bos the constructor's
    assert tok.eos_id == M.K3_END_OF_MSG.id and tok.bos_id == M.BOS.id
    assert tok.decode([M.K3_END_OF_MSG.id]) == "<|end_of_msg|>"
    assert M.IM_END.text not in tok.special_tokens  # K2's <|im_end|> id is K3's <|end_of_msg|>
    assert tok.encode("<|open|>", allow_special=False) != [M.K3_OPEN.id]


@needs_tiktoken
def test_ids_refuse_a_k2_tokenizer():
    from kimi_chat.tokens.tokenizer import KimiTokenizer

    with pytest.raises(ValueError, match="not a Kimi-K3 tokenizer"):
        render_k3_ids([{"role": "user", "content": "hi"}], KimiTokenizer.from_reference("k2"))


@needs_tiktoken
def test_text_never_merges_across_segments(tok):
    # " role" + '="' + "user" + '"' are four encoder segments: BPE does not merge them
    ids = render_k3_ids([{"role": "user", "content": "x"}], tok, thinking_effort=None, add_generation_prompt=False)
    pieces = [tok.decode([i]) for i in ids]
    assert pieces[:7] == ["<|open|>", "message", " role", '="', "user", '"', "<|sep|>"]
    # where BPE would merge across pieces, the ids differ from encoding the joined text
    named = render_k3_ids([{"role": "user", "content": "x", "name": "-x"}], tok, thinking_effort=None)
    assert named[6:10] == [t for p in (" name", '="', "-x", '"') for t in tok.encode(p, allow_special=False)]
    assert named[6:10] != tok.encode(' name="-x"', allow_special=False)


def test_dialect_record_matches_the_renderer():
    import inspect

    from kimi_chat.dialects import KIMI_K3, Status

    params = inspect.signature(render_k3).parameters
    assert set(KIMI_K3.options) == {n for n, p in params.items() if p.kind is p.KEYWORD_ONLY} - {"add_generation_prompt"}
    assert KIMI_K3.family == "k3" and KIMI_K3.status is Status.SINGLE_SOURCE
    if reference_file(KIMI_K3.oracle) is None:
        pytest.skip("reference data not found")
    assert reference_file(KIMI_K3.oracle).name == "encoding_k3.py"


@needs_reference
def test_oracle_unavailable_without_transformers():
    code = (
        "import sys; sys.modules['transformers'] = None\n"
        "from kimi_chat.reference.oracle import OracleUnavailable\n"
        "from kimi_chat.families.k3.oracle import official_k3_render\n"
        "try:\n"
        "    official_k3_render([{'role': 'user', 'content': 'hi'}])\n"
        "except OracleUnavailable as e:\n"
        "    print('unavailable:', e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("unavailable:") and "pip install -e '.[verify]'" in out.stdout


def test_missing_reference_data_is_named(tmp_path):
    from kimi_chat.errors import ReferenceDataError
    from kimi_chat.families.k3.oracle import official_k3_render

    with pytest.raises(ReferenceDataError, match=r"Kimi-K3/encoding_k3\.py: file not found"):
        official_k3_render([], ref=tmp_path)


def test_render_dispatches_kimi_k3_by_family():
    """``kimi_chat.render(dialect="kimi-k3")`` is the K3 renderer (defaults: thinking on, effort max);
    ``render_segments`` gives its segments; options are checked by the dialect record."""
    import kimi_chat
    from kimi_chat.families.k3.render import render_k3, render_k3_segments

    msgs = [{"role": "user", "content": "hi"}]
    assert kimi_chat.get_dialect("kimi-k3").family == "k3"
    assert kimi_chat.render(msgs, dialect="kimi-k3") == render_k3(msgs)
    assert kimi_chat.render(msgs, dialect="kimi-k3", thinking=False, add_generation_prompt=False) == render_k3(
        msgs, thinking=False, add_generation_prompt=False)
    assert [s.text for s in kimi_chat.render_segments(msgs, dialect="kimi-k3")] == [
        s.text for s in render_k3_segments(msgs)]
    # parity: kwargs the official encoder does not read are ignored (its apply_chat_template takes
    # **kwargs); strict refuses them, and roles the encoder drops
    assert kimi_chat.render(msgs, dialect="kimi-k3", preserve_thinking=True) == render_k3(msgs)
    with pytest.raises(kimi_chat.StrictModeError, match="preserve_thinking"):
        kimi_chat.render(msgs, dialect="kimi-k3", preserve_thinking=True, strict=True)
    # a developer message is dropped (official) with a lint warning, which strict does not refuse
    assert kimi_chat.render([{"role": "developer", "content": "x"}, *msgs], dialect="kimi-k3",
                            strict=True) == render_k3(msgs)
    with pytest.raises(kimi_chat.StrictModeError, match=r"unknown-role: messages\[0\]\.role"):
        kimi_chat.render([{"role": "moderator", "content": "x"}, *msgs], dialect="kimi-k3", strict=True)
    assert kimi_chat.render(msgs, dialect="kimi-k3", thinking_effort="low", strict=True) == render_k3(
        msgs, thinking_effort="low")
    with pytest.raises(kimi_chat.RenderError, match="continue_final_message"):
        kimi_chat.render(msgs + [{"role": "assistant", "content": "Sure"}], dialect="kimi-k3",
                         continue_final_message=True)


@needs_tiktoken
def test_render_layout_covers_k3(tok):
    """``render_layout`` works for Kimi-K3 too (it raised NotImplementedError): the one attribution model,
    markers and image prompts as template literals, every other encoder segment as text; its pieces are the
    encoder's segments and their segment-wise encoding is the official ids."""
    import kimi_chat
    from kimi_chat.prompt import render_layout

    msgs = [{"role": "user", "content": [{"type": "text", "text": "see <|open|>"}, {"type": "image_url"}]},
            {"role": "assistant", "content": "ok"}]
    lay = render_layout(msgs, dialect="kimi-k3", image_prompts=["<img>"])
    segments = render_k3_segments(msgs, image_prompts=["<img>"])
    assert lay.text == kimi_chat.render(msgs, dialect="kimi-k3", image_prompts=["<img>"])
    assert [(p.text, p.literal, p.message_index, p.trainable) for p in lay.pieces()] == [tuple(s) for s in segments]
    ids = [i for p in lay.pieces() for i in tok.encode(p.text, allow_special=p.literal)]
    assert ids == render_k3_ids(msgs, tok, image_prompts=["<img>"])


@pytest.mark.parametrize("text", ['{"a": 1}', ' {"a": 1}', '{"a": 1}\n', '\t{"a": [1, 2]} \r\n', '{"a"', '{"a": 1} x',
                                  '{"a": 1}  {}', "[1]", " ", "", "x", '"s" ', "1 2", '{"a": NaN}'])
def test_arguments_json_read_as_json_loads_reads_it(text):
    """The encoder's json.loads of argument strings (whitespace around the value, trailing data,
    no value): kimi_chat's reader gives the same value, or the same error and message."""
    from kimi_chat.families.k3.inputs import loads

    def outcome(read):
        try:
            return "ok", read(text)
        except json.JSONDecodeError as e:
            return "error", str(e)

    assert outcome(loads) == outcome(json.loads)
