"""Our templates inside a real llama-server, on the tiny Kimi model.

The server is the one ``.ci/install-native.sh`` builds from the llama.cpp source vendored in the
llama-cpp-python 0.3.36 sdist (``tests/llama_server_support.py`` finds it). Without it these tests skip
locally, with the reason; under CI they fail. One server per template and flag set, started lazily and
killed at the end of the module.

What llama-server does differently from the official rules is asserted as *known* (the exact bytes),
so that a fix upstream makes a test fail and the assertion gets updated:

* it rebuilds tools and messages before the template sees them (``llama_server_tool`` /
  ``llama_server_message``): for the sorting dialects our templates give the official prompt anyway;
* ``--prefill-assistant`` (default): a conversation ending with the assistant's message is rendered
  without it and continued by llama.cpp's own Kimi code (``common/parsers/kimi-k2.cpp``);
* ``--reasoning-preserve`` (default): ``preserve_thinking=true`` reaches the template (K2.6 keeps all
  reasoning);
* the 0905 template's generation prompt starts with the ``<|im_end|>`` that prefill mode leaves out:
  llama.cpp's Kimi parser rejects every answer (HTTP 500) and ``tool_choice: "required"`` aborts;
* llama.cpp's Kimi parser vs :func:`kimi_chat.parse` on the same output: the same reasoning, content
  and well-formed calls; a whole-answer failure (HTTP 500) on odd ids, undeclared tools, cut JSON or
  text after the calls, which kimi_chat keeps with a status.
"""

from __future__ import annotations

import http.client
import json
import re
import signal
import subprocess
import sys
import urllib.error
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings, strategies as st

from kimi_chat import markers as M
from kimi_chat import tools_to_typescript
from kimi_chat.dialects import K2_DIALECTS, get_dialect
from kimi_chat.reference.oracle import deep_sort_dict
from kimi_chat.output import parse
from kimi_chat.prompt import render
from kimi_chat.checks.known_problems import DIALECT_PROBLEMS
from kimi_chat.templates import template_path, template_text
from kimi_chat.testing.strategies import requests

from conftest import IN_CI, skip_without_reference
from llama_server_support import (
    RECOMMENDED_FLAGS,
    LlamaServer,
    floats_written_alike,
    has_non_json_arguments,
    llama_server_message,
    llama_server_tool,
    missing_reason,
)

pytestmark = pytest.mark.native

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "fixtures" / "golden"
DIALECTS = list(K2_DIALECTS)
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the weather.",
        "parameters": {"type": "object", "properties": {"unit": {"type": "string"}, "city": {"type": "string"}},
                       "required": ["city"]},
    },
}
ASK = [{"role": "user", "content": "What's the weather in Paris?"}]
GEN = M.IM_ASSISTANT.text + "assistant" + M.IM_MIDDLE.text


