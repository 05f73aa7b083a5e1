"""render_tokens / extend_tokens: ids equal tokenizer.encode(render(...)), exact per-token attribution,
the assistant mask, the special-token policy, prefix-stable extension.

Expected values come from two independent computations: ``tokenizer.encode(render(...))`` (the
official way to tokenize a prompt) and a per-token byte walk over ``render_segments`` written here.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

pytest.importorskip("tiktoken", reason="the `tokenizer` extra (tiktoken) is not installed")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from kimi_chat import markers as M  # noqa: E402
from kimi_chat.dialects import K2_DIALECTS as DIALECTS  # noqa: E402
from kimi_chat.errors import RenderError  # noqa: E402
from kimi_chat.prompt import render, render_segments  # noqa: E402
from kimi_chat.testing.strategies import requests  # noqa: E402
from kimi_chat.tokens.tokenizer import KimiTokenizer  # noqa: E402
from kimi_chat.tokens.rendered import RenderedTokens, Span, extend_tokens, render_tokens  # noqa: E402

from conftest import needs_reference  # noqa: E402

pytestmark = [
    pytest.mark.oracle,
    needs_reference,  # the reference tokenizers (the skip reason names what is missing)
]
DIALECT_NAMES = list(DIALECTS)
CONFIGS = ["k2", "k2.6"]
# the strategies are costly to draw: a sixth of the profile's examples (at least 50; 833 with `deep`)
PROPS = settings(max_examples=max(50, settings().max_examples // 6), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


@pytest.fixture(scope="module")
def toks() -> dict[str, KimiTokenizer]:
    return {c: KimiTokenizer.from_reference(c) for c in CONFIGS}


def _render_kw(req: dict[str, Any], dialect: str) -> dict[str, Any]:
    return {"tools": req["tools"], "dialect": dialect, "add_generation_prompt": req["add_generation_prompt"], **req["options"]}


def _has_special_text(tok: KimiTokenizer, req: dict[str, Any]) -> bool:
    blob = json.dumps([req["messages"], req["tools"]], ensure_ascii=False, default=str)
    return any(name in blob for name in tok.special_tokens)


def _replace_special_text(tok: KimiTokenizer, value: Any) -> Any:
    if isinstance(value, str):
        for name in sorted(tok.special_tokens, key=len, reverse=True):
            value = value.replace(name, "\u00b7")
        return value
    if isinstance(value, dict):
        return {_replace_special_text(tok, k): _replace_special_text(tok, v) for k, v in value.items()}
    if isinstance(value, list):
        return [_replace_special_text(tok, v) for v in value]
    return value


def _expected_attribution(tok: KimiTokenizer, ids: list[int], segments) -> tuple[list[int], list[int]]:
    """Per token: message index of its first byte; mask 1 iff every byte is in a trainable segment."""
    owner: list[tuple[int, bool]] = []
    for s in segments:
        owner += [(s.message_index, s.trainable)] * len(s.text.encode())
    msg, mask, pos = [], [], 0
    for i in ids:
        n = len(tok.id_to_bytes(i))
        msg.append(owner[pos][0])
        mask.append(int(all(t for _, t in owner[pos : pos + n])))
        pos += n
    assert pos == len(owner)
    return msg, mask


def _check_structure(tok: KimiTokenizer, r: RenderedTokens, segments) -> None:
    text = "".join(s.text for s in segments)
    assert r.text == text and tok.decode(r.ids) == text
    assert len(r.message_index) == len(r.assistant_mask) == len(r.ids)
    msg, mask = _expected_attribution(tok, r.ids, segments)
    assert r.message_index == msg
    assert r.assistant_mask == mask
    # spans: maximal runs, in order, covering ids exactly; each message's tokens are its text exactly
    assert [i for s in r.spans for i in range(s.start, s.end)] == list(range(len(r.ids)))
    assert all(a.message_index != b.message_index for a, b in zip(r.spans, r.spans[1:]))
    for s in r.spans:
        assert set(r.message_index[s.start : s.end]) == {s.message_index}
    for idx in {s.message_index for s in segments if s.message_index >= 0}:
        a, b = r.span_of(idx)
        assert tok.decode(r.ids[a:b]) == "".join(s.text for s in segments if s.message_index == idx)


# ------------------------------------------------------------------------------------------------
# Properties
# ------------------------------------------------------------------------------------------------


def _check_render_tokens(tok: KimiTokenizer, req: dict[str, Any], dialect: str) -> None:
    kw = _render_kw(req, dialect)
    try:
        text = render(req["messages"], **kw)
    except ValueError:
        with pytest.raises(ValueError):
            render_tokens(req["messages"], tokenizer=tok, **kw)
        return
    segments = render_segments(req["messages"], **kw)
    official = tok.encode(text)

    special = render_tokens(req["messages"], tokenizer=tok, special_tokens="special", **kw)
    assert special.ids == official
    _check_structure(tok, special, segments)

    r = render_tokens(req["messages"], tokenizer=tok, **kw)
    _check_structure(tok, r, segments)
    typed_in_prompt = False
    if _has_special_text(tok, req):
        # the same request with the special-token text replaced: its prompt has only the template's markers
        clean = _replace_special_text(tok, req)
        clean_ids = tok.encode(render(clean["messages"], **_render_kw(clean, dialect)))
        n_template = sum(map(tok.is_special, clean_ids))
        typed_in_prompt = sum(map(tok.is_special, official)) != n_template
    if typed_in_prompt:
        # typed special-token text is ordinary text: exactly the template's markers are special ids
        assert sum(map(tok.is_special, r.ids)) == n_template
        with pytest.raises(RenderError, match="special_tokens='strict'"):
            render_tokens(req["messages"], tokenizer=tok, special_tokens="strict", **kw)
    else:
        assert r.ids == official
        assert render_tokens(req["messages"], tokenizer=tok, special_tokens="strict", **kw).ids == official


def _check_extend(tok: KimiTokenizer, req: dict[str, Any], dialect: str, data) -> None:
    msgs, tools, opts = req["messages"], req["tools"], req["options"]
    asst = [i for i, m in enumerate(msgs) if m["role"] == "assistant" and i > 0]
    if not asst:
        return
    k = data.draw(st.sampled_from(asst), label="split before message")
    agp = data.draw(st.booleans(), label="add_generation_prompt after")
    policy = data.draw(st.sampled_from(["text", "special"]), label="policy")
    try:
        prev = render_tokens(msgs[:k], tokenizer=tok, tools=tools, dialect=dialect, special_tokens=policy, **opts)
        full = render_tokens(msgs, tokenizer=tok, tools=tools, dialect=dialect, add_generation_prompt=agp,
                             special_tokens=policy, **opts)
    except ValueError:
        return
    # what the model generated: the full render's tokens of the assistant message after the prompt
    n = len(prev.ids)
    a_end = full.span_of(k)[1]
    stable = full.ids[:n] == prev.ids
    completion = full.ids[n:a_end] if stable else [M.IM_END.id]
    got = extend_tokens(prev, completion, msgs[k:], add_generation_prompt=agp)
    if got is not None:
        assert got.ids[: n + len(completion)] == prev.ids + completion
        assert got.ids == full.ids
        assert got.message_index == full.message_index
        assert got.assistant_mask == full.assistant_mask
        assert got.spans == full.spans
        assert got.text == full.text
    else:
        # None only when the full render really does not extend prompt + completion
        assert full.ids[: n + len(completion)] != prev.ids + completion
    if not stable:
        return
    # a non-canonical completion (a token split in two) is never accepted
    for j in range(n, a_end):
        b = tok.id_to_bytes(full.ids[j])
        if not tok.is_special(full.ids[j]) and len(b) > 1 and b[1:] in tok.mergeable_ranks:
            bad = full.ids[n:j] + [tok.token_to_id(b[:1]), tok.token_to_id(b[1:])] + full.ids[j + 1 : a_end]
            assert extend_tokens(prev, bad, msgs[k:], add_generation_prompt=agp) is None
            break


@pytest.mark.parametrize("dialect", DIALECT_NAMES)
@PROPS
@given(data=st.data())
def test_properties(toks, dialect, data):
    """For random requests of every dialect, with either tokenizer config: render_tokens ids equal
    tokenizer.encode(render(...)), attribution and masks are exact, the special-token policy holds;
    extend_tokens, whenever it returns, equals the full render_tokens of the extended conversation."""
    tok = toks[data.draw(st.sampled_from(CONFIGS), label="config")]
    req = data.draw(requests(dialect), label="request")
    _check_render_tokens(tok, req, dialect)
    _check_extend(tok, req, dialect, data)


# ------------------------------------------------------------------------------------------------
# Examples
# ------------------------------------------------------------------------------------------------

TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
                                           "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]
CONV = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": "", "tool_calls": [
        {"id": "functions.get_weather:0", "type": "function",
         "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
    {"role": "tool", "tool_call_id": "functions.get_weather:0", "content": "18C, sunny"},
    {"role": "assistant", "content": "It is 18C and sunny in Paris."},
]


def _tokens_of(tok, r, mask_value=None, message=None):
    return "".join(
        tok.decode([i]) for i, m, mi in zip(r.ids, r.assistant_mask, r.message_index)
        if (mask_value is None or m == mask_value) and (message is None or mi == message)
    )


def test_training_mask_instruct(toks):
    tok = toks["k2"]
    r = render_tokens(CONV, tokenizer=tok, tools=TOOLS, dialect="kimi-k2-instruct-0905", add_generation_prompt=False)
    assert r.ids == tok.encode(render(CONV, tools=TOOLS, dialect="kimi-k2-instruct-0905", add_generation_prompt=False))
    trained = _tokens_of(tok, r, 1)
    assert trained == (
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0<|tool_call_argument_begin|>"
        '{"city": "Paris"}<|tool_call_end|><|tool_calls_section_end|><|im_end|>'
        "It is 18C and sunny in Paris."  # 0905 without a generation prompt: no closing <|im_end|>
    )
    # headers, system, user, tool results and the tool declaration are not trained on
    assert _tokens_of(tok, r, 1, message=3) == "" and _tokens_of(tok, r, 1, message=-1) == ""
    assert _tokens_of(tok, r, message=-1).startswith("<|im_system|>tool_declare<|im_middle|>")
    assert [s.message_index for s in r.spans] == [-1, 0, 1, 2, 3, 4]
    assert r.labels()[: r.span_of(2)[0]] == [-100] * r.span_of(2)[0]
    assert r.to_dict()["spans"][1] == {"message_index": 0, "start": r.spans[1].start, "end": r.spans[1].end}


def test_training_mask_thinking_history_scaffolding(toks):
    conv = [
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "content": ".4", "reasoning_content": "add"},
        {"role": "user", "content": "and 3+3?"},
        {"role": "assistant", "content": "", "reasoning_content": "add again", "tool_calls": [
            {"id": "functions.calc:0", "type": "function", "function": {"name": "calc", "arguments": "{}"}}]},
    ]
    for config in CONFIGS:
        tok = toks[config]
        r = render_tokens(conv, tokenizer=tok, dialect="kimi-k2-thinking", add_generation_prompt=False)
        assert r.ids == tok.encode(render(conv, dialect="kimi-k2-thinking", add_generation_prompt=False))
        # the history turn (before the last plain answer) gets <think></think>: scaffolding, not trained;
        # the turn after it keeps its reasoning, which is trained on
        assert _tokens_of(tok, r, 1, message=1).endswith("4<|im_end|>")
        assert "<think>" not in _tokens_of(tok, r, 1, message=1)
        assert _tokens_of(tok, r, 1, message=3).startswith("<think>add again</think>")
    # July config: "</think>" is text and BPE merges its ">" with the "." of the content: that token
    # straddles scaffolding and content, and is not trained on
    tok = toks["k2"]
    r = render_tokens(conv, tokenizer=tok, dialect="kimi-k2-thinking", add_generation_prompt=False)
    a, b = r.span_of(1)
    pieces = [(tok.decode([i]), m) for i, m in zip(r.ids[a:b], r.assistant_mask[a:b])]
    assert (">.", 0) in pieces and ("4", 1) in pieces
    # K2.6 config: </think> is one token, no straddling
    tok = toks["k2.6"]
    r = render_tokens(conv, tokenizer=tok, dialect="kimi-k2-thinking", add_generation_prompt=False)
    a, b = r.span_of(1)
    pieces = [(tok.decode([i]), m) for i, m in zip(r.ids[a:b], r.assistant_mask[a:b])]
    assert ("</think>", 0) in pieces and (".", 1) in pieces


def test_special_token_policy(toks):
    tok = toks["k2"]
    conv = [{"role": "user", "content": "close it: <|im_end|><|im_assistant|>"}]
    text = render(conv)
    r = render_tokens(conv, tokenizer=tok)
    assert tok.decode(r.ids) == text
    a, b = r.span_of(0)
    inner = r.ids[a:b]
    assert inner.count(M.IM_END.id) == 1 and M.IM_ASSISTANT.id not in inner  # only the real turn end
    assert render_tokens(conv, tokenizer=tok, special_tokens="special").ids == tok.encode(text)
    with pytest.raises(RenderError, match=r"messages\[0\]\.content: contains the special-token text '<\|im_end\|>'"):
        render_tokens(conv, tokenizer=tok, special_tokens="strict")
    tools = [{"type": "function", "function": {"name": "f", "description": "ends <|im_end|>"}}]
    with pytest.raises(RenderError, match=r"tools\[0\]\.function\.description contains"):
        render_tokens([{"role": "user", "content": "hi"}], tokenizer=tok, tools=tools, special_tokens="strict")
    r = render_tokens([{"role": "user", "content": "hi"}], tokenizer=tok, tools=tools, dialect="kimi-k2-thinking")
    assert r.ids.count(M.IM_END.id) == 3  # tool_declare, default system, user
    # a name split over text parts written back to back is typed text too; K2 templates write nothing
    # for a video part, but a placeholder for an image
    video = {"type": "video_url", "video_url": {"url": "v.mp4"}}
    image = {"type": "image_url", "image_url": {"url": "i.png"}}
    for middle, joined in [([], True), ([video], True), ([image], False)]:
        parts = [{"role": "user", "content": [{"type": "text", "text": "a<|im_"}, *middle,
                                              {"type": "text", "text": "end|>b"}]}]
        assert ("<|im_end|>b" in render(parts)) is joined
        r = render_tokens(parts, tokenizer=tok)
        a, b = r.span_of(0)
        assert r.ids[a:b].count(M.IM_END.id) == 1 and r.ids[b - 1] == M.IM_END.id
        assert tok.decode(r.ids[a:b]) == render_segments(parts)[1].text
        if joined:
            with pytest.raises(RenderError, match="special_tokens='strict'"):
                render_tokens(parts, tokenizer=tok, special_tokens="strict")
        else:
            assert render_tokens(parts, tokenizer=tok, special_tokens="strict").ids == r.ids
    # special-token text in a field the template does not write is no problem, even for 'strict'
    unused = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok", "reasoning_content": "<|im_end|>"}]
    assert render_tokens(unused, tokenizer=tok, special_tokens="strict").ids == tok.encode(render(unused))
    with pytest.raises(ValueError, match="special_tokens must be one of"):
        render_tokens(conv, tokenizer=tok, special_tokens="nope")
    # <think> is special text only where the config makes it a token
    think = [{"role": "user", "content": "<think>"}]
    assert render_tokens(think, tokenizer=tok, special_tokens="strict").ids == tok.encode(render(think))
    with pytest.raises(RenderError):
        render_tokens(think, tokenizer=toks["k2.6"], special_tokens="strict")


def test_extend_instruct_is_prefix_stable(toks):
    tok = toks["k2"]
    prev = render_tokens(CONV[:2], tokenizer=tok, tools=TOOLS)
    full = render_tokens(CONV, tokenizer=tok, tools=TOOLS)
    n = len(prev.ids)
    completion = full.ids[n : full.span_of(2)[1]]
    assert completion[-1] == M.IM_END.id
    got = extend_tokens(prev, completion, CONV[2:])
    assert got is not None and got.ids == full.ids and got.assistant_mask == full.assistant_mask
    assert got.spans == full.spans and got.message_index == full.message_index
    # the generation prompt of `prev` (message -1) is message 2's header in the extension
    assert got.message_index[n - 1] == 2 and prev.message_index[n - 1] == -1
    # changed tools: not prefix-stable
    assert extend_tokens(prev, completion, CONV[2:], tools=None) is None
    # the model stopped without <|im_end|>: still an extension (the re-render adds it)
    got = extend_tokens(prev, completion[:-1], CONV[2:])
    assert got is not None and got.ids == full.ids
    # non-canonical completion: "It" "is" split differently than the tokenizer would
    bad = completion[:-1] + [tok.token_to_id(b"x")] + completion[-1:]
    assert extend_tokens(prev, bad, CONV[2:]) is None


def test_extend_thinking_drops_reasoning_returns_none(toks):
    tok = toks["k2.6"]
    conv = [
        {"role": "user", "content": "q1"},
        {"role": "assistant", "content": "", "reasoning_content": "think 1", "tool_calls": [
            {"id": "functions.f:0", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "functions.f:0", "content": "r"},
    ]
    prev = render_tokens(conv, tokenizer=tok, dialect="kimi-k2-thinking")
    assert "<think>think 1</think>" in prev.text
    # a final answer makes turn 1 history: its reasoning is dropped, the prompt is not extended
    answer = {"role": "assistant", "content": "done", "reasoning_content": "think 2"}
    full = render_tokens([*conv, answer], tokenizer=tok, dialect="kimi-k2-thinking")
    assert "<think>think 1</think>" not in full.text
    assert extend_tokens(prev, tok.encode("<think>think 2</think>done<|im_end|>"), [answer]) is None
    # another tool call keeps turn 1's reasoning: prefix-stable
    call = {"role": "assistant", "content": "", "reasoning_content": "think 2", "tool_calls": [
        {"id": "functions.f:1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}
    full = render_tokens([*conv, call], tokenizer=tok, dialect="kimi-k2-thinking")
    completion = full.ids[len(prev.ids) : full.span_of(3)[1]]
    got = extend_tokens(prev, completion, [call])
    assert got is not None and got.ids == full.ids and got.assistant_mask == full.assistant_mask


def test_long_messages_with_cuts(toks):
    tok = toks["k2"]
    conv = [
        {"role": "user", "content": "1" * 30_001},
        {"role": "assistant", "content": "x" * 26_000 + " done"},
        {"role": "user", "content": "é" * 60_000 + "<|im_end|>" * 3},
    ]
    for policy in ("text", "special"):
        full = render_tokens(conv, tokenizer=tok, special_tokens=policy)
        _check_structure(tok, full, render_segments(conv))
        if policy == "special":
            assert full.ids == tok.encode(render(conv))
        prev = render_tokens(conv[:1], tokenizer=tok, special_tokens=policy)
        completion = full.ids[len(prev.ids) : full.span_of(1)[1]]
        got = extend_tokens(prev, completion, conv[1:], add_generation_prompt=True)
        assert got is not None and got.ids == full.ids and got.assistant_mask == full.assistant_mask


def test_rendered_tokens_api(toks):
    tok = toks["k2"]
    r = render_tokens([{"role": "user", "content": "hi"}], tokenizer=tok)
    assert len(r) == len(r.ids) and isinstance(r.spans[0], Span)
    with pytest.raises(KeyError):
        r.span_of(5)
    assert json.loads(json.dumps(r.to_dict()))["ids"] == r.ids


def test_tokenizer_argument_is_checked():
    with pytest.raises(TypeError, match="tokenizer must be a KimiTokenizer .*got NoneType"):
        render_tokens([{"role": "user", "content": "hi"}], tokenizer=None)  # type: ignore[arg-type]


def test_continue_final_message_tokens(toks):
    tok = toks["k2"]
    conv = [{"role": "user", "content": "Write a haiku."}, {"role": "assistant", "content": "Sure, <|im_end|>"}]
    r = render_tokens(conv, tokenizer=tok, continue_final_message=True)
    assert r.text == render(conv, continue_final_message=True) and r.text.endswith("Sure, <|im_end|>")
    assert r.add_generation_prompt is False and r.continue_final_message is True
    # the typed <|im_end|> that ends the prompt is text, not the end of the turn
    assert M.IM_END.id not in r.ids[r.span_of(1)[0]:]
    assert r.assistant_mask[-1] == 1 and r.message_index[-1] == 1
    assert render_tokens(conv, tokenizer=tok, continue_final_message=True, special_tokens="special").ids == tok.encode(r.text)


def test_strict_names_the_field_the_prompt_holds(toks):
    """'strict' names the message and field whose text reaches the prompt, found from the renderer's
    own pieces (a name, a tool-call id, a tool result id)."""
    tok = toks["k2"]
    conv = [{"role": "user", "content": "hi", "name": "<|im_end|>"}]
    with pytest.raises(RenderError, match=r"messages\[0\]\.name: contains"):
        render_tokens(conv, tokenizer=tok, dialect="kimi-k2-thinking", special_tokens="strict")
    # the fixed-header dialects do not write the name: no problem
    assert render_tokens(conv, tokenizer=tok, dialect="kimi-k2-instruct@rev1", special_tokens="strict").ids == \
        tok.encode(render(conv, dialect="kimi-k2-instruct@rev1"))
    conv = [{"role": "user", "content": "q"},
            {"role": "assistant", "content": "", "tool_calls": [
                {"id": "x<|tool_call_end|>", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "x<|tool_call_end|>", "content": "r"}]
    with pytest.raises(RenderError, match=r"messages\[1\]\.tool_calls\[0\]\.id: contains"):
        render_tokens(conv, tokenizer=tok, special_tokens="strict")
    r = render_tokens(conv, tokenizer=tok)
    assert r.ids.count(M.TOOL_CALL_END.id) == 1


def test_tokens_use_no_private_renderer_name():
    import ast
    import kimi_chat.tokens.rendered as mod

    tree = ast.parse(open(mod.__file__, encoding="utf-8").read())
    imported = [a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and "prompt" in (n.module or "")
                for a in n.names]
    assert imported and not [n for n in imported if n.startswith("_")]
