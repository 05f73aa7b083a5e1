"""``verify``: a hypothesis search for a conversation that a template renders differently from a
dialect, shrunk to a minimal counterexample (:class:`VerifyReport`)."""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

from ...dialect_records import DialectRecord as Dialect, get_dialect
from ...errors import KimiChatError
from ...reference.oracle import OracleUnavailable
from ...prompt import render
from .diffing import prompt_diff, visible
from .rendering import (
    VERIFY_EXTRA,
    TemplateCompileError,
    TemplateLimitError,
    _compile_error,
    _describe_error,
    render_with_dialect,
)

__all__ = ["VerifyReport", "verify"]


@dataclass(frozen=True)
class VerifyReport:
    """The result of :func:`verify`.

    ``equivalent`` is True when no counterexample was found in ``examples`` tries. Otherwise
    ``counterexample`` is the minimal request (``messages``, ``tools``, ``add_generation_prompt``,
    ``options``) found, ``expected`` what the dialect renders, ``actual`` what the template renders
    (``None`` when it raised ``error``) and ``diff`` a readable diff of the two.
    """

    dialect: str
    equivalent: bool
    examples: int
    seed: int
    counterexample: dict[str, Any] | None = None
    expected: str | None = None
    actual: str | None = None
    error: str | None = None
    diff: str = ""
    lenient: bool = False
    """The template was rendered in the lenient sandbox (``verify(..., lenient=True)``)."""
    lenient_diff: str | None = None
    """When the template failed in transformers' sandbox: the diff against what it renders in a
    sandbox that allows mutating lists (what llama.cpp-like engines send); ``""`` = no difference."""
    refusal: str | None = None
    """When the dialect refuses the counterexample (and the template renders it): why."""
    parse_arguments: bool = True
    """K3: the host parsed tool-call arguments JSON strings before rendering (as llama.cpp does)."""

    def summary(self) -> str:
        """A few human lines (what ``kimi-chat verify`` prints)."""
        where = " (lenient sandbox)" if self.lenient else ""
        if not self.parse_arguments:
            where += " (arguments passed as given)"
        if self.equivalent:
            return (f"equivalent{where}: no difference from {self.dialect} in {self.examples} generated "
                    f"conversations (seed {self.seed})")
        lines = [f"NOT equivalent to {self.dialect}{where}: minimal counterexample (seed {self.seed}):",
                 json.dumps(self.counterexample, ensure_ascii=False, indent=2)]
        if self.error is not None:
            lines.append(f"the template raised {self.error}")
            if self.expected is not None:
                lines.append(f"{self.dialect} renders:\n  {visible(self.expected)}")
            if self.lenient_diff == "":
                lines.append("outside transformers' sandbox (e.g. llama.cpp) the template renders this the same")
            elif self.lenient_diff:
                lines.append("outside transformers' sandbox (e.g. llama.cpp) the template renders:\n" + self.lenient_diff)
        elif self.expected is None:
            lines.append(f"{self.dialect} refuses this input ({self.refusal}); the template renders:\n  "
                         f"{visible(self.actual or '')}")
        else:
            lines.append(self.diff)
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """The report as plain JSON data (what ``kimi-chat verify --json`` prints)."""
        return {"dialect": self.dialect, "equivalent": self.equivalent, "examples": self.examples,
                "seed": self.seed, "lenient": self.lenient, "counterexample": self.counterexample, "expected": self.expected,
                "actual": self.actual, "error": self.error, "diff": self.diff, "lenient_diff": self.lenient_diff,
                "refusal": self.refusal, "parse_arguments": self.parse_arguments}


def _requests(d: Dialect) -> Any:
    """The hypothesis strategy of the requests verify renders for ``d`` (its family's strategies,
    :func:`kimi_chat.testing.verify.verify_requests`)."""
    from ...testing.verify import verify_requests

    try:
        return verify_requests(d)
    except ImportError as e:  # pragma: no cover - depends on the environment
        if (e.name or "").partition(".")[0] != "hypothesis":
            raise  # a broken import of kimi_chat's own is a bug, not a missing extra
        raise OracleUnavailable(f"verify generates conversations with hypothesis: {VERIFY_EXTRA}") from e


