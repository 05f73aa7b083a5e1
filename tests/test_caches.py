"""The per-request caches (:mod:`kimi_chat.caches`): exact content keys, bounded LRU,
thread-safe, complete registry, and outputs that never depend on whether a cache is warm or cold.
Every expected value is the same computation with the caches empty (the oracle modules run their
properties both ways: the ``cache_state`` fixture)."""

from __future__ import annotations

import importlib
import marshal
import pkgutil
import re
import threading
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

import kimi_chat
from kimi_chat import caches, render
from kimi_chat.dialects import K2_DIALECTS
from kimi_chat.testing.strategies import requests

from conftest import needs_reference

PACKAGE = Path(kimi_chat.__file__).parent


def tool(name: str, **properties) -> dict:
    return {"type": "function", "function": {"name": name, "description": f"{name}.",
                                             "parameters": {"type": "object", "properties": properties}}}


USER = [{"role": "user", "content": "hi"}]


def cold(fn):
    caches.clear_all()
    return fn()


# ------------------------------------------------------------------------------------------ keys


def test_content_key_tells_types_and_order_apart():
    values = [1, 1.0, True, "1", [1], (1,), {"a": 1, "b": 2}, {"b": 2, "a": 1}, {1: "a"}, {"1": "a"}, None, 0.0, -0.0]
    keys = [caches.content_key(v) for v in values]
    assert None not in keys and len(set(keys)) == len(values)


def test_content_key_of_equal_values_is_equal_whoever_holds_their_parts():
    """An equal request gets the same key when something else holds a part of it (a cache keeping its
    schema, the caller keeping a tool): marshal's back-references (format 3 on) depend on that."""
    def request():
        return [{"type": "function", "function": {"name": "f", "parameters": {"type": "object",
                                                                              "properties": {"a": {"type": "integer"}}}}}]

    alone = request()
    key = caches.content_key(alone)
    held = request()
    kept = [held[0]["function"]["parameters"], held[0]["function"]["parameters"]["properties"]["a"], held[0]]  # noqa: F841
    assert caches.content_key(held) == key
    interned = [{"type": "function", "function": {"name": "".join(["f"]), "parameters": {}}}]
    assert caches.content_key(interned) == caches.content_key([{"type": "function", "function": {"name": "f", "parameters": {}}}])


def test_exact_key_is_the_version_2_text_read_quickly_or_not():
    """exact_key finds the version-2 key through the quick (version-4) text of a value read before: the same
    bytes as marshal.dumps(value, 2), cold and warm, when sharing or reference counts change the quick text."""

    caches.clear_all()

    def request():
        return [{"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {
            "a": {"type": "integer"}, "b": {"type": "array", "items": [1, 1.0, True, None, "é", (1, "x")]},
            "c": {"type": "integer"}}}}}]

    alone = request()
    want = marshal.dumps(alone, 2)
    assert caches.exact_key(alone) == want  # cold: computed
    assert caches.exact_key(alone) == want  # warm: through the quick text
    held = request()
    kept = [held[0]["function"]["parameters"]["properties"]]  # noqa: F841  (one more reference: another quick text)
    shared = request()
    props = shared[0]["function"]["parameters"]["properties"]
    props["c"] = props["a"]  # an equal part shared: a back-reference in the quick text
    assert len({marshal.dumps(v, 4) for v in (alone, held, shared)}) == 3
    assert caches.exact_key(held) == want and caches.exact_key(shared) == want
    other = request()
    other[0]["function"]["parameters"]["properties"]["b"]["items"][1] = 1  # 1 for 1.0: another value
    assert caches.exact_key(other) == marshal.dumps(other, 2) != want
    with pytest.raises(ValueError):
        caches.exact_key([object()])


def test_content_key_refuses_objects_subclasses_and_big_values():
    class S(str):
        pass

    assert caches.content_key([S("a")]) is None
    assert caches.content_key([object()]) is None
    assert caches.content_key("x" * 100, max_key_bytes=50) is None


