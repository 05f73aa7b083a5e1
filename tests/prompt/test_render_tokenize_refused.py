"""``render(..., tokenize=True)`` and the other ``apply_chat_template`` arguments that ask for ids
: refused with an error pointing to ``render_tokens``, in both families and every
text-returning function; set to False they are the text, as the official tokenizer returns it."""

from __future__ import annotations

import pytest

from kimi_chat import UnsupportedOptionError, render, render_segments
from kimi_chat.prompt import TOKENIZING_OPTIONS, render_layout

MSGS = [{"role": "user", "content": "Hi"}]


@pytest.mark.parametrize("dialect", ["kimi-k2-instruct", "kimi-k2.6", "kimi-k3"])
@pytest.mark.parametrize("option", TOKENIZING_OPTIONS)
def test_ids_options_are_refused(dialect, option):
    for fn in (render, render_segments):
        with pytest.raises(UnsupportedOptionError, match="render_tokens") as e:
            fn(MSGS, dialect=dialect, **{option: True})
        assert e.value.option == option and option in str(e.value)
        assert isinstance(e.value, TypeError)


def test_render_layout_refuses_them_too():
    with pytest.raises(UnsupportedOptionError, match="render_tokens"):
        render_layout(MSGS, tokenize=True)


@pytest.mark.parametrize("dialect", ["kimi-k2-instruct", "kimi-k3"])
def test_a_truthy_non_bool_is_read_as_the_official_reads_it(dialect):
    with pytest.raises(UnsupportedOptionError):
        render(MSGS, dialect=dialect, tokenize="false")  # `if tokenize:` in apply_chat_template


@pytest.mark.parametrize("dialect", ["kimi-k2-instruct", "kimi-k2.5", "kimi-k3"])
def test_false_is_the_text(dialect):
    text = render(MSGS, dialect=dialect)
    given = render(MSGS, dialect=dialect, tokenize=False, return_dict=False, return_assistant_tokens_mask=False)
    assert given == text


def test_render_tokens_refuses_them_as_well():
    pytest.importorskip("tiktoken", reason="the `tokenizer` extra (tiktoken) is not installed")
    from kimi_chat.reference import reference_file

    if reference_file("tokenizer/tiktoken.model") is None or reference_file("Kimi-K2-Instruct/tokenizer_config.json") is None:
        pytest.skip("reference data not found: set $KIMI_CHAT_REFERENCE_DIR or provide ../shared/reference")
    from kimi_chat import KimiTokenizer, render_tokens

    for ref, dialect in (("k2", "kimi-k2-instruct"), ("k3", "kimi-k3")):
        tok = KimiTokenizer.from_reference(ref)
        with pytest.raises(UnsupportedOptionError):
            render_tokens(MSGS, tokenizer=tok, dialect=dialect, return_assistant_tokens_mask=True)
        given = render_tokens(MSGS, tokenizer=tok, dialect=dialect, tokenize=False).ids
        assert given == render_tokens(MSGS, tokenizer=tok, dialect=dialect).ids
