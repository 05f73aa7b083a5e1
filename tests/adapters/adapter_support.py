"""Shared by the adapter tests: a real Hugging Face fast tokenizer built in memory from the reference
``tiktoken.model``, the rule cases of the parser issue (with expectations written from the format),
prompts rendered by kimi_chat, and the accumulation a streaming client does."""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kimi_chat import markers as M
from kimi_chat.prompt import render

THINK, UNTHINK = M.THINK_BEGIN.text, M.THINK_END.text
SB, SE = M.TOOL_CALLS_SECTION_BEGIN.text, M.TOOL_CALLS_SECTION_END.text
SB1, SE1 = M.TOOL_CALL_SECTION_BEGIN_SINGULAR.text, M.TOOL_CALL_SECTION_END_SINGULAR.text
CB, AB, CE = M.TOOL_CALL_BEGIN.text, M.TOOL_CALL_ARGUMENT_BEGIN.text, M.TOOL_CALL_END.text
IM_END, IM_MIDDLE = M.IM_END.text, M.IM_MIDDLE.text


def call(header: str, args: str | None = None, *, end: bool = True) -> str:
    return CB + header + ("" if args is None else AB + args) + (CE if end else "")


# ------------------------------------------------------------------------------------ tokenizer


@functools.lru_cache(maxsize=None)
def hf_tokenizer(config: str):
    """A ``transformers`` fast tokenizer (``TokenizersBackend``) for the Kimi vocabulary: the BPE of
    the reference ``tiktoken.model`` converted by transformers' ``TikTokenConverter`` with Kimi's
    ``pat_str``, plus the 258 special ids of ``config`` (``"k2"``: July-2025 Kimi-K2-Instruct;
    ``"k2.6"``: the K2.5/K2.6 line, where ``<think>``/``</think>`` are tokens; ``"k3"``: Kimi-K3, its
    256 special ids with ``<|open|>``/``<|close|>``/``<|sep|>``/``<|end_of_msg|>``). Each added token
    keeps the ``special`` flag of the official config, so ``skip_special_tokens`` drops what the
    official tokenizer drops (not the tool-call markers, not ``<think>``)."""
    from tokenizers import AddedToken
    from transformers import PreTrainedTokenizerFast
    from transformers.convert_slow_tokenizer import TikTokenConverter

    from kimi_chat.tokens.tokenizer import PAT_STR, KimiTokenizer

    ours = KimiTokenizer.from_reference(config)
    tok = TikTokenConverter(vocab_file=str(ours.model_path), pattern=PAT_STR).converted()
    for name, i in sorted(ours.special_tokens.items(), key=lambda kv: kv[1]):
        special = ours.added_tokens[i].special if i in ours.added_tokens else True
        t = AddedToken(name, normalized=False, special=special)
        if special:
            tok.add_special_tokens([t])
        else:
            tok.add_tokens([t])
        assert tok.token_to_id(name) == i, (name, i, tok.token_to_id(name))
    k3 = config == "k3"
    hf = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        bos_token=M.BOS.text,
        # generation stops on <|im_end|> (K2 generation_config eos_token_id) / <|end_of_msg|> (K3 config.json)
        eos_token=M.K3_END_OF_MSG.text if k3 else M.IM_END.text,
        unk_token=M.UNK.text,
        pad_token=M.PAD.text,
    )
    sample = (f'hé<|close|>think<|sep|><|open|>call tool="f" index="1"<|sep|>東京<|end_of_msg|>' if k3
              else f"{THINK}hé 東京{UNTHINK}{SB}{CB}functions.f:0{AB}{{}}{CE}{SE}")
    assert hf.encode(sample, add_special_tokens=False) == ours.encode(sample)
    return hf