# ------------------------------------------------------------------------------------------ LRU


def test_lru_is_bounded_and_drops_the_least_recently_used():
    c = caches.LRUCache(None, 3)
    for k in "abc":
        c.put(k, k.upper())
    assert c.get("a") == "A"  # a is now the most recently used
    c.put("d", "D")
    assert len(c) == 3 and c.get("b") is None and c.get("a") == "A" and c.get("d") == "D"


def test_bypassed_makes_every_lookup_miss_and_keeps_what_is_stored():
    c = caches.LRUCache(None, 3)
    c.put("a", "A")
    with caches.bypassed():
        c.put("b", "B")
        assert (c.get("a"), c.get("b", "-"), c.find("a"), c.get_or_compute("c", str.lower, "X")) == (None, "-", None, "x")
        # the exact keys are the same with their quick map bypassed
        assert caches.exact_key([{"a": 1}]) == caches.content_key([{"a": 1}]) == marshal.dumps([{"a": 1}], caches.KEY_VERSION)
    assert (c.get("a"), c.get("b"), c.get("c")) == ("A", "B", "x")


def test_lru_with_a_weight_bound_drops_the_least_recently_used_until_it_fits():
    c = caches.LRUCache(None, 100, max_weight=10)
    for k, w in (("a", 4), ("b", 4), ("c", 2)):
        c.put(k, k.upper(), w)
    assert c.weight == 10 and len(c) == 3
    c.get("a")  # a is now the most recently used
    c.put("d", "D", 3)  # 13 > 10: b goes (4), then it fits
    assert c.get("b") is None and c.weight == 9 and {k: c.get(k) for k in "acd"} == {"a": "A", "c": "C", "d": "D"}
    c.put("a", "A2", 1)  # a new weight for a kept key
    assert c.weight == 6 and c.get("a") == "A2"
    c.put("e", "E", 11)  # heavier than the bound: everything goes, itself too
    assert len(c) == 0 and c.weight == 0
    c.put("f", "F", 2)
    c.clear()
    assert len(c) == 0 and c.weight == 0


@needs_reference
def test_text_ids_equal_encode_ordinary_and_stay_bounded(monkeypatch):
    from kimi_chat.tokens import text_ids as T
    from kimi_chat.tokens.tokenizer import KimiTokenizer

    tok = KimiTokenizer.from_reference("k3")
    monkeypatch.setattr(T, "BUDGET_CHARS", 500)
    ids = T.TextIds(tok)
    pieces = ["hi", "<|open|>typed", "x" * 48, *(f"{k} " + "long words here " * 10 for k in range(10)), "y" * 30_000]
    for _ in range(2):  # cold, then warm
        assert [ids.ids(p) for p in pieces] == [tok.encoding.encode_ordinary(p) for p in pieces]
    assert set(ids.short) == {"hi", "<|open|>typed", "x" * 48}  # special-token text stays text
    assert ids.long.weight <= 500 and 0 < len(ids.long) < 10  # the least recently used went; 30 000 chars: never kept


_PIECES = ["<|im_end|>", "<|im_user|>", "<think>", "</think>", "[EOS]", "<|foo|>", "<|im_end", "|>", "<b>", "[x]",
           "<", "[", "|", " ", "\n", "hello", "é", "東京", "<|reserved_token_163700|>"]


@needs_reference
@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), max_size=30), st.sampled_from(["k2", "k2.6", "k3"]))
def test_with_specials_equals_encode_with_every_name_allowed(pieces, config):
    """TextIds.with_specials (text between special-token names by cached ordinary ids) gives tiktoken's
    encode with every name special, for text mixing names, name-shaped non-names and partial names; twice
    (the second time from the cache)."""
    from kimi_chat.tokens.text_ids import TextIds
    from kimi_chat.tokens.tokenizer import KimiTokenizer

    tok = KimiTokenizer.from_reference(config)
    text = "".join(pieces)
    expected = tok.encoding.encode(text, allowed_special=tok._special_names, disallowed_special=())
    ids = TextIds(tok)
    assert ids.with_specials(text) == expected
    assert ids.with_specials(text) == expected


