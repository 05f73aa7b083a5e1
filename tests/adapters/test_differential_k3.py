"""The K3 differential run (``k3_differential``) pinned: every disagreement of vLLM's and SGLang's
built-in ``kimi_k3`` parsers with the format, and of ours, listed by case, server, mode and field.
The table is printed (and appended to ``$KIMI_CHAT_DIFF_REPORT`` when set); a change in either list
fails here, so the README and the report stay true. Run the same as a script:
``benchmarks/diff_k3_servers.py``."""

from __future__ import annotations

from .adapter_support import report
from .k3_differential import differential, table

BUILTIN = {
    # the json element (encoding_k3 writes arguments that are no JSON object as one) is never read
    ("json_element", "vllm", "stream", ("calls",)), ("json_element", "vllm", "whole", ("calls",)),
    ("json_element", "sglang", "stream", ("calls",)), ("json_element", "sglang", "whole", ("calls",)),
    # a value that spells <|close|>argument<|sep|> with ordinary tokens is cut (regexes over text)
    ("string_value_spells_the_closer", "vllm", "stream", ("calls",)),
    ("string_value_spells_the_closer", "vllm", "whole", ("calls",)),
    ("string_value_spells_the_closer", "sglang", "stream", ("calls",)),
    ("string_value_spells_the_closer", "sglang", "whole", ("calls",)),
    # vLLM: think skipped (response opened at once) streamed as reasoning, markers included
    ("think_skipped_response_opened", "vllm", "stream", ("content", "reasoning")),
    # vLLM: think skipped straight into the tools channel: the call is reasoning, never executed
    ("think_skipped_tools_opened", "vllm", "stream", ("reasoning", "calls")),
    ("think_skipped_tools_opened", "vllm", "whole", ("reasoning", "calls")),
    # a call cut by max_tokens is dropped (ours hands it on, status unclosed, finish_reason length)
    ("truncated_in_call", "vllm", "stream", ("calls",)), ("truncated_in_call", "vllm", "whole", ("calls",)),
    ("truncated_in_call", "sglang", "stream", ("calls",)), ("truncated_in_call", "sglang", "whole", ("calls",)),
    # no think close, no response open, a bare response close: the grammar keeps the think channel
    # (debatable); vLLM leaks the two tags into the reasoning; SGLang's whole path reads the reply as
    # content (its documented guess), its stream sends the text twice (as reasoning, then as content)
    ("bare_response_close_in_think", "vllm", "stream", ("reasoning",)),
    ("bare_response_close_in_think", "vllm", "whole", ("reasoning",)),
    ("bare_response_close_in_think", "sglang", "stream", ("content",)),
    ("bare_response_close_in_think", "sglang", "whole", ("content", "reasoning")),
}
OURS = {
    # the ids are what tell a typed marker from a real one: vLLM's whole path and SGLang pass text only
    # (vLLM's stream passes them, and the parser then keeps the typed closer as text)
    ("string_value_spells_the_closer", "vllm", "whole", ("calls",)),
    ("string_value_spells_the_closer", "sglang", "stream", ("calls",)),
    ("string_value_spells_the_closer", "sglang", "whole", ("calls",)),
}


def test_differential_k3_against_the_builtins(capsys):
    builtin, ours = differential()
    report(capsys, table("vLLM 0.33.0 / SGLang 0.5.23 built-in kimi_k3 vs the K3 format", builtin) + "\n\n"
           + table("kimi_chat (vLLM kimi_chat, SGLang as kimi_k3) vs the K3 format", ours))
    assert {r.key() for r in builtin} == BUILTIN
    assert {r.key() for r in ours} == OURS
