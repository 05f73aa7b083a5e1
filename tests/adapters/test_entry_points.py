"""The plugin entry points declared in pyproject.toml, loaded by each framework's own plugin loader in
a fresh interpreter (nothing of kimi_chat imported beforehand)."""

from __future__ import annotations

import json
import subprocess
import sys

VLLM = """
import json, sys
from vllm.plugins import load_general_plugins
assert "kimi_chat.servers.vllm" not in sys.modules
load_general_plugins()
from vllm.tool_parsers import ToolParserManager
from vllm.reasoning import ReasoningParserManager
print(json.dumps([ToolParserManager.get_tool_parser("kimi_chat").__qualname__,
                  ReasoningParserManager.get_reasoning_parser("kimi_chat").__qualname__]))
"""

SGLANG = """
import json, os, sys
os.environ["KIMI_CHAT_SGLANG_NAMES"] = "kimi_k2"
from sglang.srt.plugins import load_plugins
assert "kimi_chat.servers.sglang" not in sys.modules
load_plugins()
from sglang.srt.function_call.function_call_parser import FunctionCallParser
from sglang.srt.parser.reasoning_parser import ReasoningParser
print(json.dumps([FunctionCallParser.ToolCallParserEnum["kimi_chat"].__qualname__,
                  FunctionCallParser.ToolCallParserEnum["kimi_k2"].__qualname__,
                  ReasoningParser.DetectorMap["kimi_k2"].__qualname__]))
"""


def _run(code: str) -> list[str]:
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_vllm_general_plugins_entry_point_registers_both_parsers():
    assert _run(VLLM) == ["KimiChatToolParser", "KimiChatReasoningParser"]


def test_sglang_plugins_entry_point_registers_the_detectors():
    assert _run(SGLANG) == ["KimiChatDetector", "KimiChatDetector", "KimiChatReasoningDetector"]
