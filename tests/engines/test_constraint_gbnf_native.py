"""The GBNF export of a ``response_format`` constraint (what ``kimi-chat serve --upstream`` hands
llama-server as ``grammar``) run by llama.cpp itself: its grammar parser takes the export and its grammar
sampler, on the tiny random models of both families, makes replies that are JSON values of the schema
(checked with ``jsonschema``, not with kimi_chat's code). The model is noise: what the reply satisfies,
the grammar alone guarantees. Skipped as tests/engines/test_native_constraint.py is."""

from __future__ import annotations

import json

import pytest

from test_native_constraint import HAVE_ALL, K2, K3, k2_gguf, k3_gguf, models  # noqa: F401  (fixtures)

if HAVE_ALL:
    import jsonschema

pytestmark = [pytest.mark.native,
              pytest.mark.skipif(not HAVE_ALL, reason="needs llama-cpp-python, llguidance and jsonschema "
                                 "(bash .ci/install-native.sh .venv)")]

# bounded (every value is from a finite set), and every keyword enforced by the GBNF rules
ANSWER = {"type": "object",
          "properties": {"ok": {"type": "boolean"}, "level": {"enum": [1, 2, 3]},
                         "tag": {"type": "string", "enum": ["a", "b"]}},
          "required": ["ok", "level"], "additionalProperties": False}
RF = {"type": "json_schema", "json_schema": {"name": "answer", "schema": ANSWER}}
ASK = [{"role": "user", "content": "Answer in JSON."}]


def _options(dialect: str) -> dict:
    return {"thinking": False} if dialect == K3 else {}  # K3: the output starts in the response channel


@pytest.mark.parametrize("dialect", [K2, K3])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_llama_cpp_generates_replies_of_the_schema_from_the_gbnf_export(models, dialect, seed):
    from kimi_chat.grammar.request import constraint
    from kimi_chat.output import parse

    model = models[dialect]
    c = constraint(None, dialect=dialect, response_format=RF, **_options(dialect))
    assert c.gbnf_exact and c.gbnf
    ids = model.prompt_ids(ASK, dialect=dialect, **_options(dialect))
    out = list(model.generate(ids, max_tokens=64, grammar=c.gbnf, temperature=1.0, seed=seed))
    assert out and model.is_eog(out[-1]), out  # the grammar completed and generation ended there
    text = model.tokenizer().decode(out[:-1])  # the end-of-generation id is the engine's (any of the model's)
    msg = parse(text, dialect=dialect, **_options(dialect))
    assert not msg.tool_calls and msg.warnings == [], (text, msg.warnings)
    jsonschema.validate(json.loads(msg.content), ANSWER)
