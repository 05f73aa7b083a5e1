"""The K3 differential run: every case of :mod:`k3_support` through vLLM's built-in ``kimi_k3`` parsers
(composed by vLLM's ``ParserManager`` into its ``KimiK3Parser``), SGLang's built-in ``kimi_k3`` detectors
(in SGLang's serving code), and ours (vLLM ``kimi_chat``; SGLang registered as ``kimi_k3``), streamed
token by token and whole. Used by ``test_differential_k3.py`` (which pins the disagreements) and by
``benchmarks/diff_k3_servers.py`` (which prints them). Tool-call ids are left out of the comparison
(each server has its own id style; see the README), and arguments are compared as JSON values (the
built-ins re-serialise them with ``json.dumps``; ours are the model's text, assembled in order)."""

from __future__ import annotations

import json

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .adapter_support import hf_tokenizer, short
from .k3_support import K3_CASES, K3Case

Expect = tuple


@dataclass(frozen=True)
class Row:
    case: str
    server: str  # "vllm" | "sglang"
    mode: str  # "stream" | "whole"
    fields: tuple[str, ...]  # which of content / reasoning / calls differ ("raised" for a crash)
    detail: str

    def key(self) -> tuple[str, str, str, tuple[str, ...]]:
        return self.case, self.server, self.mode, self.fields


def _value(arguments: str) -> Any:
    """Arguments as a JSON value (built-ins re-serialise them: equal values are not a disagreement);
    text that is no JSON stays text."""
    try:
        return ("json", json.loads(arguments))
    except ValueError:
        return ("text", arguments)


def _anon(e: Any) -> Any:
    if isinstance(e, str):
        return e
    return (e[0], e[1], [(n, _value(a)) for _, n, a in e[2]])


def compare(expect: Expect, got: Any) -> tuple[tuple[str, ...], str]:
    if isinstance(got, str):
        return ("raised",), got
    fields, parts = [], []
    for label, e, g in (("content", expect[0], got[0]), ("reasoning", expect[1], got[1]), ("calls", expect[2], got[2])):
        if e != g:
            fields.append(label)
            parts.append(f"{label}: format {short(e, 50)} got {short(g, 50)}")
    return tuple(fields), "; ".join(parts)


def _try(run: Callable[[], Any]) -> Any:
    try:
        return _anon(run())
    except Exception as e:  # a crash is a disagreement too
        return f"raised {type(e).__name__}: {e}"


def vllm_runs(tok: Any) -> Callable[[K3Case, str, str], Any]:
    """``run(case, name, mode)`` through vLLM (``name``: the parser name for both flags)."""
    import kimi_chat.servers.vllm  # noqa: F401  (registers kimi_chat)

    from . import test_vllm_k3 as V

    def run(case: K3Case, name: str, mode: str) -> Any:
        if mode == "stream":
            return _try(lambda: V.run_stream(tok, case, name=name)[0].result())
        return _try(lambda: V.run_whole(tok, case, name=name))

    return run


def sglang_runs(tok: Any) -> Callable[[K3Case, str, str], Any]:
    """``run(case, who, mode)`` through SGLang (``who``: ``"builtin"`` or ``"ours"``, both as ``kimi_k3``)."""
    from sglang.srt.function_call.function_call_parser import FunctionCallParser
    from sglang.srt.parser.reasoning_parser import ReasoningParser

    from kimi_chat.servers import sglang as plugin

    from . import test_sglang_k3 as S

    def run(case: K3Case, who: str, mode: str) -> Any:
        if who == "ours":
            plugin.register(["kimi_k3"])
        try:
            if mode == "stream":
                return _try(lambda: S.stream_result(tok, case, "kimi_k3")[0].result())
            return _try(lambda: S.whole_result(tok, case, "kimi_k3")[0])
        finally:
            FunctionCallParser.ToolCallParserEnum["kimi_k3"] = S.BUILTIN_TOOL
            ReasoningParser.DetectorMap["kimi_k3"] = S.BUILTIN_REASONING

    return run


def format_expect(case: K3Case, *, ids: bool) -> Expect:
    """What the format says, given what the server passes (``ids``: token ids reach the parser)."""
    return _anon(case.expect if ids or not case.needs_ids else case.text_only_expect)


def differential(servers: tuple[str, ...] = ("vllm", "sglang")) -> tuple[list[Row], list[Row]]:
    """``(builtin rows, ours rows)``: each a disagreement with the format's reading of the case (the
    truth is ``case.expect``: a typed marker in a value is text; a row for ours means ours needs ids it
    was not given, or is wrong)."""
    tok = hf_tokenizer("k3")
    builtin: list[Row] = []
    ours: list[Row] = []
    for server in servers:
        run = vllm_runs(tok) if server == "vllm" else sglang_runs(tok)
        b_name, o_name = ("kimi_k3", "kimi_chat") if server == "vllm" else ("builtin", "ours")
        for case in K3_CASES:
            for mode in ("stream", "whole"):
                truth = format_expect(case, ids=True)
                for name, rows in ((b_name, builtin), (o_name, ours)):
                    fields, detail = compare(truth, run(case, name, mode))
                    if fields:
                        rows.append(Row(case.name, server, mode, fields, detail))
    return builtin, ours


def table(title: str, rows: list[Row]) -> str:
    lines = [title, f"{'case':34} {'server':7} {'mode':6} difference", "-" * 130]
    lines += [f"{r.case:34} {r.server:7} {r.mode:6} {r.detail}" for r in rows]
    lines.append(f"{len(rows)} disagreement(s) over {len(K3_CASES)} cases x 2 modes per server")
    return "\n".join(lines)