def _render_request(template: str, d: Dialect, req: Mapping[str, Any], lenient: bool,
                    parse_arguments: bool = True) -> str:
    """A generated request (``messages``, ``tools``, ``add_generation_prompt``, ``options``) rendered
    through ``template`` for ``d``."""
    return render_with_dialect(template, req["messages"], d, tools=req["tools"],
                               add_generation_prompt=req["add_generation_prompt"], lenient=lenient,
                               parse_arguments=parse_arguments, **req["options"])


class _Outcome(NamedTuple):
    differs: bool
    expected: str | None
    actual: str | None
    error: str | None
    refusal: str | None = None
    """Why the dialect refuses the request (``expected`` is then ``None``)."""


def _compare(template: str, d: Dialect, req: Mapping[str, Any], lenient: bool = False,
             parse_arguments: bool = True) -> _Outcome:
    """The comparison of one request. Requests the dialect refuses are a difference when the family
    says so and the template renders them; otherwise they are outside the comparison."""
    refusal = None
    try:
        expected: str | None = render(req["messages"], tools=req["tools"], dialect=d,
                                      add_generation_prompt=req["add_generation_prompt"], **req["options"])
    except (ValueError, TypeError, KimiChatError) as e:
        if not d.family_parts.checks.refusals_differ:
            return _Outcome(False, None, None, None)
        expected, refusal = None, _describe_error(e)
    try:
        actual = _render_request(template, d, req, lenient, parse_arguments)
    except (OracleUnavailable, TemplateLimitError):
        raise
    except Exception as e:  # noqa: BLE001 - a template that crashes where the dialect renders differs
        return _Outcome(expected is not None, expected, None, _describe_error(e), refusal)
    return _Outcome(actual != expected, expected, actual, None, refusal)


_OPTIONAL_KEYS = ("name", "reasoning_content", "reasoning", "thinking")