# --------------------------------------------------------------------------------------------------
# fixtures


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model (its embedded template is 0905's; the servers get theirs from --chat-template-file,
    so one GGUF serves every dialect)."""
    pytest.importorskip("gguf", reason="the native extra is not installed (.ci/install-native.sh)")
    skip_without_reference()  # its vocabulary is the reference tokenizer's
    from kimi_chat.testing.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "tiny-kimi.gguf", dialect="kimi-k2-instruct-0905")


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory, tiny_gguf: Path):
    """``servers(dialect, recommended=True)``: a running llama-server with our template for ``dialect``
    (the README's flags, or llama-server's defaults), started on first use."""
    reason = missing_reason()
    if reason is not None:
        if IN_CI:
            pytest.fail(f"CI: {reason}; .ci/install-native.sh must build it")
        pytest.skip(reason)
    tmp = tmp_path_factory.mktemp("llama-server")
    gguf = tiny_gguf
    running: dict[tuple[str, bool], LlamaServer] = {}

    def get(dialect: str, recommended: bool = True, *, fresh: bool = False) -> LlamaServer:
        key = (dialect, recommended)
        if fresh or key not in running or not running[key].alive():
            flags = RECOMMENDED_FLAGS[1:] if recommended else ()
            name = f"{dialect}-{'rec' if recommended else 'default'}-{len(running)}.log"
            s = LlamaServer(gguf, template_path(dialect), tmp / name, args=flags)
            if fresh:
                running[(dialect + "#fresh" + str(len(running)), recommended)] = s
                return s
            running[key] = s
        return running[key]

    yield get
    for s in running.values():
        s.close()


def golden_cases() -> list[Any]:
    out = []
    for d in DIALECTS:
        for f in sorted((GOLDEN / d).glob("*.json")):
            out.append(pytest.param(d, f, id=f"{d}-{f.stem}"))
    return out


def server_request(case: dict[str, Any]) -> dict[str, Any]:
    body: dict[str, Any] = {"add_generation_prompt": case["add_generation_prompt"]}
    if case.get("options"):
        body["chat_template_kwargs"] = dict(case["options"])
    return body


def has_media(messages: list[Any]) -> bool:
    return any(isinstance(m.get("content"), list) and any(p.get("type") != "text" for p in m["content"])
               for m in messages)


def rendered_as_llama_server_sends(dialect: str, messages: list[Any], tools: list[Any] | None,
                                   add_generation_prompt: bool, options: dict[str, Any]) -> str:
    """kimi_chat.render of the request as llama-server rewrites it before the template sees it, and as
    llama.cpp's Jinja prints a list: where a template writes list content with ``{{ }}`` (a tool
    result's, or next to tool calls: Python's ``str()`` of the list under Jinja2, as the official
    template does) llama.cpp writes nothing."""
    parse_arguments = get_dialect(dialect).spec.tool_calls
    sent = [llama_server_message(m, parse_arguments=parse_arguments) for m in messages]
    text = render(sent, dialect=dialect, tools=[llama_server_tool(t) for t in tools] if tools else None,
                  add_generation_prompt=add_generation_prompt, **options)
    for m in sent:
        if isinstance(m["content"], list) and m["content"]:
            text = text.replace(str(m["content"]), "")
    return text


def ts_kwargs(dialect: str, tools: list[Any] | None) -> dict[str, Any]:
    """K2.5/K2.6: what a user passes so that tools are declared as the official tokenizer declares them."""
    if tools and get_dialect(dialect).spec.tools_typescript:
        return {"tools_ts_str": tools_to_typescript(tools)}
    return {}


# --------------------------------------------------------------------------------------------------
# /apply-template: the golden conversations


# The golden conversations (served with the README's flags) whose prompt is NOT the official one,
# because of what llama-server rewrites before the template runs; every other one is official.
NOT_OFFICIAL: dict[str, set[str]] = {
    # the tools' key order: rev1/rev2 do not sort, and llama-server rebuilds each tool in its own order
    "kimi-k2-instruct@rev1": {"parallel_tool_calls", "tools_declared"},
    "kimi-k2-instruct@rev2": {"parallel_tool_calls", "tools_declared",
                              # string arguments parsed into objects: rev2's double encoding is gone
                              "list_content_tool_result", "opaque_tool_call_ids", "reasoning_aliases",
                              "reasoning_history", "tool_loop", "tool_loop_pending",
                              "list_content_with_tool_call"},
    # list content written with {{ }} (Python's str() officially): nothing in llama.cpp's Jinja
    "kimi-k2-instruct-0905": {"list_content_tool_result", "list_content_with_tool_call"},
    # only reasoning_content reaches the template (its `reasoning` alias, which K2.6 prefers, is dropped)
    "kimi-k2.6": {"reasoning_and_reasoning_content"},
    # the same, and Kimi-K2.7-Code writes every turn's reasoning: a `reasoning` or `thinking` alias the
    # rewrite drops shows in every turn, not only after the last plain answer
    "kimi-k2.7-code": {"reasoning_and_reasoning_content", "reasoning_aliases", "k27_history_reasoning_kept"},
}


@pytest.mark.parametrize("dialect,path", golden_cases())
def test_apply_template_golden(servers, dialect, path):
    case = json.loads(path.read_text(encoding="utf-8"))
    expected = path.with_suffix(".txt").read_bytes().decode("utf-8")
    messages, tools = case["messages"], case["tools"]
    body = server_request(case)
    kwargs = ts_kwargs(dialect, tools)
    if kwargs:
        body.setdefault("chat_template_kwargs", {}).update(kwargs)
    s = servers(dialect)
    if has_media(messages):
        # KNOWN: without a multimodal projector (--mmproj) llama-server refuses image/video parts
        with pytest.raises(urllib.error.HTTPError) as e:
            s.apply_template(messages, tools, **body)
        assert e.value.code == 500 and b"input is not supported" in e.value.read()
        return
    if has_non_json_arguments(messages) and dialect != "kimi-k2-instruct@rev1":
        # KNOWN: llama-server parses string arguments as JSON for templates that render tool calls
        # (not rev1) and refuses the request; the golden pins the official bytes
        with pytest.raises(urllib.error.HTTPError) as e:
            s.apply_template(messages, tools, **body)
        assert e.value.code == 500
        return
    got = s.apply_template(messages, tools, **body)
    # what llama-server's rewrite of the request renders to: always exactly this
    ours = rendered_as_llama_server_sends(dialect, messages, tools, case["add_generation_prompt"],
                                          dict(case.get("options") or {}))
    assert got == ours
    # and that is the official prompt except where the rewrite changes what the template sees
    official = got == expected
    assert official == (path.stem not in NOT_OFFICIAL.get(dialect, ())), (dialect, path.stem)


def test_tool_declarations_are_sorted_in_llama_cpp_jinja(servers):
    # regression: `value | list == value` is never true in llama.cpp's Jinja (it compares
    # no two arrays as equal), so every list went to the tuple branch and was written unsorted with
    # llama.cpp's own key order {"type": "function", "function": {"name": ...
    tools = [{"function": {"parameters": {"type": "object", "properties": {"b": {"type": "string"}, "a": {}}},
                           "name": "f", "description": "d"}, "type": "function"}]
    # (K2.5/K2.6 declare JSON only where the official TypeScript encoder raises: a tool with an enum
    # that contradicts its type is added for them)
    rejected = {"type": "function", "function": {"name": "g", "description": "", "parameters": {
        "type": "object", "properties": {"x": {"type": "integer", "enum": ["a"]}}}}}
    for dialect in ("kimi-k2-instruct-0905", "kimi-k2-thinking@rev1", "kimi-k2.5", "kimi-k2.6"):
        sent = tools + [rejected] if get_dialect(dialect).spec.tools_typescript else tools
        got = servers(dialect).apply_template(ASK, sent)
        sep = get_dialect(dialect).spec.tools_separators
        assert json.dumps(deep_sort_dict(sent), ensure_ascii=False, separators=sep) in got, dialect
        if not get_dialect(dialect).spec.tools_typescript:
            assert got == render(ASK, tools=tools, dialect=dialect)


@pytest.mark.parametrize("dialect", ["kimi-k2-instruct@rev1", "kimi-k2-instruct@rev2"])
def test_unsorted_dialects_get_llama_servers_key_order(servers, dialect):
    # KNOWN: rev1/rev2 declare tools in the caller's key order; llama-server rebuilds each tool as
    # {"type", "function": {"name", "description", "parameters"}} first, so that order is what they get
    tools = [{"function": {"name": "f", "parameters": {"type": "object"}, "description": "d"}, "type": "function"}]
    got = servers(dialect).apply_template(ASK, tools)
    assert got != render(ASK, tools=tools, dialect=dialect)
    assert got == render(ASK, tools=[llama_server_tool(t) for t in tools], dialect=dialect)
    assert '[{"type": "function", "function": {"name": "f", "description": "d", "parameters"' in got


def test_string_arguments_are_parsed_by_llama_server(servers):
    # KNOWN: llama-server parses string arguments into objects (func_args_not_string); the templates
    # write them back with tojson: compact JSON gets ", "/": " and rev2 loses its double encoding
    msgs = ASK + [{"role": "assistant", "content": "", "tool_calls": [
        {"id": "functions.get_weather:0", "type": "function",
         "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}]}]
    body = {"add_generation_prompt": True}
    got = servers("kimi-k2-instruct-0905").apply_template(msgs, **body)
    assert '<|tool_call_argument_begin|>{"city": "Paris"}<|tool_call_end|>' in got
    assert '{"city":"Paris"}' in render(msgs, dialect="kimi-k2-instruct-0905")
    got2 = servers("kimi-k2-instruct@rev2").apply_template(msgs, **body)
    assert '<|tool_call_argument_begin|>{"city": "Paris"}<|tool_call_end|>' in got2
    assert '"{\\"city\\":\\"Paris\\"}"' in render(msgs, dialect="kimi-k2-instruct@rev2")


def test_llama_jinja_writes_floats_with_six_digits(servers):
    # KNOWN (common/jinja/value.cpp value_to_json: `oss << as_float()`): tool schemas and arguments
    # lose float digits in llama.cpp's Jinja; Python's json (the official tokenizer) writes repr()
    tools = [{"type": "function", "function": {"name": "f", "description": "", "parameters": {
        "type": "object", "properties": {"x": {"type": "number", "default": 3.14159265, "maximum": 1000000.0,
                                               "minimum": 0.0, "multipleOf": 0.5}}}}}]
    got = servers("kimi-k2-instruct-0905").apply_template(ASK, tools)
    assert '"default": 3.14159, "maximum": 1e+06, "minimum": 0, "multipleOf": 0.5' in got
    assert '"default": 3.14159265, "maximum": 1000000.0, "minimum": 0.0, "multipleOf": 0.5' in render(
        ASK, tools=tools, dialect="kimi-k2-instruct-0905")


@pytest.mark.parametrize("dialect", ["kimi-k2.5", "kimi-k2.6"])
def test_k25_tools_ts_str_through_chat_template_kwargs(servers, dialect):
    s = servers(dialect)
    # without it: the template computes the TypeScript declaration itself (the official
    # encoder's bytes: tests/engines/test_llama_server_tools_ts.py), not the JSON fallback any more
    plain = s.apply_template(ASK, [WEATHER])
    assert plain == render(ASK, tools=[WEATHER], dialect=dialect)
    assert json.dumps(deep_sort_dict([llama_server_tool(WEATHER)]), ensure_ascii=False, separators=(",", ":")) not in plain
    # with it (per request, or --chat-template-kwargs): the official prompt too
    got = s.apply_template(ASK, [WEATHER], chat_template_kwargs={"tools_ts_str": tools_to_typescript([WEATHER])})
    assert got == render(ASK, tools=[WEATHER], dialect=dialect)


# --------------------------------------------------------------------------------------------------
# /apply-template: generated conversations


@pytest.mark.parametrize("dialect", DIALECTS)
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.data())
def test_apply_template_generated(servers, dialect, data):
    req = data.draw(requests(dialect))
    messages, tools = req["messages"], req["tools"]
    if has_media(messages):
        return
    last_is_assistant = bool(messages) and messages[-1]["role"] == "assistant"
    body: dict[str, Any] = {"add_generation_prompt": req["add_generation_prompt"] and not last_is_assistant}
    options = dict(req["options"])
    kwargs = dict(options, **ts_kwargs(dialect, tools))
    if kwargs:
        body["chat_template_kwargs"] = kwargs
    s = servers(dialect)
    try:
        sent = ([llama_server_message(m, parse_arguments=get_dialect(dialect).spec.tool_calls) for m in messages],
                [llama_server_tool(t) for t in tools or []])
    except json.JSONDecodeError:
        # KNOWN: string arguments that are not JSON: llama-server refuses the request
        with pytest.raises(urllib.error.HTTPError) as e:
            s.apply_template(messages, tools, **body)
        assert b"Failed to parse tool call arguments as JSON" in e.value.read()
        return
    # floats with more than six significant digits: test_llama_jinja_writes_floats_with_six_digits
    assume(floats_written_alike(json.loads(json.dumps(sent))))
    try:
        ours = rendered_as_llama_server_sends(dialect, messages, tools, body["add_generation_prompt"], options)
    except ValueError:
        return  # render refuses what the official template would not render either
    got = s.apply_template(messages, tools, **body)
    assert got == ours


# --------------------------------------------------------------------------------------------------
# llama-server's own rewrites (default flags)


CONTINUED = [d for d in DIALECTS if "llama-server-continuation" in DIALECT_PROBLEMS[d]]


def test_continuation_problem_is_listed_for_the_templates_llama_cpp_sniffs():
    # common_chat_try_specialized_template picks its Kimi handler when the template text holds both
    sniffed = [d for d in DIALECTS if M.TOOL_CALLS_SECTION_BEGIN.text in template_text(d)
               and M.TOOL_CALL_BEGIN.text in template_text(d)]
    assert CONTINUED == sniffed and "kimi-k2-instruct@rev1" not in sniffed


@pytest.mark.parametrize("dialect", CONTINUED)
def test_prefill_assistant_rewrites_the_prompt(servers, dialect):
    # KNOWN (common/parsers/kimi-k2.cpp, picked because the template holds the tool-call markers): a last
    # assistant message is dropped, the rest rendered WITHOUT a generation prompt, then
    # "<|im_assistant|>assistant<|im_middle|><think>" + reasoning [+ "</think>" + content] appended; even
    # rev2 (no reasoning at all) gets <think></think>, and 0905 loses the user turn's <|im_end|>
    msgs = [{"role": "user", "content": "Write a haiku."}, {"role": "assistant", "content": "Autumn moon"}]
    got = servers(dialect, recommended=False).apply_template(msgs, add_generation_prompt=False)
    head = render(msgs[:-1], dialect=dialect, add_generation_prompt=False)
    assert got == head + GEN + "<think></think>Autumn moon"
    assert got != render(msgs, dialect=dialect, add_generation_prompt=False)
    if dialect == "kimi-k2-instruct-0905":
        assert not head.endswith(M.IM_END.text)
    # reasoning only: the think block is left open
    msgs2 = [msgs[0], {"role": "assistant", "content": "", "reasoning_content": "Let me think"}]
    got2 = servers(dialect, recommended=False).apply_template(msgs2, add_generation_prompt=False)
    assert got2 == head + GEN + "<think>Let me think"
    # with --no-prefill-assistant (the README's command) the template renders the whole conversation
    assert servers(dialect).apply_template(msgs, add_generation_prompt=False) == render(
        msgs, dialect=dialect, add_generation_prompt=False)
    # and a last assistant turn with tool calls cannot be continued at all (HTTP 400) by default
    call = {"role": "assistant", "content": "", "tool_calls": [
        {"id": "functions.f:0", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}
    with pytest.raises(urllib.error.HTTPError) as e:
        servers(dialect, recommended=False).apply_template([msgs[0], call], add_generation_prompt=False)
    assert e.value.code == 400 and b"Cannot continue an assistant message that contains tool calls" in e.value.read()


def test_reasoning_preserve_default_keeps_k26_reasoning(servers):
    # KNOWN: llama-server's --reasoning-preserve (default) sets preserve_thinking=true for templates
    # that read it (K2.6): every assistant turn keeps its reasoning, where the official default drops it
    msgs = [{"role": "user", "content": "Q1"}, {"role": "assistant", "content": "A1", "reasoning_content": "r1"},
            {"role": "user", "content": "Q2"}]
    got = servers("kimi-k2.6", recommended=False).apply_template(msgs)
    assert got == render(msgs, dialect="kimi-k2.6", preserve_thinking=True)
    assert got != render(msgs, dialect="kimi-k2.6")
    assert servers("kimi-k2.6").apply_template(msgs) == render(msgs, dialect="kimi-k2.6")


# --------------------------------------------------------------------------------------------------
# /v1/chat/completions through llama.cpp's Kimi parser vs kimi_chat.parse of the raw output

CHAT_DIALECTS = ["kimi-k2-instruct@rev2", "kimi-k2-thinking@rev1", "kimi-k2.5", "kimi-k2.6"]


def raw_completion(s: LlamaServer, prompt: str, n: int, seed: int) -> dict[str, Any]:
    return s.post("/completion", {"prompt": prompt, "n_predict": n, "temperature": 0, "seed": seed,
                                  "cache_prompt": False})


def streamed_message(s: LlamaServer, body: dict[str, Any]) -> dict[str, Any]:
    msg: dict[str, Any] = {"content": "", "reasoning_content": "", "tool_calls": {}}
    for ev in s.stream("/v1/chat/completions", body):
        for ch in ev.get("choices", []):
            d = ch.get("delta", {})
            msg["content"] += d.get("content") or ""
            msg["reasoning_content"] += d.get("reasoning_content") or ""
            for tc in d.get("tool_calls") or []:
                cur = msg["tool_calls"].setdefault(tc["index"], {"name": "", "arguments": ""})
                cur["name"] += (tc.get("function") or {}).get("name") or ""
                cur["arguments"] += (tc.get("function") or {}).get("arguments") or ""
    return msg


@pytest.mark.parametrize("dialect", CHAT_DIALECTS)
@pytest.mark.parametrize("tool_choice", ["auto", "required"])
def test_chat_completions_agree_with_kimi_chat_parse(servers, dialect, tool_choice):
    s = servers(dialect)
    n = 8
    prompt = render(ASK, tools=[WEATHER], dialect=dialect, **ts_kwargs(dialect, [WEATHER]))
    assert s.apply_template(ASK, [WEATHER], chat_template_kwargs=ts_kwargs(dialect, [WEATHER])) == prompt
    raw = raw_completion(s, prompt, n, seed=0)
    ours = parse(raw["content"], dialect=dialect, tools=[WEATHER])
    body = {"messages": ASK, "tools": [WEATHER], "tool_choice": tool_choice, "temperature": 0, "seed": 0,
            "max_tokens": n, "cache_prompt": False, "chat_template_kwargs": ts_kwargs(dialect, [WEATHER])}
    theirs = s.post("/v1/chat/completions", body)["choices"][0]
    streamed = streamed_message(s, body)
    # the tiny model writes random text, no tool call: both parsers see plain content (required does
    # not force a call before max_tokens: llama.cpp's grammar allows content before the calls)
    assert ours.tool_calls == [] and "tool_calls" not in theirs["message"] and streamed["tool_calls"] == {}
    assert theirs["finish_reason"] == "length" == raw["stop_type"].replace("limit", "length")
    assert (theirs["message"].get("reasoning_content") or None) == ours.reasoning_content
    # KNOWN: an answer that is all reasoning (K2.5/K2.6 open <think> in the generation prompt) has
    # content "" in llama-server, null in kimi_chat
    assert (theirs["message"]["content"] or None) == ours.content
    assert ours.content is None or ours.content == raw["content"]
    assert streamed["content"] == (theirs["message"]["content"] or "")
    assert streamed["reasoning_content"] == (theirs["message"].get("reasoning_content") or "")


def test_0905_chat_completions_fail_in_llama_servers_kimi_parser(servers):
    # KNOWN (upstream): the 0905 template leaves the last turn's <|im_end|> out without a generation
    # prompt (as the official one does), so the generation prompt llama.cpp computes (the difference of
    # the two renders) is "<|im_end|>" + GEN; its Kimi parser expects GEN right at the start and rejects
    # every answer
    s = servers("kimi-k2-instruct-0905")
    for tools in ([WEATHER], None):
        body: dict[str, Any] = {"messages": ASK, "temperature": 0, "max_tokens": 4}
        if tools:
            body["tools"] = tools
        with pytest.raises(urllib.error.HTTPError) as e:
            s.post("/v1/chat/completions", body)
        assert e.value.code == 500
        assert b"does not match the expected peg-native format" in e.value.read()
        # streamed: no delta at all, one error event
        events = list(s.stream("/v1/chat/completions", body))
        assert [ev.get("error", {}).get("code") for ev in events] == [500]
        assert "does not match the expected peg-native format" in events[0]["error"]["message"]
    # the raw endpoint with kimi_chat's prompt works, and kimi_chat.parse reads its output
    raw = raw_completion(s, render(ASK, tools=[WEATHER], dialect="kimi-k2-instruct-0905"), 8, seed=0)
    assert parse(raw["content"], dialect="kimi-k2-instruct-0905").content == raw["content"]


# Tool-call outputs through llama.cpp's Kimi parser: the tiny model never writes a call, so the output
# is put in the prompt instead: with --prefill-assistant (default) a last assistant message is
# continued, and the parser reads the continued text plus the generated part, here nothing (the
# <|im_end|> bias ends the turn at once). kimi_chat.parse reads the same text.
CALL = M.TOOL_CALL_BEGIN.text + "{id}" + M.TOOL_CALL_ARGUMENT_BEGIN.text + "{args}" + M.TOOL_CALL_END.text
SECTION = M.TOOL_CALLS_SECTION_BEGIN.text + "{}" + M.TOOL_CALLS_SECTION_END.text
PARIS = CALL.format(id="functions.get_weather:0", args='{"city": "Paris"}')
OUTPUTS = {
    # name: (reasoning, text after </think>, llama.cpp's verdict: None = parses as kimi_chat does)
    "two-calls": ("plan", "Sure." + SECTION.format(PARIS + CALL.format(id="functions.get_weather:1",
                                                                     args='{"city": "Oslo"}')), None),
    "no-section-markers": ("", PARIS, None),
    # KNOWN: llama.cpp's parser only takes ids functions.NAME:DIGITS of declared tools, JSON that is
    # complete, and nothing after the section: anything else fails the whole answer (HTTP 500), where
    # kimi_chat.parse keeps the call (status unknown_tool / invalid_json) or the trailing text
    "opaque-id": ("plan", SECTION.format(CALL.format(id="call_1", args='{"city": "Paris"}')), "500"),
    "undeclared-tool": ("", SECTION.format(CALL.format(id="functions.other:0", args='{"x": 1}')), "500"),
    "truncated-json": ("", SECTION.format(CALL.format(id="functions.get_weather:0", args='{"city": ')), "500"),
    "text-after-calls": ("", SECTION.format(PARIS) + "tail", "500"),
}


@pytest.mark.parametrize("dialect", ["kimi-k2-thinking@rev1", "kimi-k2.6"])
@pytest.mark.parametrize("name", list(OUTPUTS))
def test_tool_call_parsing_vs_kimi_chat_parse(servers, dialect, name):
    reasoning, text, verdict = OUTPUTS[name]
    msgs = [{"role": "user", "content": "weather?"}, {"role": "assistant", "reasoning_content": reasoning, "content": text}]
    ours = parse("<think>" + reasoning + "</think>" + text, dialect=dialect, tools=[WEATHER], thinking_prefilled=False)
    body = {"messages": msgs, "tools": [WEATHER], "temperature": 0, "max_tokens": 1,
            "logit_bias": [[M.IM_END.id, 100]]}
    s = servers(dialect, recommended=False)
    if verdict == "500":
        with pytest.raises(urllib.error.HTTPError) as e:
            s.post("/v1/chat/completions", body)
        assert e.value.code == 500 and b"does not match the expected peg-native format" in e.value.read()
        assert ours.tool_calls  # kimi_chat keeps the call, with its status
        assert [c.status.value for c in ours.tool_calls] == [
            {"undeclared-tool": "unknown_tool", "truncated-json": "invalid_json"}.get(name, "ok")]
        assert ours.content == ("tail" if name == "text-after-calls" else None)
        return
    m = s.post("/v1/chat/completions", body)["choices"][0]
    assert m["finish_reason"] == "tool_calls" == ours.stop_reason.finish_reason
    msg = m["message"]
    theirs_calls = [(t["id"], t["function"]["name"], t["function"]["arguments"]) for t in msg["tool_calls"]]
    assert theirs_calls == [(c.id, c.name, c.arguments) for c in ours.tool_calls]
    assert all(c.status.value == "ok" for c in ours.tool_calls)
    assert (msg.get("reasoning_content") or None) == ours.reasoning_content
    # KNOWN: no text before the calls is content "" in llama-server, null in kimi_chat
    assert (msg.get("content") or None) == ours.content
    streamed = streamed_message(s, body)
    assert [(c["name"], c["arguments"]) for c in streamed["tool_calls"].values()] == [(c.name, c.arguments) for c in ours.tool_calls]
    assert (streamed["content"] or None) == ours.content and (streamed["reasoning_content"] or None) == ours.reasoning_content


# --------------------------------------------------------------------------------------------------
# tool_choice "required": llama-server aborts; kimi_chat's own path does not


def test_required_tool_choice_aborts_llama_server(servers):
    # KNOWN (upstream): at sampler init llama-server feeds the generation prompt into the tool-call
    # grammar; for 0905 it starts with <|im_end|>, an end-of-generation token, and
    # llama_grammar_accept_impl aborts (GGML_ABORT in src/llama-grammar.cpp): the server process dies
    s = servers("kimi-k2-instruct-0905", fresh=True)
    body = {"messages": ASK, "tools": [WEATHER], "tool_choice": "required", "temperature": 0, "max_tokens": 8}
    with pytest.raises((http.client.RemoteDisconnected, ConnectionError, urllib.error.URLError)):
        s.post("/v1/chat/completions", body, timeout=120)
    rc = s.proc.wait(timeout=120)
    assert rc == -signal.SIGABRT
    log = s.log_tail(200)
    assert re.search(r"llama-grammar\.cpp:\d+: fatal error", log)
    assert "llama_grammar_accept_impl" in log or "common_sampler_init" in log or "fatal error" in log


def test_required_tool_choice_works_in_kimi_chat_run(tiny_gguf, tmp_path):
    # the same request through kimi_chat's own path (kimi-chat run: render, GBNF grammar, parse)
    pytest.importorskip("llama_cpp", reason="the native extra is not installed (.ci/install-native.sh)")
    req = tmp_path / "req.json"
    req.write_text(json.dumps({"messages": ASK, "tools": [WEATHER], "tool_choice": "required",
                               "temperature": 0, "seed": 0, "max_tokens": 24}), encoding="utf-8")
    p = subprocess.run([sys.executable, "-m", "kimi_chat.cli", "run", str(tiny_gguf), str(req), "-q"],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    choice = out["choices"][0]
    # the grammar forces the call; a call cut by max_tokens is not one to run: it
    # is reported under invalid_tool_calls with status "unclosed"
    if choice["finish_reason"] == "length":
        calls = choice["message"]["invalid_tool_calls"]
        assert calls[-1]["status"] == "unclosed"
    else:
        calls = choice["message"]["tool_calls"]
    assert len(calls) >= 1 and calls[0]["function"]["name"] == "get_weather"


# --------------------------------------------------------------------------------------------------
# the README's llama-server lines are the command these tests run


def test_readme_llama_server_lines_are_the_tested_command():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    lines = [ln.strip() for ln in readme.splitlines() if ln.strip().startswith("llama-server ")]
    assert lines
    for ln in lines:
        words = ln.split()
        assert "--chat-template-file" in words, ln
        tpl = words[words.index("--chat-template-file") + 1]
        assert (ROOT / tpl).is_file(), ln
        for flag in RECOMMENDED_FLAGS:
            assert flag in words, (flag, ln)
