"""Bounded streaming reads and bounded warnings.

* 24.6: reading ``StreamParser.message`` after every feed costs what changed (closed calls are not
  snapshotted again, the text after the end of the turn is not re-joined from all its pieces), and
  the server body stage decides each call in O(1) (``StreamParser.tool_call``): counted, not timed
  (timings: ``benchmarks/parse_reads.py``); results equal the whole parse.
* 24.7: repeated stray-marker warnings are merged (a count and the offsets of the first and last),
  and a kind lists at most ``MAX_ENTRIES`` entries before one overflow entry: memory stays bounded.
"""

from __future__ import annotations

import random
import tracemalloc

import pytest
from hypothesis import given
from hypothesis import strategies as st
from parse_helpers import AB, CB, CE, END, IM_MIDDLE, SB, SE, THINK, UNTHINK, call, section

from kimi_chat import markers as M
from kimi_chat.servers.stages import BodyStage
from kimi_chat.output import ParseWarning, StreamParser, parse
from kimi_chat.families.k2 import calls as toolcalls
from kimi_chat.output.warnlog import MAX_ENTRIES

PAD = M.PAD.text
K3_OPEN, K3_SEP = M.K3_OPEN.text, M.K3_SEP.text


def stray(spelling: str, offset: int, count: int = 1, last: int | None = None) -> ParseWarning:
    return ParseWarning("stray_marker", f"stray marker {spelling} dropped", offset, spelling, count, last)


def streamed(text: str, cuts: list[int], dialect: str = "kimi-k2-instruct", read: bool = True):
    p = StreamParser(dialect)
    prev = 0
    for c in sorted(set(cuts)) + [len(text)]:
        p.feed(text[prev:c])
        prev = c
        if read:
            p.message  # noqa: B018 - a read after every feed must not change the result
    p.finish()
    return p.message


# ------------------------------------------------------------------------------ 24.7 merged warnings


def test_consecutive_identical_stray_markers_are_one_warning():
    msg = parse("a" + PAD * 5 + "b")
    assert msg.content == "ab"
    # the five [PAD] at offsets 1, 6, 11, 16, 21: one warning standing for five (it used to be five)
    assert msg.warnings == [stray(PAD, 1, 5, 21)]
    assert str(msg.warnings[0]) == f"stray marker {PAD} dropped (5 times, at offsets 1 to 21)"


def test_text_between_repeats_does_not_split_them_a_different_warning_does():
    text = "a" + PAD + "b" + PAD + "c" + IM_MIDDLE + PAD
    msg = parse(text)
    assert msg.content == "abc"
    assert msg.warnings == [stray(PAD, 1, 2, 7), stray(IM_MIDDLE, 13), stray(PAD, 13 + len(IM_MIDDLE))]
    assert str(msg.warnings[1]) == f"stray marker {IM_MIDDLE} dropped (at offset 13)"


def test_other_kinds_are_not_merged():
    one = call("functions.f:0")  # closed before its arguments: missing_argument_begin
    msg = parse(section(one, call("functions.f:1")))
    assert [(w.kind, w.count, w.last_offset) for w in msg.warnings] == [("missing_argument_begin", 1, None)] * 2
    assert msg.warnings[0].offset != msg.warnings[1].offset


def test_k3_stray_tags_merge_too():
    tag = K3_OPEN + "bogus" + K3_SEP
    msg = parse("x" + tag + tag + "y" + PAD, dialect="kimi-k3")
    assert msg.reasoning_content == "xy"
    assert msg.warnings == [stray(tag, 1, 2, 1 + len(tag)), stray(PAD, 2 + 2 * len(tag))]


