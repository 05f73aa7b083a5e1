"""Helpers of the constraint tests (tests/grammar/test_constraint*.py): the schema corpus, official-format
completions written by the renderer, and texts sampled from a constraint by a random walk over its
token masks (byte-level tokenizer, markers as special tokens)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from kimi_chat.grammar.request import Constraint, byte_tokenizer
from kimi_chat.prompt import render

CORPUS = json.loads((Path(__file__).parent / "data" / "constraint_schemas.json").read_text(encoding="utf-8"))["schemas"]
_STRUCTURAL = frozenset(b'"}],:0123456789')
USER = [{"role": "user", "content": "Please call the tool."}]


def tool(schema: Any, name: str = "f") -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "parameters": schema}}


def assistant(content: str | None, reasoning: str | None, *calls: tuple[str, Any], compact: bool = False) -> dict:
    m: dict[str, Any] = {"role": "assistant", "content": content}
    if reasoning is not None:
        m["reasoning_content"] = reasoning
    if calls:
        seps = (",", ":") if compact else None
        m["tool_calls"] = [{"id": f"functions.{n}:{i}", "type": "function",
                            "function": {"name": n, "arguments": json.dumps(a, ensure_ascii=False, separators=seps)}}
                           for i, (n, a) in enumerate(calls)]
    return m


def completion(message: dict[str, Any], tools: list | None, dialect: str, **options: Any) -> str:
    """What the renderer writes for ``message`` after the generation prompt: the model's part (with
    its end-of-turn marker where the template writes one for the last message)."""
    prompt = render(USER, dialect=dialect, tools=tools, **options)
    full = render(USER + [message], dialect=dialect, tools=tools, add_generation_prompt=False, **options)
    if not full.startswith(prompt):  # pragma: no cover - the renderers extend the prompt
        raise AssertionError("the conversation does not extend the generation prompt")
    return full[len(prompt):]


def allowed(mask: bytes, n: int) -> list[int]:
    """The token ids a bitmask (32-bit little-endian words) allows, below ``n``."""
    out = []
    for i in range(n):
        if mask[i // 8] >> (i % 8) & 1:
            out.append(i)
    return out


def sample(c: Constraint, rnd: random.Random, max_tokens: int = 300) -> str | None:
    """A text the constraint accepts, drawn by a random walk over its masks on the byte tokenizer
    (``None`` when the walk did not end within ``max_tokens``)."""
    tok, ids = byte_tokenizer(c.dialect)
    names = {i: s for s, i in ids.items()}
    m = c.matcher(tok)
    out = bytearray()
    for _ in range(max_tokens):
        choices = allowed(m.compute_bitmask(), tok.vocab_size)
        if tok.eos_token in choices and (len(choices) == 1 or rnd.random() < 0.3):
            return out.decode("utf-8")
        choices = [t for t in choices if t != tok.eos_token]
        # prefer structure and short texts: in a large choice (free text, a string), a special token
        # or a structural byte when one is allowed, else a printable ASCII character most of the time
        structural = [t for t in choices if t in names or t in _STRUCTURAL]
        if len(choices) > 40 and structural and rnd.random() < 0.6:
            t = rnd.choice(structural)
        elif len(choices) > 40 and rnd.random() < 0.8:
            t = rnd.choice([t for t in choices if 0x20 <= t < 0x7F] or choices)
        else:
            t = rnd.choice(choices)
        if not m.consume_token(t):  # pragma: no cover - the mask allowed it
            raise AssertionError(m.get_error())
        out += names[t].encode() if t in names else bytes([t])
    return None