def test_get_or_compute_does_not_store_exceptions():
    c = caches.LRUCache(None, 4)
    calls = []

    def boom():
        calls.append(1)
        raise ValueError("no")

    for _ in range(2):
        with pytest.raises(ValueError):
            c.get_or_compute("k", boom)
    assert len(calls) == 2 and len(c) == 0
    assert c.get_or_compute(None, lambda: 5) == 5 and len(c) == 0  # None: not cached


def test_lru_under_threads_stays_bounded_and_consistent():
    c = caches.LRUCache(None, 8)

    def work(t: int) -> None:
        for i in range(2000):
            k = (t + i) % 20
            c.put(k, k * 10)
            v = c.get(k)
            assert v is None or v == k * 10

    with ThreadPoolExecutor(4) as ex:
        list(ex.map(work, range(4)))
    assert len(c) <= 8


# ------------------------------------------------------------------------------------ registry


def _import_all() -> None:
    for info in pkgutil.walk_packages([str(PACKAGE)], "kimi_chat."):
        if info.name.endswith("__main__"):
            continue
        try:
            importlib.import_module(info.name)
        except ImportError:  # an optional engine or server (vllm, sglang, llama_cpp) not installed here
            continue


def test_registry_is_complete():
    """Every cache object of the package is registered, and no module keeps a per-request cache of its
    own beside kimi_chat.caches (the caches that hold loaded files or compiled grammars, keyed on a
    path or a dialect, are listed)."""
    _import_all()
    found = {}
    for name, mod in list(__import__("sys").modules.items()):
        if name.startswith("kimi_chat.") and mod is not None:
            for value in vars(mod).values():
                kinds = (caches.LRUCache, caches.Generations, caches.PerTokenizer)
                if isinstance(value, kinds) and value.name is not None:
                    found[value.name] = value
    assert found and all(caches.REGISTRY.get(n) is v for n, v in found.items())
    assert {"k2.tool_declarations", "k3.tools_json", "k3.tokenizer_ids", "tokens.special_names", "tokens.text_ids",
            "tokens.prompt_ids", "messages.valid_tools", "grammar.constraints",
            "grammar.llg_tokenizers"} <= set(caches.REGISTRY)
    # caches of loaded data, not of requests: files, compiled templates and grammars, per dialect or path
    # (the validator's lint marker pattern per family; the constraint's compiled JSON-schema validators, per schema, and
    # byte-level llguidance tokenizers, per dialect)
    known = {"tokens/tokenizer.py": 2, "reference/oracle.py": 1, "checks/verification/rendering.py": 1,
             "checks/verification/identification.py": 1, "validation.py": 1, "families/k2/format.py": 1,
             "families/k3/format.py": 1, "testing/strategies.py": 2, "testing/strategies_k3.py": 1,
             "servers/family.py": 1, "families/k2/serving.py": 1, "grammar/request.py": 3}
    pattern = re.compile(r"WeakKeyDictionary\(|OrderedDict\(|@lru_cache|@functools\.lru_cache|_CACHE: dict|cache: dict")
    seen = {}
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel == "caches.py":
            continue
        n = len(pattern.findall(path.read_text(encoding="utf-8")))
        if n:
            seen[rel] = n
    assert seen == known, ("a new cache: build it on kimi_chat.caches (LRUCache / Generations / PerTokenizer) so tests "
                           "can clear it")


def test_clear_all_empties_every_cache():
    for _ in range(2):  # tools read a second time are keyed and cached (admitted_key)
        render(USER, tools=[tool("f")], dialect="kimi-k2-instruct-0905")
        render(USER, tools=[tool("f")], dialect="kimi-k3")
    assert len(caches.REGISTRY["k2.tool_declarations"]) and len(caches.REGISTRY["k3.tools_json"])
    caches.clear_all()
    assert all(len(c) == 0 for c in caches.REGISTRY.values())