def test_past_max_entries_the_rest_of_a_kind_is_one_overflow_entry():
    unit = PAD + IM_MIDDLE  # alternating: no two consecutive identical
    n = MAX_ENTRIES + 250  # n units: 2n stray markers, then one more inside a tool-call section
    start = n * len(unit) + 1 + len(SB)  # of the "q" in the section
    msg = parse(unit * n + "z" + SB + "q" + PAD)
    head = msg.warnings[:MAX_ENTRIES]
    assert [w.text for w in head] == [PAD, IM_MIDDLE] * (MAX_ENTRIES // 2)
    assert all(w.count == 1 for w in head)
    over = msg.warnings[MAX_ENTRIES]
    assert (over.kind, over.text) == ("stray_marker", "")
    assert over.message == f"further stray_marker warnings merged into one (after {MAX_ENTRIES} listed)"
    assert over.count == 2 * n - MAX_ENTRIES + 1
    assert over.offset == MAX_ENTRIES // 2 * len(unit)
    assert over.last_offset == start + 1  # the [PAD] in the section: still merged into it
    # warnings of other kinds still come, after it
    assert msg.warnings[MAX_ENTRIES + 1:] == [
        ParseWarning("text_in_section", "text inside a tool-call section, outside any call, dropped", start, "q")]
    assert sum(w.count for w in msg.warnings if w.kind == "stray_marker") == 2 * n + 1
    assert msg.content == "z"


@pytest.mark.parametrize("unit", [PAD, PAD + IM_MIDDLE])
def test_stray_markers_retain_memory_bounded_by_the_input(unit):
    text = unit * (200_000 // len(unit))
    parse(unit)  # the compiled format and its caches are not what a parse retains
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        msg = parse(text)
        kept = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    assert sum(w.count for w in msg.warnings) == text.count(PAD) + text.count(IM_MIDDLE)
    assert len(msg.warnings) <= MAX_ENTRIES + 1
    # one warning per marker retained 31 ([PAD]<|im_middle|>) to 55 ([PAD]) bytes per input character;
    # now only the listed entries (at most MAX_ENTRIES + 1, ~0.26 MB): ~1.3 bytes per character here,
    # ~0 for [PAD] alone
    assert kept < len(text) * 2


@given(st.lists(st.sampled_from(["a", " ", PAD, IM_MIDDLE, END, SB, CB, "functions.f:0", AB, "{}", CE, SE]),
                max_size=40),
       st.lists(st.integers(0, 400), max_size=10))
def test_merged_warnings_are_the_same_whole_or_streamed(parts, cuts):
    text = "".join(parts)
    whole, read, unread = parse(text), streamed(text, cuts), streamed(text, cuts, read=False)
    assert read == whole
    assert unread == whole


def test_merged_warnings_grow_between_reads():
    p = StreamParser()
    p.feed("a" + PAD)
    first = p.message
    assert first.warnings == [stray(PAD, 1)]
    p.feed(PAD + PAD)
    second = p.message
    assert second.warnings == [stray(PAD, 1, 3, 11)]
    assert first.warnings == [stray(PAD, 1)]  # an earlier read is not changed
    p.finish()
    final, whole = p.message, parse("a" + PAD * 3)
    assert final == whole


# ------------------------------------------------------------------------------ 24.6 read cost


def many_calls(n: int) -> str:
    return section(*(call(f"functions.f:{i}", '{"a": 1}') for i in range(n))) + END


@pytest.fixture
def snapshots(monkeypatch):
    """Counts ``ToolCall.snapshot`` calls (the per-call work of a read)."""
    seen = []
    real = toolcalls.ToolCall.snapshot

    def counted(self):
        seen.append(self.index)
        return real(self)

    monkeypatch.setattr(toolcalls.ToolCall, "snapshot", counted)
    return seen


def test_a_read_does_not_snapshot_closed_calls_again(snapshots):
    p = StreamParser()
    p.feed(SB + "".join(call(f"functions.f:{i}", "{}") for i in range(200)))
    first = p.message
    assert len(first.tool_calls) == 200
    snapshots.clear()
    p.feed(CB + "functions.g:200" + AB + "{")
    second = p.message
    # the open call only; it used to be all 201 calls on every read
    assert snapshots == [200]
    assert second.tool_calls[:200] == first.tool_calls
    assert all(a is b for a, b in zip(first.tool_calls, second.tool_calls))  # closed calls: the same objects
    second.tool_calls.clear()
    second.warnings.append(stray(PAD, 0))
    third = p.message  # each read's lists are its own
    assert len(third.tool_calls) == 201 and third.warnings == []
    p.finish()
    final = p.message
    whole = parse(SB + "".join(call(f"functions.f:{i}", "{}") for i in range(200)) + CB + "functions.g:200" + AB + "{")
    assert final == whole


def test_tool_call_is_the_messages_call():
    text = many_calls(5)
    p = StreamParser()
    p.feed(text[:len(text) // 2])
    msg = p.message
    got = [p.tool_call(i) for i in range(len(msg.tool_calls) + 1)] + [p.tool_call(-1)]
    assert got[:-2] == msg.tool_calls and msg.tool_calls
    assert all(a is b for a, b in zip(got, msg.tool_calls))
    assert got[-2:] == [None, None]
    p.feed(text[len(text) // 2:])
    p.finish()
    final, whole = p.message, parse(text)
    got = [p.tool_call(i) for i in range(5)]
    assert got == final.tool_calls == whole.tool_calls


def test_tool_call_after_a_dropped_dangling_call_begin():
    text = SB + call("functions.f:0", "{}") + CB
    p = StreamParser()
    p.feed(text)
    p.finish()
    msg, first, second = p.message, p.tool_call(0), p.tool_call(1)
    assert [w.kind for w in msg.warnings] == ["dangling_call_begin"]
    assert len(msg.tool_calls) == 1
    assert first is msg.tool_calls[0] and second is None


def test_body_stage_decides_each_call_in_constant_work(snapshots):
    n = 300
    text = many_calls(n)
    whole = parse(text)
    snapshots.clear()  # count the stage's snapshots only
    st_ = BodyStage(tools=None, after_reasoning=False)
    for i in range(0, len(text), 7):
        st_.feed(text[i:i + 7])
    st_.finish()
    msg = st_.message
    assert [c.index for c in st_.calls] == list(range(n))
    assert msg == whole
    # per call a bounded number of snapshots (its first delta, the message reads at the end); it
    # used to snapshot every earlier call at each new call: n * (n + 1) / 2
    assert len(snapshots) <= 4 * n


def test_text_after_the_end_read_after_every_feed():
    rng = random.Random(5)
    tail = "".join(rng.choice(["ab", " ", "c" * 9, PAD, THINK, UNTHINK, "\n"]) for _ in range(300))
    text = "Hi" + END + tail
    p = StreamParser()
    p.feed("Hi" + END)
    fed = 0
    reads = []
    while fed < len(tail):
        k = rng.randint(1, 9)
        p.feed(tail[fed:fed + k])
        fed += k
        w = p.message.warnings
        again = p.message.warnings
        assert [x.kind for x in w] == ["text_after_end"]
        assert w[0].text == tail[:fed] and w[0].offset == len("Hi" + END)
        assert again[0] is w[0]  # nothing came: the same warning, not re-joined
        reads.append(w[0])
    assert [r.text for r in reads] == [tail[:len(r.text)] for r in reads]  # earlier reads unchanged
    p.finish()
    final, whole = p.message, parse(text)
    assert final == whole


@pytest.mark.parametrize("dialect,text", [
    ("kimi-k2-instruct", "Hi" + END + "after " * 50),
    ("kimi-k2-thinking", THINK + "r" * 40 + UNTHINK + many_calls(30) + "tail" * 10),
    ("kimi-k3", "think" + PAD * 3 + "more" + M.K3_CLOSE.text + "think" + K3_SEP + M.K3_OPEN.text + "response"
     + K3_SEP + "hello" + M.K3_CLOSE.text + "response" + K3_SEP + M.K3_END_OF_MSG.text + "after" * 20),
])
def test_reading_after_every_feed_changes_nothing(dialect, text):
    whole = parse(text, dialect=dialect)
    for step in (1, 3, 11):
        cuts = list(range(step, len(text), step))
        read, unread = streamed(text, cuts, dialect), streamed(text, cuts, dialect, read=False)
        assert read == whole
        assert unread == whole


def test_a_merged_warning_never_spans_a_marker_read_as_structure():
    """The end of reasoning cuts a run: the server's reasoning and body stages, which split there,
    log the same warnings as the whole parse has."""
    text = THINK + "a" + IM_MIDDLE + UNTHINK + IM_MIDDLE + IM_MIDDLE + "b"
    body_at = len(THINK + "a" + IM_MIDDLE + UNTHINK)
    msg = parse(text, dialect="kimi-k2-thinking")
    assert (msg.reasoning_content, msg.content) == ("a", "b")
    assert msg.warnings == [stray(IM_MIDDLE, len(THINK) + 1),
                            stray(IM_MIDDLE, body_at, 2, body_at + len(IM_MIDDLE))]


def test_stages_log_a_merged_warning_with_its_count():
    import logging

    from kimi_chat.servers.stages import ReasoningStage

    records: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record.getMessage())

    logger = logging.getLogger("test_parse_reads.stages")
    logger.propagate = False
    logger.setLevel(logging.DEBUG)
    logger.addHandler(Keep())
    text = THINK + "a" + IM_MIDDLE + UNTHINK + IM_MIDDLE + IM_MIDDLE + "b"
    rs = ReasoningStage(prefilled=False, logger=logger)
    body = BodyStage(tools=None, after_reasoning=True, logger=logger)
    _, rest = rs.feed(text)
    body.feed(rest)
    body.finish()
    assert records == [
        f"parse warning stray_marker: stray marker {IM_MIDDLE} dropped (at offset {len(THINK) + 1} of the output)",
        f"parse warning stray_marker: stray marker {IM_MIDDLE} dropped (2 times, at offsets 0 to {len(IM_MIDDLE)} "
        "of the output after reasoning)",
    ]