# ------------------------------------------------------------------------------------ cases

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
     "parameters": {"type": "object", "properties": {"city": {"type": "string"}, "unit": {"type": "string"}},
                    "required": ["city"]}}},
    {"type": "function", "function": {"name": "search", "description": "Web search",
     "parameters": {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}}},
    {"type": "function", "function": {"name": "get_time", "description": "Current time",
     "parameters": {"type": "object", "properties": {}}}},
    {"type": "function", "function": {"name": "mcp.github:list-issues", "description": "MCP tool",
     "parameters": {"type": "object", "properties": {"repo": {"type": "string"}}, "required": ["repo"]}}},
    {"type": "function", "function": {"name": "web-search", "description": "hyphenated",
     "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}}},
]

DIALECTS = {"instruct": "kimi-k2-instruct", "thinking": "kimi-k2-thinking", "k25": "kimi-k2.5", "k26": "kimi-k2.6"}
"""Model kind -> the kimi_chat dialect that renders its prompt."""

USER = ({"role": "user", "content": "What's the weather in Paris? Also search for kimi."},)

BIG = "x" * 12000 + " " + "日本" * 2000  # > 8 KB of arguments (a section cap truncated these)
PARIS, TOKYO = '{"city": "Paris"}', '{"city": "Tokyo"}'
KIMI_Q, REPO_X, Q_Y = '{"query": "kimi"}', '{"repo": "x"}', '{"q": "y"}'
PARIS_CUT, TRUNC_ARGS = '{"city": "Paris"', '{"query": "abc'
LOOKALIKE = '{"query": "<|tool_call_end| and <think"}'
UNICODE_ARGS = '{"city": "東京", "note": "😀 é"}'

Expect = tuple  # (content, reasoning, [(id, name, arguments), ...])


@dataclass(frozen=True)
class Case:
    name: str
    model: str
    output: str
    """What the model generates before its stop token."""
    expect: Expect
    stop: bool = True
    """The generation ended with ``<|im_end|>`` (the stop token); else it was cut (max_tokens)."""
    messages: tuple = USER
    options: tuple = ()
    why: str = ""

    @property
    def dialect(self) -> str:
        return DIALECTS[self.model]

    @property
    def vocab(self) -> str:
        return "k2" if self.model == "instruct" else "k2.6"


CASES: list[Case] = [
    Case("plain_content", "instruct", "Hello! How can I help?", ("Hello! How can I help?", None, [])),
    Case("reasoning_then_content", "thinking", f"{THINK}The user greets me.{UNTHINK}Hello!",
         ("Hello!", "The user greets me.", [])),
    Case("parallel_calls", "thinking",
         f"{THINK}Two cities.{UNTHINK}{SB}{call('functions.get_weather:0', PARIS)}{call('functions.get_weather:1', TOKYO)}{SE}",
         (None, "Two cities.", [("functions.get_weather:0", "get_weather", PARIS),
                                ("functions.get_weather:1", "get_weather", TOKYO)]),
         why="parallel calls merged by a greedy id regex; call end + next begin in one delta"),
    Case("content_then_two_calls", "instruct",
         f"Let me check.{SB}{call('functions.get_weather:0', PARIS)}{call('functions.search:1', KIMI_Q)}{SE}",
         ("Let me check.", None, [("functions.get_weather:0", "get_weather", PARIS),
                                  ("functions.search:1", "search", '{"query": "kimi"}')])),
    Case("big_arguments", "instruct", f"{SB}{call('functions.search:0', json.dumps({'query': BIG}, ensure_ascii=False))}{SE}",
         (None, None, [("functions.search:0", "search", json.dumps({"query": BIG}, ensure_ascii=False))]),
         why="an 8 KB section cap truncated big arguments"),
    Case("section_inside_reasoning", "thinking", f"{THINK}I need the weather.{SB}{call('functions.get_weather:0', PARIS)}{SE}",
         (None, "I need the weather.", [("functions.get_weather:0", "get_weather", PARIS)]),
         why="tool calls inside <think> shown as reasoning and never executed; markers leaking into reasoning"),
    Case("bare_call_inside_reasoning", "thinking", f"{THINK}Checking{call('functions.get_weather:0', PARIS)}",
         (None, "Checking", [("functions.get_weather:0", "get_weather", PARIS)])),
    Case("missing_section_end", "instruct", f"Checking.{SB}{call('functions.get_weather:0', PARIS)}",
         ("Checking.", None, [("functions.get_weather:0", "get_weather", PARIS)]),
         why="a missing <|tool_calls_section_end|> dropped every call"),
    Case("k25_prefilled_think", "k25", f"The user wants the weather.{UNTHINK}Let me look.{SB}{call('functions.get_weather:0', PARIS)}{SE}",
         ("Let me look.", "The user wants the weather.", [("functions.get_weather:0", "get_weather", PARIS)]),
         why="K2.5's prefilled <think> sent the reasoning into content"),
    Case("k25_reasoning_closed_by_section", "k25", f"Need data.{SB}{call('functions.search:0', KIMI_Q)}{SE}",
         (None, "Need data.", [("functions.search:0", "search", '{"query": "kimi"}')])),
    Case("k25_thinking_off", "k25", "Plain answer.", ("Plain answer.", None, []), options=(("thinking", False),)),
    Case("k26_prefilled_think", "k26", f"The user wants the weather.{UNTHINK}Let me look.{SB}{call('functions.get_weather:0', PARIS)}{SE}",
         ("Let me look.", "The user wants the weather.", [("functions.get_weather:0", "get_weather", PARIS)])),
    Case("k26_preserve_thinking", "k26", f"Recall.{UNTHINK}Answer.", ("Answer.", "Recall.", []),
         messages=USER + ({"role": "assistant", "content": "A1", "reasoning_content": "r1"},
                          {"role": "user", "content": "Again?"}),
         options=(("preserve_thinking", True),)),
    Case("k26_thinking_off", "k26", "Plain answer.", ("Plain answer.", None, []), options=(("thinking", False),)),
    Case("dotted_hyphenated_names", "instruct",
         f"{SB}{call('functions.mcp.github:list-issues:3', REPO_X)}{call('functions.web-search:4', Q_Y)}{SE}",
         (None, None, [("functions.mcp.github:list-issues:3", "mcp.github:list-issues", '{"repo": "x"}'),
                       ("functions.web-search:4", "web-search", '{"q": "y"}')]),
         why="dotted or hyphenated function names truncated"),
    Case("double_encoded_arguments", "instruct", f"{SB}{call('functions.get_weather:0', json.dumps(PARIS))}{SE}",
         (None, None, [("functions.get_weather:0", "get_weather", PARIS)]),
         why="string arguments double-encoded"),
    Case("singular_section_spelling", "instruct", f"{SB1}{call('functions.get_weather:0', PARIS)}{SE1}",
         (None, None, [("functions.get_weather:0", "get_weather", PARIS)])),
    Case("bare_call_without_section", "instruct", f"Sure.{call('functions.get_weather:0', PARIS)}",
         ("Sure.", None, [("functions.get_weather:0", "get_weather", PARIS)])),
    Case("opaque_header_name_inferred", "instruct", f"{SB}{call('0', KIMI_Q)}{SE}",
         (None, None, [("0", "search", '{"query": "kimi"}')])),
    Case("header_without_index", "instruct", f"{SB}{call('functions.get_weather', PARIS)}{SE}",
         (None, None, [("functions.get_weather", "get_weather", PARIS)])),
    Case("invalid_json_kept", "instruct", f"{SB}{call('functions.get_weather:0', PARIS_CUT)}{SE}",
         (None, None, [("functions.get_weather:0", "get_weather", '{"city": "Paris"')])),
    Case("empty_arguments", "instruct", f"{SB}{call('functions.get_time:0', '  ')}{SE}",
         (None, None, [("functions.get_time:0", "get_time", "{}")])),
    Case("arguments_whitespace_stripped", "instruct", f"{SB}{call(' functions.get_weather:0 ', '  ' + PARIS + chr(10))}{SE}",
         (None, None, [("functions.get_weather:0", "get_weather", PARIS)])),
    Case("text_after_section", "instruct", f"{SB}{call('functions.get_weather:0', PARIS)}{SE}Done.",
         ("Done.", None, [("functions.get_weather:0", "get_weather", PARIS)])),
    Case("instruct_think_is_text", "instruct", f"{THINK}not a tag{UNTHINK} here", (f"{THINK}not a tag{UNTHINK} here", None, [])),
    Case("stray_marker_dropped", "instruct", f"Hello{IM_MIDDLE} world", ("Hello world", None, [])),
    Case("whitespace_only_content_is_none", "thinking", f"{THINK}Just call.{UNTHINK}\n\n{SB}{call('functions.get_time:0', '{}')}{SE}",
         (None, "Just call.", [("functions.get_time:0", "get_time", "{}")])),
    Case("marker_lookalikes_in_arguments", "instruct",
         f"{SB}{call('functions.search:0', LOOKALIKE)}{SE}",
         (None, None, [("functions.search:0", "search", '{"query": "<|tool_call_end| and <think"}')])),
    Case("unicode_arguments", "thinking", f"{THINK}東京?{UNTHINK}{SB}{call('functions.get_weather:0', UNICODE_ARGS)}{SE}",
         (None, "東京?", [("functions.get_weather:0", "get_weather", '{"city": "東京", "note": "😀 é"}')])),
    Case("truncated_in_arguments", "instruct", f"{SB}{call('functions.search:0', TRUNC_ARGS, end=False)}",
         (None, None, [("functions.search:0", "search", '{"query": "abc')]), stop=False),
    Case("truncated_in_reasoning", "thinking", f"{THINK}Still thinking about", (None, "Still thinking about", []), stop=False),
    Case("thinking_model_answers_without_think", "thinking", "Direct answer.", ("Direct answer.", None, [])),
]

# ------------------------------------------------------------------------------------ diagnostics
# (not rule cases: what the adapters log and withhold; their expectations are the client's view)

CUT_BEFORE_ARGS = Case(
    "cut_before_arguments", "instruct",
    f"{SB}{call('functions.get_weather:0', end=False)}{call('functions.nope:1', '{}')}{SE}",
    (None, None, [("functions.nope:1", "nope", "{}")]),
    why="call 0 never reaches <|tool_call_argument_begin|> (closed by the next call begin); call 1 is "
        "to an undeclared tool (unknown_tool: handed on)")
"""Expectation: call 0 withheld (when its status is not executable), call 1 handed on as index 0."""

DIAGNOSTIC_CASES = [  # (case, level name, the start of the one log line it must produce)
    (next(c for c in CASES if c.name == "stray_marker_dropped"), "DEBUG", "parse warning stray_marker:"),
    (next(c for c in CASES if c.name == "invalid_json_kept"), "INFO",
     "tool call 0 (id 'functions.get_weather:0', name 'get_weather') returned with status invalid_json"),
    (Case("text_in_section", "instruct", f"{SB}lost{call('functions.get_time:0', '{}')}{SE}",
          (None, None, [("functions.get_time:0", "get_time", "{}")])),
     "WARNING", "parse warning text_in_section:"),
]


def force_withholding(monkeypatch: Any) -> None:
    """Make ``ok`` calls non-executable too, so :data:`CUT_BEFORE_ARGS`'s call 0 (``ok`` with ``{}``
    until the parser reports ``incomplete``) is withheld: exercises the adapters' withholding path."""
    from kimi_chat.servers import diagnostics
    from kimi_chat.output import ToolCallStatus

    monkeypatch.setattr(diagnostics, "NOT_EXECUTABLE", frozenset({ToolCallStatus.OK, *diagnostics.NOT_EXECUTABLE}))


def cut_before_args_expect() -> Expect:
    """What the client gets for :data:`CUT_BEFORE_ARGS` with the parser's real statuses."""
    from kimi_chat.servers.diagnostics import NOT_EXECUTABLE

    if NOT_EXECUTABLE:  # call 0 is `incomplete`
        return CUT_BEFORE_ARGS.expect
    return (None, None, [("functions.get_weather:0", "get_weather", "{}"), *CUT_BEFORE_ARGS.expect[2]])


# the multi-turn Kimi-K2-Thinking conversation: the history holds <think>...</think>
MULTI_TURN = (
    {"role": "user", "content": "What's the weather in Paris?"},
    {"role": "assistant", "content": "", "reasoning_content": "I should call the tool.",
     "tool_calls": [{"id": "functions.get_weather:0", "type": "function",
                     "function": {"name": "get_weather", "arguments": PARIS}}]},
    {"role": "tool", "tool_call_id": "functions.get_weather:0", "content": "18C and sunny"},
)
MULTI_TURN_CASE = Case(
    "multi_turn_think_history", "thinking",
    f"{THINK}The tool says 18C; I will answer briefly.{UNTHINK}It is 18°C and sunny in Paris.",
    ("It is 18°C and sunny in Paris.", "The tool says 18C; I will answer briefly.", []),
    messages=MULTI_TURN,
    why="vLLM's kimi_k2 reasoning parser sees </think> in the history and streams the new chain of thought as content",
)
ALL_CASES = CASES + [MULTI_TURN_CASE]


def prompt_text(case: Case) -> str:
    return render(list(case.messages), tools=TOOLS, dialect=case.dialect, **dict(case.options))


def prompt_ids(tok: Any, case: Case) -> list[int]:
    return tok.encode(prompt_text(case), add_special_tokens=False)


def output_ids(tok: Any, case: Case) -> list[int]:
    ids = tok.encode(case.output, add_special_tokens=False)
    return ids + [M.IM_END.id] if case.stop else ids


# ------------------------------------------------------------------------------------ client side


@dataclass
class Stream:
    """What an OpenAI streaming client accumulates."""

    content: str | None = None
    reasoning: str | None = None
    calls: dict[int, dict[str, Any]] = field(default_factory=dict)
    id_resent: list[int] = field(default_factory=list)

    def add(self, content: str | None, reasoning: str | None, tool_calls: Sequence[Any] | None) -> None:
        if content:
            self.content = (self.content or "") + content
        if reasoning:
            self.reasoning = (self.reasoning or "") + reasoning
        for t in tool_calls or ():
            c = self.calls.setdefault(t["index"], {"id": None, "name": None, "arguments": ""})
            if t.get("id") is not None:
                if c["id"] is not None:
                    self.id_resent.append(t["index"])
                c["id"] = t["id"]
            fn = t.get("function") or {}
            if fn.get("name"):
                c["name"] = fn["name"]
            if fn.get("arguments"):
                c["arguments"] += fn["arguments"]

    def result(self) -> Expect:
        return (self.content, self.reasoning,
                [(c["id"], c["name"], c["arguments"]) for _, c in sorted(self.calls.items())])


def without_ids(e: Expect) -> Expect:
    return (e[0], e[1], [(n, a) for _, n, a in e[2]])


def short(v: Any, n: int = 60) -> str:
    s = repr(v)
    return s if len(s) <= n else s[: n - 3] + "..."


def diff_summary(expect: Expect, got: Any) -> str:
    """One line saying where a built-in parser's result differs from the expected (ours)."""
    if isinstance(got, str):
        return got
    parts = []
    for label, e, g in (("content", expect[0], got[0]), ("reasoning", expect[1], got[1]), ("calls", expect[2], got[2])):
        if e != g:
            parts.append(f"{label}: expected {short(e)} got {short(g)}")
    return "; ".join(parts)


def report(capsys: Any, table: str) -> None:
    """Print the differential table (and append it to ``$KIMI_CHAT_DIFF_REPORT`` when set)."""
    with capsys.disabled():
        print("\n" + table)
    if os.environ.get("KIMI_CHAT_DIFF_REPORT"):
        with open(os.environ["KIMI_CHAT_DIFF_REPORT"], "a", encoding="utf-8") as f:
            f.write(table + "\n")
