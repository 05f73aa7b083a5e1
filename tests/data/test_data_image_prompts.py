"""Kimi-K3 rows with ``image_prompts`` (one string per image, in order): every sample starts with the official K3
encoder's ids of each trained turn's request, that request given the prompts of the images it holds; rows whose
prompts cannot be used are bad rows whose message names the field and the fix."""

from __future__ import annotations

import copy
import json

import pytest

pytest.importorskip("pyarrow", reason="kimi_chat.data's batch core needs pyarrow (pip install -e '.[data]' in the checkout)")

from conftest import needs_reference  # noqa: E402

from kimi_chat import KimiTokenizer  # noqa: E402
from kimi_chat import markers as M  # noqa: E402
from kimi_chat.data import IGNORE_INDEX, conversations_to_batch  # noqa: E402

pytestmark = needs_reference  # the reference tokenizers and the official K3 encoder

PLACEHOLDER = M.K3_IMAGE_PLACEHOLDER.text
TOOLS = [{"type": "function", "function": {"name": "camera", "description": "Take a photo.",
          "parameters": {"type": "object", "properties": {"where": {"type": "string"}}}}}]
# what the vision processor writes for an image: markers and text (sizes differ, so each prompt is told apart)
PROMPTS = [f"{M.MEDIA_BEGIN.text}image {w}x{w}{M.MEDIA_CONTENT.text}{M.MEDIA_PAD.text}{M.MEDIA_END.text}"
           for w in (8, 16, 24, 32)]
MESSAGES = [
    {"role": "user", "content": [{"type": "text", "text": "What is in this picture?"},
                                 {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}]},
    {"role": "assistant", "content": "", "reasoning_content": "Take a second photo to compare.",
     "tool_calls": [{"id": "functions.camera:0", "type": "function",
                     "function": {"name": "camera", "arguments": json.dumps({"where": "garden"})}}]},
    # an image typed as the placeholder in a string content (the official encoder takes it for an image)
    {"role": "tool", "tool_call_id": "functions.camera:0", "content": f"Photo: {PLACEHOLDER} taken."},
    {"role": "assistant", "content": "A cat, twice.", "reasoning_content": "Both show a cat."},
    {"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "And these?"}, {"type": "image"}]},
    {"role": "assistant", "content": "Two dogs.", "reasoning_content": "Dogs."},
]
IMAGES_BEFORE = [0, 1, 1, 2, 2, 4, 4]  # images in MESSAGES[:i]


@pytest.fixture(scope="module")
def tok():
    return KimiTokenizer.from_reference("k3")


def _official(messages, prompts, *, tools=TOOLS):
    from kimi_chat.families.k3.oracle import official_k3_ids

    return official_k3_ids(copy.deepcopy(messages), copy.deepcopy(tools), add_generation_prompt=True,
                           image_prompts=list(prompts))


@pytest.mark.parametrize("reasoning", ["as-sampled", "keep"])
def test_k3_samples_carry_the_image_prompts_as_the_official_encoder_writes_them(tok, reasoning):
    row = {"id": "pics", "messages": MESSAGES, "tools": TOOLS, "image_prompts": PROMPTS}
    res = conversations_to_batch([row], dialect="kimi-k3", tokenizer=tok, reasoning=reasoning)
    assert [f for f in res.findings if f.kind == "bad_row"] == []
    samples = res.batch.to_pylist()
    assert sorted(t for s in samples for t in s["turns"]) == [1, 3, 5]
    for s in samples:
        for n, i in enumerate(s["turns"]):
            prompt = _official(MESSAGES[:i], PROMPTS[: IMAGES_BEFORE[i]])
            assert s["input_ids"][: len(prompt)] == prompt, f"the request of messages[{i}]"
            if n == 0:
                assert set(s["labels"][: len(prompt)]) == {IGNORE_INDEX}
            assert s["labels"][len(prompt)] != IGNORE_INDEX, f"messages[{i}] trained after its request"
        text = tok.decode(s["input_ids"])
        assert PLACEHOLDER not in text
        assert text.count(M.MEDIA_BEGIN.text) == IMAGES_BEFORE[s["turns"][-1] + 1]
        assert s["length"] == len(s["input_ids"]) == len(s["labels"])


def test_max_length_truncates_at_a_turn_boundary_after_the_prompts(tok):
    row = {"messages": MESSAGES, "tools": TOOLS, "image_prompts": PROMPTS}
    full = conversations_to_batch([row], dialect="kimi-k3", tokenizer=tok).batch.to_pylist()
    (whole,) = full
    res = conversations_to_batch([row], dialect="kimi-k3", tokenizer=tok, max_length=len(whole["input_ids"]) - 1,
                                 overlong="truncate")
    (cut,) = res.batch.to_pylist()
    assert cut["turns"] == [1, 3]
    assert cut["input_ids"] == whole["input_ids"][: len(cut["input_ids"])]
    # the cut ends where messages[3]'s turn ends: the request of messages[5] (its images given) starts with it
    nxt = _official(MESSAGES[:5], PROMPTS[: IMAGES_BEFORE[5]])
    assert nxt[: len(cut["input_ids"])] == cut["input_ids"]


@pytest.mark.parametrize("row, dialect, says", [
    ({"messages": MESSAGES, "image_prompts": PROMPTS[:3]}, "kimi-k3", "3 prompt(s) given but the messages hold 4"),
    ({"messages": MESSAGES, "image_prompts": "one"}, "kimi-k3", "must be a list of strings"),
    ({"messages": [{"role": "user", "content": "hi"},
                   {"role": "assistant", "content": "ok", "reasoning_content": f"see {PLACEHOLDER}"}],
      "image_prompts": []}, "kimi-k3", "messages[1]: <|kimi_image_placeholder|> typed outside the content"),
    ({"messages": MESSAGES[:2], "image_prompts": PROMPTS[:1]}, "kimi-k2.6", "takes no image prompts"),
])
def test_unusable_image_prompts_are_bad_rows_naming_the_field(row, dialect, says):
    tok = KimiTokenizer.from_reference("k3" if dialect == "kimi-k3" else "k2.6")
    res = conversations_to_batch([row], dialect=dialect, tokenizer=tok)
    (bad,) = [f for f in res.findings if f.kind == "bad_row"]
    assert says in bad.message and "image" in bad.message
    assert res.batch.num_rows == 0