# ------------------------------------------------------------------------- outputs warm = cold


@pytest.mark.parametrize("dialect", [*K2_DIALECTS, "kimi-k3"])
def test_tool_declarations_warm_equal_cold(dialect):
    variants = [[tool("f", x={"default": 1})], [tool("f", x={"default": True})], [tool("f", x={"default": 1.0})],
                [tool("f", x={"type": "string"}), tool("g")], [tool("g"), tool("f", x={"type": "string"})],
                [tool("f", x={"enum": ({"b": 1, "a": 2},)})], [tool("f", x={"enum": [{"b": 1, "a": 2}]})]]
    expected = [cold(lambda t=t: render(USER, tools=t, dialect=dialect)) for t in variants]
    for _ in range(2):  # warm, and warm in another order
        assert [render(USER, tools=t, dialect=dialect) for t in variants] == expected
        variants.reverse()
        expected.reverse()


def test_tools_read_once_get_no_key_and_are_cached_from_their_second_reading():
    """A tool list never seen before (what a multi-tenant server mostly sees) is rendered without an
    exact key and without cache entries: only its quick text is remembered; the second reading keys
    and stores it, the third is a hit. Outputs equal the uncached render throughout."""
    caches.clear_all()
    tools = [tool("once", x={"type": "string"})]
    want = cold(lambda: render(USER, tools=tools, dialect="kimi-k2-instruct-0905"))
    caches.clear_all()
    assert render(USER, tools=tools, dialect="kimi-k2-instruct-0905") == want
    assert len(caches.REGISTRY["k2.tool_declarations"]) == 0 and len(caches.REGISTRY["caches.quick_keys"]) == 0
    assert len(caches.REGISTRY["caches.seen_once"]) == 1
    assert render(USER, tools=tools, dialect="kimi-k2-instruct-0905") == want
    assert len(caches.REGISTRY["k2.tool_declarations"]) == 1
    first, second = caches.admitted_key([{"a": 1}]), caches.admitted_key([{"a": 1}])
    assert first is None and second == marshal.dumps([{"a": 1}], 2)
    with pytest.raises(ValueError):
        caches.admitted_key([object()])  # not plain data: the caller's check


def test_mutated_tools_are_a_new_key():
    tools = [tool("f", x={"type": "string"})]
    first = render(USER, tools=tools, dialect="kimi-k2.6")
    tools[0]["function"]["description"] = "changed."
    second = render(USER, tools=tools, dialect="kimi-k2.6")
    assert second != first and second == cold(lambda: render(USER, tools=tools, dialect="kimi-k2.6"))


@pytest.mark.parametrize("dialect", ["kimi-k2.5", "kimi-k2.6"])
def test_typescript_warning_given_on_every_render(dialect):
    tools = [tool("f", x=False)]  # the boolean schema false: encoded as null, with a warning
    for _ in range(2):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            render(USER, tools=tools, dialect=dialect)
        assert any("boolean schema false" in str(w.message) for w in caught)


def test_concurrent_renders_equal_single_threaded(monkeypatch):
    """Threads rendering many tool lists at once, through caches small enough to evict all the time."""
    for c in caches.REGISTRY.values():
        if isinstance(c, caches.LRUCache):
            monkeypatch.setattr(c, "maxsize", 3)
    jobs = [(d, [tool(f"t{i}", x={"type": "string"}), tool("common")])
            for d in [*K2_DIALECTS, "kimi-k3"] for i in range(6)]
    caches.clear_all()
    expected = [render(USER, tools=t, dialect=d) for d, t in jobs]
    caches.clear_all()
    barrier = threading.Barrier(4)

    def work(k: int) -> list[str]:
        barrier.wait()
        order = jobs[k:] + jobs[:k]
        out = [render(USER, tools=t, dialect=d) for d, t in order * 3]
        return (out[len(jobs) - k:] + out[:len(jobs) - k])[:len(jobs)]

    with ThreadPoolExecutor(4) as ex:
        results = list(ex.map(work, range(4)))
    assert all(r == expected for r in results)


