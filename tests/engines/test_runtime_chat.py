"""``runtime_chat.chat_stream`` (the loop of ``NativeModel.chat``) without an engine: the engine's part
(``generate``, ``piece``, ``is_eog``) is a fixed id stream spelled by the reference tokenizer, so what
is checked is what chat_stream does with the ids (each generated id goes to the
parser, so a marker the model typed as text stays text). The same on the real engine:
``tests/engines/test_native.py::test_chat_keeps_a_marker_typed_as_text``."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from kimi_chat import markers as M
from kimi_chat.dialects import Dialect, get_dialect
from kimi_chat.output import Delta
from kimi_chat.reference import reference_file
from kimi_chat.errors import KimiChatError
from kimi_chat.engines.native import ChatResult, NativeModel
from kimi_chat.engines.chat import chat_stream
from kimi_chat.tokens.rendered import render_tokens

pytestmark = pytest.mark.skipif(reference_file("tokenizer/tiktoken.model") is None,
                                reason="tokenizer/tiktoken.model of the reference data not found")

K2 = "kimi-k2-instruct-0905"
K3 = "kimi-k3"
USER = [{"role": "user", "content": "How do I stop?"}]
TYPED_K2 = f"Type {M.IM_END.text} to stop."
TYPED_K3 = f"Type {M.K3_END_OF_MSG.text} or {M.K3_CLOSE.text}message{M.K3_SEP.text} to stop."


class IdStream:
    """A model whose generation is ``ids``: the attributes ``chat_stream`` reads of a NativeModel, with
    the reference tokenizer's bytes as the engine's pieces and its end-of-turn ids as end of generation."""

    def __init__(self, tokenizer: Any, dialect: str, ids: Sequence[int], eog: set[int]) -> None:
        self.tok = tokenizer
        self.dialect: Dialect = get_dialect(dialect)
        self.ids = list(ids)
        self.eog = eog
        self.path = Path("id-stream.gguf")

    def prompt_ids(self, messages: Sequence[Any], *, tools: Any = None, dialect: Any = None, **options: Any) -> list[int]:
        return render_tokens(messages, tokenizer=self.tok, tools=tools, dialect=dialect, special_tokens="text",
                             **options).ids

    def generate(self, prompt: Sequence[int], *, max_tokens: int, grammar: str | None, seed: int | None,
                 temperature: float) -> Iterator[int]:
        yield from self.ids[:max_tokens]

    def is_eog(self, tid: int) -> bool:
        return tid in self.eog

    def piece(self, tid: int) -> bytes:
        return self.tok.id_to_bytes(tid)

    def chat_stream(self, messages: Any, **kwargs: Any) -> Iterator[Any]:
        return chat_stream(self, messages, **kwargs)  # type: ignore[arg-type]


def run(model: IdStream, messages: Any = USER, **kwargs: Any) -> tuple[list[Delta], ChatResult]:
    items = list(chat_stream(model, messages, **kwargs))  # type: ignore[arg-type]
    result = items[-1]
    assert isinstance(result, ChatResult)
    return [d for d in items[:-1] if isinstance(d, Delta)], result


def streamed(deltas: list[Delta], field: str) -> str:
    return "".join(getattr(d, field) or "" for d in deltas)


@pytest.fixture(scope="module")
def k2tok():
    from kimi_chat.tokens.tokenizer import KimiTokenizer

    return KimiTokenizer.from_reference("k2")


@pytest.fixture(scope="module")
def k3tok():
    from kimi_chat.tokens.tokenizer import KimiTokenizer

    return KimiTokenizer.from_reference("k3")


def test_k2_marker_typed_as_text_survives(k2tok):
    ids = k2tok.encode(TYPED_K2, allow_special=False) + [M.IM_END.id]
    assert M.IM_END.id not in ids[:-1]  # the typed <|im_end|> is ordinary tokens
    model = IdStream(k2tok, K2, ids + k2tok.encode("never read", allow_special=False), {M.IM_END.id, M.EOS.id})
    deltas, result = run(model)
    assert result.message["content"] == TYPED_K2
    assert streamed(deltas, "content") == TYPED_K2
    assert result.finish_reason == "stop" and result.parsed.warnings == []
    assert result.completion_ids == ids  # generation stopped at the real <|im_end|>
    assert result.text == TYPED_K2 + M.IM_END.text


def test_k2_length_keeps_typed_marker_and_stops_at_max_tokens(k2tok):
    ids = k2tok.encode(TYPED_K2 + " More text.", allow_special=False)
    model = IdStream(k2tok, K2, ids, {M.IM_END.id, M.EOS.id})
    _, result = run(model, max_tokens=len(ids))
    assert result.message["content"] == TYPED_K2 + " More text." and result.finish_reason == "length"


def test_k3_markers_typed_as_text_survive(k3tok):
    msg = {"role": "assistant", "content": TYPED_K3, "reasoning_content": "they asked"}
    prompt = render_tokens(USER, tokenizer=k3tok, dialect=K3).ids
    full = render_tokens(USER + [msg], tokenizer=k3tok, dialect=K3, add_generation_prompt=False).ids
    assert full[:len(prompt)] == prompt
    ids = full[len(prompt):]
    assert ids[-1] == M.K3_END_OF_MSG.id and ids.count(M.K3_END_OF_MSG.id) == 1  # the typed one is text
    model = IdStream(k3tok, K3, ids, {M.K3_END_OF_MSG.id, M.EOS.id})
    deltas, result = run(model)
    assert result.message["content"] == TYPED_K3 and result.message["reasoning_content"] == "they asked"
    assert streamed(deltas, "content") == TYPED_K3
    assert result.finish_reason == "stop" and result.parsed.warnings == []


def test_chat_returns_the_streams_result(k2tok):
    ids = k2tok.encode(TYPED_K2, allow_special=False) + [M.IM_END.id]
    result = NativeModel.chat(IdStream(k2tok, K2, ids, {M.IM_END.id}), USER)  # type: ignore[arg-type]
    assert isinstance(result, ChatResult) and result.message["content"] == TYPED_K2


class NoResult(IdStream):
    """A chat stream that ends without its ChatResult (a broken stream)."""

    def chat_stream(self, messages: Any, **kwargs: Any) -> Iterator[Any]:
        return iter([Delta(content="x")])


def test_chat_without_a_result_is_an_error_not_an_assert(k2tok):
    """A real check (``python -O`` strips an ``assert``, and chat() would return None)."""
    with pytest.raises(KimiChatError, match="ended without a result"):
        NativeModel.chat(NoResult(k2tok, K2, [], set()), USER)  # type: ignore[arg-type]
