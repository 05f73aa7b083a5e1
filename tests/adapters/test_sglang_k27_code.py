"""SGLang serves Kimi-K2.7-Code by the served model's name, as vLLM's renderer and ``serve`` do: its prompt always
opens ``<think>`` (Kimi-K2.6's template with ``thinking`` forced), so the reasoning detector splits the output's
reasoning off even when the request's ``chat_template_kwargs`` say ``thinking: false`` (SGLang's
``force_reasoning`` false). The served name is published through SGLang's own server configuration."""

from __future__ import annotations

import pytest

from kimi_chat import markers as M
from kimi_chat.servers import sglang as plugin  # noqa: F401  (registers "kimi_chat")
from kimi_chat.servers.sglang.constraint import served_dialect, served_names

from .sglang_serving import request, run_stream, serving_chat

MESSAGES = [{"role": "user", "content": "2+2?"}]


def _streamed(tok, served_model_name: str, ctk: dict) -> tuple[str, str]:
    s = serving_chat(tok, "kimi_chat", "kimi_chat", served_model_name=served_model_name)
    # the model's output after a prompt that opened <think>: reasoning, its end, the answer, the turn's end
    out = [*tok.encode("Adding.", add_special_tokens=False), tok.convert_tokens_to_ids(M.THINK_END.text),
           *tok.encode("4", add_special_tokens=False), M.IM_END.id]
    prompt = tok.encode("x", add_special_tokens=False)
    payloads = run_stream(s, request(MESSAGES, None, True, chat_template_kwargs=ctk), prompt, out, True)
    deltas = [ch.get("delta") or {} for p in payloads for ch in p.get("choices", [])]
    return ("".join(d.get("reasoning_content") or "" for d in deltas),
            "".join(d.get("content") or "" for d in deltas))


def test_the_served_name_chooses_k27_code(tok_reasoning) -> None:
    serving_chat(tok_reasoning, "kimi_chat", "kimi_chat", served_model_name="moonshotai/Kimi-K2.7-Code")
    assert "moonshotai/Kimi-K2.7-Code" in served_names()
    d = served_dialect()
    assert d is not None and d.name == "kimi-k2.7-code"
    # Kimi-K2.6 ships a template that tells it apart: its name chooses nothing here (the template decides)
    serving_chat(tok_reasoning, "kimi_chat", "kimi_chat", served_model_name="moonshotai/Kimi-K2.6")
    assert served_dialect() is None


@pytest.mark.parametrize("ctk", [{}, {"thinking": False}])
def test_k27_code_output_starts_inside_reasoning_whatever_the_switch(tok_reasoning, ctk) -> None:
    assert _streamed(tok_reasoning, "moonshotai/Kimi-K2.7-Code", ctk) == ("Adding.", "4")


def test_k26_with_thinking_off_is_all_content(tok_reasoning) -> None:
    # the contrast: Kimi-K2.6 honours thinking: false (its prompt closes <think></think>), so nothing is reasoning
    reasoning, content = _streamed(tok_reasoning, "moonshotai/Kimi-K2.6", {"thinking": False})
    assert reasoning == "" and content.endswith("4")