@needs_reference
def test_a_remembered_prompt_is_reused_only_where_it_ends_with_its_special_token():
    """Ids remembered for a prompt (cut from a longer prompt's ids) start a later prompt that begins with its
    text, which then encodes as the whole text does; ids that do not end with the special token their text ends
    with are not kept (a BPE merge could cross that end)."""
    from kimi_chat import render_tokens
    from kimi_chat.tokens import prompt_ids
    from kimi_chat.tokens.prompt_ids import encode_whole, remember_prompt
    from kimi_chat.tokens.tokenizer import KimiTokenizer

    tok = KimiTokenizer.from_reference("k2.6")
    caches.clear_all()
    turns = [{"role": "user", "content": "What is 2+2? " * 30}, {"role": "assistant", "content": "4."},
             {"role": "user", "content": "And 3+3?"}]
    first = render(turns[:1], dialect="kimi-k2.6", add_generation_prompt=True)
    whole = render(turns, dialect="kimi-k2.6", add_generation_prompt=True)
    assert whole.startswith(first)  # the request of the first turn starts the later one
    first_ids = tok.encode(first)
    assert remember_prompt(tok, first, first_ids)
    known = prompt_ids._KNOWN.get(tok, prompt_ids._Known)
    assert [p for p, _ in known.prompts.items()] == [first]
    # a wrong id in the remembered prefix would show in the result: it is reused as it was given
    marked = [first_ids[0] + 1, *first_ids[1:]]
    caches.clear_all()
    remember_prompt(tok, first, marked)
    reused = encode_whole(tok, whole)
    assert reused[: len(marked)] == marked and reused[len(marked):] == tok.encode(whole)[len(first_ids):]
    caches.clear_all()
    remember_prompt(tok, first, first_ids)
    got = encode_whole(tok, whole)
    assert got == tok.encode(whole)
    # text that ends in ordinary text (no special token at its end) is not kept
    caches.clear_all()
    assert not remember_prompt(tok, first + "x", tok.encode(first + "x"))
    assert not remember_prompt(tok, first, first_ids[:-1])
    # special-token text typed in a message and encoded as text (render_tokens' default policy): not the ids
    # every policy would reuse, so not kept
    typed = render([{"role": "user", "content": "say <|im_end|> now"}], dialect="kimi-k2.6", add_generation_prompt=True)
    typed_ids = render_tokens([{"role": "user", "content": "say <|im_end|> now"}], tokenizer=tok, dialect="kimi-k2.6",
                              add_generation_prompt=True).ids
    assert typed_ids != tok.encode(typed)  # the typed name is text in these ids
    assert not remember_prompt(tok, typed, typed_ids)
    assert remember_prompt(tok, typed, tok.encode(typed))
    caches.clear_all()
    assert len(prompt_ids._KNOWN.get(tok, prompt_ids._Known).prompts) == 0


@needs_reference
@pytest.mark.oracle
@pytest.mark.parametrize("dialect", list(K2_DIALECTS))
@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_render_tokens_warm_equal_cold(dialect, data):
    """The ids with the first turn's body cached equal a cold render's."""
    from kimi_chat import render_tokens
    from kimi_chat.tokens.tokenizer import KimiTokenizer

    req = data.draw(requests(dialect))
    tok = KimiTokenizer.from_reference("k2.6")  # loaded once (cached); every K2 marker
    kw = dict(tools=req["tools"], dialect=dialect, add_generation_prompt=req["add_generation_prompt"], **req["options"])
    first = cold(lambda: render_tokens(req["messages"], tokenizer=tok, **kw).ids)
    again = render_tokens(req["messages"], tokenizer=tok, **kw).ids
    assert first == again