def _candidates(req: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Simpler variants of a request, one change each (for the final greedy shrink)."""
    def with_(**changes: Any) -> dict[str, Any]:
        out = dict(req)
        out.update(changes)
        return out

    if req["tools"] is not None:
        yield with_(tools=None)
    for key in req["options"]:
        yield with_(options={k: v for k, v in req["options"].items() if k != key})
    msgs = req["messages"]
    if len(msgs) > 1:
        for i in range(len(msgs)):
            yield with_(messages=msgs[:i] + msgs[i + 1 :])
    for i, m in enumerate(msgs):
        def replace(new: dict[str, Any], i: int = i) -> dict[str, Any]:
            return with_(messages=msgs[:i] + [new] + msgs[i + 1 :])

        for key in _OPTIONAL_KEYS:
            if key in m:
                yield replace({k: v for k, v in m.items() if k != key})
        if m.get("tool_calls") and "content" in m:
            yield replace({k: v for k, v in m.items() if k != "content"})
        calls = m.get("tool_calls") or []
        if len(calls) > 1:
            for j in range(len(calls)):
                yield replace({**m, "tool_calls": calls[:j] + calls[j + 1 :]})
        content = m.get("content")
        if isinstance(content, list):
            for j in range(len(content)):
                yield replace({**m, "content": content[:j] + content[j + 1 :]})
        elif isinstance(content, str) and content:
            yield replace({**m, "content": ""})


def _simplify(req: dict[str, Any], differs: Any, budget: int = 300) -> dict[str, Any]:
    """Greedily drop optional parts of a counterexample while it still shows a difference
    (hypothesis shrinks draws, which can leave optional keys in place)."""
    changed = True
    while changed and budget > 0:
        changed = False
        for cand in _candidates(req):
            budget -= 1
            if differs(cand):
                req, changed = cand, True
                break
            if budget <= 0:
                break
    return req


def verify(
    template_text: str,
    dialect: str | Dialect,
    *,
    examples: int = 500,
    seed: int | None = None,
    lenient: bool = False,
    parse_arguments: bool = True,
    progress: Callable[[str], None] | None = None,
) -> VerifyReport:
    """Search for a conversation that ``template_text`` renders differently from ``dialect``.

    Conversations come from the dialect family's generator (hypothesis):
    :func:`kimi_chat.testing.strategies.requests` for K2, :func:`kimi_chat.testing.strategies_k3.k3_requests`
    for K3. The template is rendered as the dialect's host does (:func:`render_with_dialect`: K2 the
    transformers way with the tokenizer's pre-processing, tool keys sorted, ``tools_ts_str`` for K2.5
    and K2.6; K3 as llama.cpp runs its port, tool-call arguments parsed first unless
    ``parse_arguments=False``) and compared with :func:`kimi_chat.render`. For K3 a request the
    dialect refuses (as the official encoder does) that the template renders is a difference. The
    first difference is shrunk to a minimal conversation. ``seed`` makes the search reproducible (the
    report carries the seed used). ``progress`` (if given) gets a line of text now and then: every
    tenth of ``examples`` tried, and when a difference found is being shrunk. Needs transformers and
    hypothesis (``pip install -e '.[verify]'`` in the checkout); raises
    :class:`~kimi_chat.reference.oracle.OracleUnavailable`
    without them.
    """
    d = get_dialect(dialect)
    if examples < 1:
        raise ValueError("examples must be at least 1")
    error = _compile_error(template_text)  # also fails early, with the install hint, without transformers
    if error is not None:
        raise TemplateCompileError(f"the template does not compile: {error}")
    requests = _requests(d)
    from hypothesis import HealthCheck, Phase, find, settings
    from hypothesis.errors import NoSuchExample

    if seed is None:
        seed = random.SystemRandom().randrange(2**32)
    tried = 0
    searching = True
    step = max(1, examples // 10)

    def compare(req: Mapping[str, Any], lenient: bool = lenient) -> _Outcome:
        return _compare(template_text, d, req, lenient, parse_arguments)

    def differs(req: dict[str, Any]) -> bool:
        nonlocal tried, searching
        result = compare(req).differs
        if searching:
            tried += 1
            searching = not result  # calls after the first difference are shrinking
            if progress is not None:
                if result:
                    progress(f"difference found after {tried} conversations; shrinking it")
                elif tried % step == 0:
                    progress(f"{tried}/{examples} conversations, no difference yet")
        return result

    cfg = settings(
        max_examples=examples, database=None, deadline=None, derandomize=False,
        suppress_health_check=list(HealthCheck), phases=[Phase.generate, Phase.shrink], report_multiple_bugs=False,
    )
    base = VerifyReport(dialect=d.name, equivalent=True, examples=0, seed=seed, lenient=lenient,
                        parse_arguments=parse_arguments)
    try:
        found = find(requests, differs, settings=cfg, random=random.Random(seed))
    except NoSuchExample:
        return replace(base, examples=tried)
    found = _simplify(found, lambda req: compare(req).differs)
    _, expected, actual, error, refusal = compare(found)
    label = f"{d.name} (kimi_chat.render)"
    diff = (prompt_diff(expected, actual, expected_label=label, actual_label="template")
            if actual is not None and expected is not None else "")
    lenient_diff = None
    if not lenient and actual is None and error is not None and error.startswith("SecurityError") and expected is not None:
        try:
            outside = _render_request(template_text, d, found, True, parse_arguments)
            lenient_diff = prompt_diff(expected, outside, expected_label=label, actual_label="template (lenient sandbox)")
        except Exception:  # noqa: BLE001 - it fails there too: nothing more to show
            lenient_diff = None
    return replace(base, equivalent=False, examples=tried, counterexample=found, expected=expected, actual=actual,
                   error=error, diff=diff, lenient_diff=lenient_diff, refusal=refusal)