@needs_reference
@pytest.mark.parametrize("dialect", ["kimi-k2-instruct-0905", "kimi-k2.6"])
def test_prompt_ids_from_a_known_prefix_equal_encode_of_the_whole_text(dialect):
    """A conversation sent again with more turns (the previous prompt, ending with the generation prompt's
    special token, is a prefix of the new one) and a request sent again get the whole text's ids."""
    from kimi_chat import render_tokens
    from kimi_chat.tokens import prompt_ids
    from kimi_chat.tokens.tokenizer import KimiTokenizer

    tok = KimiTokenizer.from_reference("k2.6")
    caches.clear_all()
    turns = [{"role": "system", "content": "You are helpful. " * 5}, {"role": "user", "content": "What is 2+2?"},
             {"role": "assistant", "content": "4."}, {"role": "user", "content": "And <b>3+3</b>?"},
             {"role": "assistant", "content": "6, then."}, {"role": "user", "content": "Thanks!"}]
    known = prompt_ids._KNOWN.get(tok, prompt_ids._Known)
    for n in (2, 4, 6, 6):
        msgs = turns[:n]
        text = render(msgs, dialect=dialect, add_generation_prompt=True)
        stored = [p for p, _ in known.prompts.items()]
        ids = render_tokens(msgs, tokenizer=tok, dialect=dialect, add_generation_prompt=True).ids
        assert ids == tok.encode(text)
        if n > 2:
            assert any(text.startswith(p) for p in stored)  # it had a prefix to start from
    assert [p for p, _ in known.prompts.items()][-1] == text
    # no generation prompt: 0905 leaves the last turn open (the text ends in text): not kept as a prefix
    caches.clear_all()
    open_end = render(turns[:3], dialect="kimi-k2-instruct-0905", add_generation_prompt=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ids = render_tokens(turns[:3], tokenizer=tok, dialect="kimi-k2-instruct-0905", add_generation_prompt=False).ids
    assert ids == tok.encode(open_end)
    assert len(prompt_ids._KNOWN.get(tok, prompt_ids._Known).prompts) == 0


@needs_reference
@pytest.mark.oracle
@pytest.mark.parametrize("dialect", list(K2_DIALECTS))
@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_render_tokens_after_an_earlier_turn_equal_cold(dialect, data):
    """The ids of a conversation whose earlier prompt (its first messages with the generation prompt) was
    encoded before, so that the prompt cache starts from it, equal the ids with every cache empty."""
    from kimi_chat import render_tokens
    from kimi_chat.tokens.tokenizer import KimiTokenizer

    req = data.draw(requests(dialect))
    msgs = req["messages"]
    cut = data.draw(st.integers(1, max(1, len(msgs) - 1)))
    tok = KimiTokenizer.from_reference("k2.6")
    kw = dict(tools=req["tools"], dialect=dialect, **req["options"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        full = cold(lambda: render_tokens(msgs, tokenizer=tok, add_generation_prompt=True, **kw).ids)
        caches.clear_all()
        render_tokens(msgs[:cut], tokenizer=tok, add_generation_prompt=True, **kw)  # the earlier turn
        again = render_tokens(msgs, tokenizer=tok, add_generation_prompt=True, **kw).ids
    assert again == full


@needs_reference
def test_first_turn_ids_equal_encode_of_the_whole_text():
    from kimi_chat import render_tokens
    from kimi_chat.tokens.tokenizer import KimiTokenizer

    tok = KimiTokenizer.from_reference("k2")
    tools = [tool(f"t{i}", x={"type": "string", "description": "words " * 20}) for i in range(3)]
    msgs = [{"role": "system", "content": "You are helpful. " * 30}, *USER]
    for t in (tools, None):
        text = render(msgs, tools=t, dialect="kimi-k2-instruct-0905")
        whole = tok.encode(text)
        assert cold(lambda: render_tokens(msgs, tokenizer=tok, tools=t, dialect="kimi-k2-instruct-0905").ids) == whole
        assert render_tokens(msgs, tokenizer=tok, tools=t, dialect="kimi-k2-instruct-0905").ids == whole
