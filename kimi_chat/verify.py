"""Is this chat template right? ``identify`` says which known template a text is; ``verify`` searches
for a conversation where a template renders differently from a dialect, and shrinks it.

Both render the template the way transformers does (:func:`kimi_chat.oracle.render_template`: its
sandboxed Jinja environment, its input normalisation, the Kimi tokenizer's tool pre-processing) and
compare with :func:`kimi_chat.render`. transformers is an optional extra:
``pip install 'kimi-chat[verify]'``.

Runtimes such as llama.cpp run their own Jinja engines, which allow what transformers' sandbox
refuses (``list.append``); their adapted templates fail in transformers with a ``SecurityError``.
That is reported as a finding, and :func:`identify` then renders the template once more in a
sandbox that allows mutating lists (still a sandbox: no attribute escapes), to show what such a
runtime would send the model.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import random
import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from . import markers as M
from .dialects import DIALECTS, Dialect, Status, get_dialect
from .errors import KimiChatError
from .known_problems import KnownProblem, KnownTemplate, known_template, problems_of
from .oracle import OracleUnavailable, _chat_template_utils, oracle_template, render_as_tokenizer
from .render import render
from .templates import template_path

__all__ = [
    "TemplateCompileError",
    "Difference",
    "Identification",
    "VerifyReport",
    "Probe",
    "PROBES",
    "identify",
    "verify",
    "normalize_template",
    "template_sha256",
    "render_with_dialect",
    "visible",
    "prompt_diff",
    "own_template_text",
    "own_template_path",
]

VERIFY_EXTRA = "pip install 'kimi-chat[verify]'"


class TemplateCompileError(KimiChatError, ValueError):
    """The template text is not valid Jinja (it does not compile)."""


def _compile_error(template: str) -> str | None:
    """The syntax error of ``template`` under transformers' Jinja environment, if any."""
    ctu = _chat_template_utils()
    from jinja2.exceptions import TemplateSyntaxError

    try:
        ctu._compile_jinja_template(template)
    except TemplateSyntaxError as e:
        return f"line {e.lineno}: {e.message}"
    return None


# ---------------------------------------------------------------------------------------------------
# text helpers


def normalize_template(text: str) -> str:
    """The text compared for an exact match: CRLF and CR turned into LF, trailing newlines dropped
    (converters and editors add or drop them; Jinja renders the same either way)."""
    return text.replace("\r\n", "\n").replace("\r", "\n").rstrip("\n")


def template_sha256(text: str) -> str:
    """sha256 of the normalised text (the key of :data:`kimi_chat.known_problems.KNOWN_TEMPLATES`)."""
    return hashlib.sha256(normalize_template(text).encode("utf-8")).hexdigest()


_VISIBLE = str.maketrans({"\n": "␊", " ": "·", "\t": "→", "\r": "␍"})


def visible(text: str) -> str:
    """``text`` with whitespace made visible: ``␊`` newline, ``·`` space, ``→`` tab, ``␍`` carriage
    return. Special tokens are shown as they are (``<|im_end|>``)."""
    return text.translate(_VISIBLE)


_BREAK_AFTER = (M.IM_END.text,)


def _lines(text: str) -> list[str]:
    """Diff lines: a prompt cut after every ``<|im_end|>`` and every newline, whitespace visible."""
    out: list[str] = []
    start = 0
    i = 0
    n = len(text)
    while i < n:
        if text[i] == "\n":
            out.append(visible(text[start : i + 1]))
            start = i = i + 1
            continue
        for tok in _BREAK_AFTER:
            if text.startswith(tok, i):
                out.append(visible(text[start : i + len(tok)]))
                start = i = i + len(tok)
                break
        else:
            i += 1
    if start < n:
        out.append(visible(text[start:]))
    return out


def first_difference(expected: str, actual: str, context: int = 30) -> str:
    """One line saying where two prompts first differ, with some context on both sides."""
    n = 0
    for a, b in zip(expected, actual):
        if a != b:
            break
        n += 1
    lo = max(0, n - context)
    pre = ("…" if lo else "") + visible(expected[lo:n])

    def tail(s: str) -> str:
        piece = s[n : n + context]
        return visible(piece) + ("…" if len(s) > n + context else "") if piece else "(end)"

    return f"at character {n}: after {pre!r} expected {tail(expected)!r}, got {tail(actual)!r}"


def prompt_diff(expected: str, actual: str, *, expected_label: str = "expected", actual_label: str = "template") -> str:
    """A readable unified diff of two prompts: lines cut after each ``<|im_end|>`` and newline,
    whitespace made visible, preceded by where they first differ."""
    if expected == actual:
        return ""
    body = difflib.unified_diff(_lines(expected), _lines(actual), expected_label, actual_label, lineterm="", n=2)
    return "first difference " + first_difference(expected, actual) + "\n" + "\n".join(body)


# ---------------------------------------------------------------------------------------------------
# our own templates


def own_template_path(dialect: str | Dialect) -> Path | None:
    """``templates/<dialect>.jinja`` (kimi_chat's own template for the dialect), ``None`` when the file
    is missing. Raises :class:`~kimi_chat.errors.UnknownDialectError` for an unknown dialect."""
    try:
        return template_path(dialect)
    except FileNotFoundError:
        return None


def own_template_text(dialect: str | Dialect) -> str | None:
    """The text of kimi_chat's own template for the dialect, ``None`` when the file is missing.
    Raises :class:`~kimi_chat.errors.UnknownDialectError` for an unknown dialect."""
    path = own_template_path(dialect)
    return path.read_text(encoding="utf-8") if path is not None else None


def _oracle_text(d: Dialect) -> str | None:
    try:
        return oracle_template(d)
    except KimiChatError:
        return None


# ---------------------------------------------------------------------------------------------------
# rendering a template the transformers way, for a dialect


_LENIENT_LOCK = threading.Lock()
_LENIENT_CACHE: dict[str, Any] = {}


def _lenient_compiled(ctu: Any, template: str) -> Any:
    """``template`` compiled like transformers does, but in jinja2's mutable SandboxedEnvironment
    (lists may be appended to, as llama.cpp's engine allows; attribute escapes are still refused)."""
    compiled = _LENIENT_CACHE.get(template)
    if compiled is None:
        from jinja2.sandbox import SandboxedEnvironment

        strict_env = ctu._compile_jinja_template(template).environment
        env = SandboxedEnvironment(
            trim_blocks=strict_env.trim_blocks,
            lstrip_blocks=strict_env.lstrip_blocks,
            extensions=[type(e) for e in strict_env.extensions.values()],
        )
        env.filters.update(strict_env.filters)
        env.globals.update(strict_env.globals)
        compiled = _LENIENT_CACHE[template] = env.from_string(template)
    return compiled


@contextmanager
def _lenient(template: str) -> Iterator[None]:
    ctu = _chat_template_utils()
    with _LENIENT_LOCK:
        compiled = _lenient_compiled(ctu, template)
        original = ctu._compile_jinja_template
        ctu._compile_jinja_template = lambda text: compiled if text == template else original(text)
        try:
            yield
        finally:
            ctu._compile_jinja_template = original


def render_with_dialect(
    template: str,
    messages: Sequence[Any],
    dialect: str | Dialect,
    *,
    tools: Sequence[Mapping[str, Any]] | None = None,
    add_generation_prompt: bool = True,
    lenient: bool = False,
    **options: Any,
) -> str:
    """Render ``template`` as the official tokenizer of ``dialect`` would: transformers' machinery,
    tool keys sorted when the dialect's tokenizer sorts them, ``tools_ts_str`` for K2.5.

    ``lenient=True`` renders in a sandbox that allows mutating lists (what llama.cpp-like engines
    accept). Template errors propagate.
    """
    d = get_dialect(dialect)

    def go() -> str:
        return render_as_tokenizer(template, messages, d, tools=tools, add_generation_prompt=add_generation_prompt,
                                   **options)

    if not lenient:
        return go()
    with _lenient(template):
        return go()


def _is_security_error(e: BaseException) -> bool:
    try:
        from jinja2.exceptions import SecurityError
    except ImportError:  # pragma: no cover
        return False
    return isinstance(e, SecurityError)


def _describe_error(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"


# ---------------------------------------------------------------------------------------------------
# probes: a fixed set of conversations that tell the revisions apart


@dataclass(frozen=True)
class Probe:
    """A fixed request rendered by :func:`identify`."""

    name: str
    messages: tuple[dict[str, Any], ...]
    tools: tuple[dict[str, Any], ...] | None = None
    add_generation_prompt: bool = True


_WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Current weather of a city",
        "parameters": {"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}},
    },
}


def _call(call_id: str, name: str, arguments: Any) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


_USER = {"role": "user", "content": "What's the weather in Paris?"}

PROBES: tuple[Probe, ...] = (
    Probe("user turn", ({"role": "user", "content": "Hello"},)),
    Probe("system prompt given", ({"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"})),
    Probe("multi-turn", (
        {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"},
        {"role": "user", "content": "Tell me a joke."},
    )),
    Probe("finished conversation, no generation prompt", (
        {"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"},
    ), add_generation_prompt=False),
    Probe("user turn, no generation prompt", ({"role": "user", "content": "Hi"},), add_generation_prompt=False),
    Probe("tools declared", (_USER,), tools=(_WEATHER_TOOL,)),
    Probe("tool call, string arguments, call_ id", (
        _USER,
        {"role": "assistant", "content": "", "tool_calls": [_call("call_abc", "get_weather", '{"city": "Paris"}')]},
        {"role": "tool", "tool_call_id": "call_abc", "content": "18 °C"},
    ), tools=(_WEATHER_TOOL,)),
    Probe("tool call, object arguments", (
        _USER,
        {"role": "assistant", "tool_calls": [_call("functions.get_weather:0", "get_weather", {"city": "Paris"})]},
        {"role": "tool", "tool_call_id": "functions.get_weather:0", "content": "18 °C"},
    )),
    Probe("two tool rounds", (
        _USER,
        {"role": "assistant", "content": "Checking.", "tool_calls": [
            _call("functions.get_weather:0", "get_weather", '{"city": "Paris"}')]},
        {"role": "tool", "tool_call_id": "functions.get_weather:0", "content": "18 °C"},
        {"role": "assistant", "content": "", "tool_calls": [
            _call("functions.get_weather:1", "get_weather", '{"city": "Lyon"}'),
            _call("functions.get_weather:2", "get_weather", '{"city": "Nice"}')]},
        {"role": "tool", "tool_call_id": "functions.get_weather:1", "content": "20 °C"},
        {"role": "tool", "tool_call_id": "functions.get_weather:2", "content": "23 °C"},
    )),
    Probe("tool results out of order", (
        _USER,
        {"role": "assistant", "content": "", "tool_calls": [
            _call("functions.get_weather:0", "get_weather", '{"city": "Paris"}'),
            _call("functions.get_weather:1", "get_weather", '{"city": "Lyon"}')]},
        {"role": "tool", "tool_call_id": "functions.get_weather:1", "content": "20 °C"},
        {"role": "tool", "tool_call_id": "functions.get_weather:0", "content": "18 °C"},
    )),
    Probe("reasoning in history", (
        {"role": "user", "content": "2+2?"},
        {"role": "assistant", "reasoning_content": "Add them.", "content": "4"},
        {"role": "user", "content": "And 3+3?"},
        {"role": "assistant", "reasoning_content": "Add again.", "content": "6"},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "reasoning_content": "Use the tool.", "content": "", "tool_calls": [
            _call("functions.get_weather:0", "get_weather", '{"city": "Paris"}')]},
        {"role": "tool", "tool_call_id": "functions.get_weather:0", "content": "18 °C"},
    )),
    Probe("names", (
        {"role": "user", "name": "alice", "content": "Hi"},
        {"role": "assistant", "name": "kimi", "content": "Hello, Alice."},
        {"role": "user", "content": "Bye"},
    )),
    Probe("image and text parts", (
        {"role": "user", "content": [
            {"type": "text", "text": "What is this?"},
            {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}]},
    )),
    Probe("tool message with name", (
        _USER,
        {"role": "assistant", "content": "", "tool_calls": [
            _call("functions.get_weather:0", "get_weather", '{"city": "Paris"}')]},
        {"role": "tool", "name": "get_weather", "tool_call_id": "functions.get_weather:0", "content": "18 °C"},
    )),
)
"""The conversations :func:`identify` renders through a template and every dialect."""


# ---------------------------------------------------------------------------------------------------
# identify


@dataclass(frozen=True)
class Difference:
    """A probe (or a counterexample) where a template and a dialect disagree."""

    probe: str
    expected: str | None
    """What the dialect renders (``None``: the dialect refuses this input)."""
    actual: str | None
    """What the template renders (``None``: it raised ``error``)."""
    error: str | None = None
    lenient: bool = False
    """The template failed in transformers' sandbox and ``actual`` comes from the lenient sandbox."""

    @property
    def summary(self) -> str:
        if self.actual is None:
            return f"{self.probe}: the template raised {self.error}"
        assert self.expected is not None
        where = first_difference(self.expected, self.actual)
        return f"{self.probe}: {where}" + (" (rendered outside transformers' sandbox)" if self.lenient else "")

    def to_dict(self) -> dict[str, Any]:
        return {"probe": self.probe, "summary": self.summary, "expected": self.expected, "actual": self.actual,
                "error": self.error, "lenient": self.lenient}


Kind = Literal["official", "variant", "ours", "adapted", "equivalent", "modified", "unknown"]


@dataclass(frozen=True)
class Identification:
    """What a template is.

    ``kind``:

    * ``official``: the exact text of the dialect's official template (our oracle);
    * ``variant``: the exact text of another known copy of that revision, which differs in places;
    * ``ours``: the exact text of kimi_chat's ``templates/<dialect>.jinja``;
    * ``adapted``: a runtime's hand-edited copy of the dialect (a known llama.cpp / ik_llama.cpp
      adaptation, or an unknown text that fails in transformers' sandbox and behaves mostly like it);
    * ``equivalent``: an unknown text that renders every probe exactly as the dialect does;
    * ``modified``: an unknown text closest to the dialect, with differences;
    * ``unknown``: not recognisably any dialect.

    ``confidence`` is 1.0 for an exact match, else the mean textual similarity (difflib ratio) of
    the probe renderings to the dialect's; ``scores`` gives, per dialect, the share of probes
    rendered identically.
    """

    dialect: str | None
    kind: Kind
    match: Literal["exact", "behavioural", "none"]
    confidence: float
    description: str
    status: Status | None = None
    source: str | None = None
    sha256: str = ""
    problems: tuple[KnownProblem, ...] = ()
    differences: tuple[Difference, ...] = ()
    renders_in_sandbox: bool | None = None
    """False when transformers' sandbox refused the template on some probe (``None``: not tried)."""
    scores: dict[str, float] = field(default_factory=dict)
    """Share of probes each dialect renders like the template."""
    notes: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        """A short phrase: ``official kimi-k2-instruct@rev2``, ``adapted copy of kimi-k2-thinking@rev1``."""
        d = self.dialect
        return {
            "official": f"official {d}",
            "variant": f"variant of {d}",
            "ours": f"kimi_chat's own {d} template",
            "adapted": f"adapted copy of {d}",
            "equivalent": f"equivalent to {d}",
            "modified": f"modified copy of {d}",
            "unknown": "unknown template",
        }[self.kind]

    def to_dict(self) -> dict[str, Any]:
        return {
            "dialect": self.dialect,
            "kind": self.kind,
            "label": self.label,
            "match": self.match,
            "confidence": round(self.confidence, 4),
            "description": self.description,
            "status": self.status.value if self.status is not None else None,
            "source": self.source,
            "sha256": self.sha256,
            "problems": [p.to_dict() for p in self.problems],
            "differences": [d.to_dict() for d in self.differences],
            "renders_in_sandbox": self.renders_in_sandbox,
            "scores": {k: round(v, 4) for k, v in self.scores.items()},
            "notes": list(self.notes),
        }


_SANDBOX = problems_of(["sandbox-security-error"])[0]


def _render_probe(template: str, probe: Probe, d: Dialect) -> tuple[str | None, str | None, bool]:
    """(text, error, lenient) for a probe rendered through ``template`` with ``d``'s pre-processing."""
    args = dict(tools=list(probe.tools) if probe.tools is not None else None,
                add_generation_prompt=probe.add_generation_prompt)
    msgs = [dict(m) for m in probe.messages]
    try:
        return render_with_dialect(template, msgs, d, **args), None, False
    except OracleUnavailable:
        raise
    except Exception as e:  # noqa: BLE001 - any template error is a finding
        if not _is_security_error(e):
            return None, _describe_error(e), False
        try:
            return render_with_dialect(template, msgs, d, lenient=True, **args), None, True
        except Exception as e2:  # noqa: BLE001
            return None, _describe_error(e2), True


def _expected(probe: Probe, d: Dialect) -> str | None:
    try:
        return render([dict(m) for m in probe.messages], tools=list(probe.tools) if probe.tools else None,
                      dialect=d, add_generation_prompt=probe.add_generation_prompt)
    except (ValueError, KimiChatError):
        return None


def _similarity(a: str, b: str | None) -> float:
    if b is None:
        return 0.0
    if a == b:
        return 1.0
    return difflib.SequenceMatcher(None, a, b, autojunk=False).ratio()


@dataclass
class _Behaviour:
    scores: dict[str, float]
    similarity: dict[str, float]
    differences: dict[str, list[Difference]]
    in_sandbox: bool


def _behaviour(template: str) -> _Behaviour:
    """Per dialect: the share of probes rendered alike, the mean textual similarity of the renderings
    and the differences; whether the template rendered every probe in transformers' sandbox."""
    out = _Behaviour({}, {}, {}, True)
    cache: dict[tuple[int, bool, bool], tuple[str | None, str | None, bool]] = {}
    for d in DIALECTS.values():
        matched = applicable = 0
        sim = 0.0
        found: list[Difference] = []
        for i, probe in enumerate(PROBES):
            expected = _expected(probe, d)
            key = (i, d.sort_tool_keys and bool(probe.tools), d.tools_typescript and bool(probe.tools))
            if key not in cache:
                cache[key] = _render_probe(template, probe, d)
            actual, error, lenient = cache[key]
            out.in_sandbox = out.in_sandbox and not lenient
            if expected is None:
                continue
            applicable += 1
            sim += _similarity(expected, actual)
            if actual == expected:
                matched += 1
            else:
                found.append(Difference(probe.name, expected, actual, error, lenient))
        out.scores[d.name] = matched / applicable if applicable else 0.0
        out.similarity[d.name] = sim / applicable if applicable else 0.0
        out.differences[d.name] = found
    return out


def identify(template_text: str, *, behavioural: bool = True) -> Identification:
    """Which known dialect ``template_text`` is.

    First an exact match of the normalised text (:func:`normalize_template`) against each dialect's
    official template (the reference data when present, else the known hashes), the known variants
    and runtime adaptations, and kimi_chat's own ``templates/``; then (``behavioural=True``, needs
    transformers) a behavioural match: :data:`PROBES` rendered through the template the transformers
    way and compared with :func:`kimi_chat.render` for each dialect.

    Templates that fail in transformers' sandbox (llama.cpp's adaptations) are reported with
    ``renders_in_sandbox=False`` and the problem ``sandbox-security-error``.
    """
    norm = normalize_template(template_text)
    digest = template_sha256(template_text)
    notes: list[str] = []

    exact: tuple[Kind, Dialect, str | None, list[KnownProblem], str] | None = None
    known: KnownTemplate | None = known_template(digest)
    for d in DIALECTS.values():
        text = _oracle_text(d)
        if text is not None and normalize_template(text) == norm:
            exact = ("official", d, d.oracle, problems_of(d.name), f"the official {d.name} template text")
            break
    if exact is None and known is not None:
        d = get_dialect(known.dialect)
        exact = (known.kind, d, known.source, problems_of(known.problems), known.name)
    if exact is None:
        for d in DIALECTS.values():
            text = own_template_text(d)
            if text is not None and normalize_template(text) == norm:
                path = own_template_path(d)
                exact = ("ours", d, str(path) if path else None, problems_of(d.name),
                         f"kimi_chat's own template for {d.name}")
                break

    beh: _Behaviour | None = None
    if behavioural and (exact is None or exact[0] in ("adapted", "variant")):
        try:
            error = _compile_error(template_text)
            if error is not None:
                notes.append(f"the template does not compile: {error}")
                if exact is None:
                    return Identification(dialect=None, kind="unknown", match="none", confidence=0.0,
                                          description="not valid Jinja", sha256=digest, notes=tuple(notes))
            beh = _behaviour(template_text)
        except OracleUnavailable:
            notes.append(f"behavioural match skipped: it renders the template with transformers ({VERIFY_EXTRA})")

    if exact is not None:
        kind, d, source, problems, desc = exact
        return Identification(
            dialect=d.name, kind=kind, match="exact", confidence=1.0, description=desc, status=d.status,
            source=source, sha256=digest, problems=tuple(problems),
            differences=tuple(beh.differences[d.name]) if beh else (),
            renders_in_sandbox=beh.in_sandbox if beh else (False if kind == "adapted" else None),
            scores=beh.scores if beh else {}, notes=tuple(notes),
        )

    if beh is None:
        return Identification(dialect=None, kind="unknown", match="none", confidence=0.0,
                              description="not a known template text", sha256=digest, notes=tuple(notes))

    # closest dialect: most probes identical, then the most similar renderings; first in DIALECTS on ties
    best = max(beh.scores, key=lambda name: (beh.scores[name], beh.similarity[name]))
    score, similarity = beh.scores[best], beh.similarity[best]
    d = get_dialect(best)
    extra = [] if beh.in_sandbox else [_SANDBOX]
    n = len(PROBES)
    alike = f"{round(score * n)} of {n} probes rendered alike, {similarity:.1%} similar"
    if score >= 1.0:
        kind: Kind = "equivalent" if beh.in_sandbox else "adapted"
        desc = f"renders every probe as {best} does" + ("" if beh.in_sandbox else " (outside transformers' sandbox)")
        problems = problems_of(best) + extra
    elif similarity >= _SIMILAR:
        kind = "modified" if beh.in_sandbox else "adapted"
        desc = f"closest to {best}: {alike}"
        problems = extra
    else:
        closest = f"; closest is {best} ({alike})" if similarity >= 0.3 else ""
        return Identification(
            dialect=None, kind="unknown", match="none", confidence=similarity,
            description=f"not a known template{closest}",
            sha256=digest, problems=tuple(extra), differences=tuple(beh.differences[best]),
            renders_in_sandbox=beh.in_sandbox, scores=beh.scores, notes=tuple(notes),
        )
    return Identification(
        dialect=best, kind=kind, match="behavioural", confidence=similarity, description=desc, status=d.status,
        sha256=digest, problems=tuple(problems), differences=tuple(beh.differences[best]),
        renders_in_sandbox=beh.in_sandbox, scores=beh.scores, notes=tuple(notes),
    )


_SIMILAR = 0.9
"""Mean probe similarity from which an unknown text counts as a modified copy of its closest dialect."""


# ---------------------------------------------------------------------------------------------------
# verify


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

    def summary(self) -> str:
        """A few human lines (what ``kimi-chat verify`` prints)."""
        where = " (lenient sandbox)" if self.lenient else ""
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
        else:
            lines.append(self.diff)
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        return {"dialect": self.dialect, "equivalent": self.equivalent, "examples": self.examples,
                "seed": self.seed, "lenient": self.lenient, "counterexample": self.counterexample, "expected": self.expected,
                "actual": self.actual, "error": self.error, "diff": self.diff, "lenient_diff": self.lenient_diff}


def _strategies() -> Any:
    try:
        from .testing import strategies
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise OracleUnavailable(f"verify generates conversations with hypothesis: {VERIFY_EXTRA}") from e
    return strategies


def _compare(template: str, d: Dialect, req: Mapping[str, Any], lenient: bool = False) -> tuple[bool, str | None, str | None, str | None]:
    """(differs, expected, actual, error) for one request. Requests the dialect refuses (its
    official template cannot render them) are outside the comparison: never a difference."""
    try:
        expected = render(req["messages"], tools=req["tools"], dialect=d,
                          add_generation_prompt=req["add_generation_prompt"], **req["options"])
    except (ValueError, TypeError, KimiChatError):
        return False, None, None, None
    try:
        actual = render_with_dialect(template, req["messages"], d, tools=req["tools"],
                                     add_generation_prompt=req["add_generation_prompt"], lenient=lenient,
                                     **req["options"])
    except OracleUnavailable:
        raise
    except Exception as e:  # noqa: BLE001 - a template that crashes where the dialect renders differs
        return True, expected, None, _describe_error(e)
    return actual != expected, expected, actual, None


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
) -> VerifyReport:
    """Search for a conversation that ``template_text`` renders differently from ``dialect``.

    Conversations come from :func:`kimi_chat.testing.strategies.requests` (hypothesis); the template
    is rendered the transformers way with the dialect's tokenizer pre-processing (tool keys sorted,
    ``tools_ts_str`` for K2.5) and compared with :func:`kimi_chat.render`. The first difference is
    shrunk to a minimal conversation. ``seed`` makes the search reproducible (the report carries the
    seed used). Needs transformers and hypothesis (``pip install 'kimi-chat[verify]'``); raises
    :class:`~kimi_chat.oracle.OracleUnavailable` without them.
    """
    d = get_dialect(dialect)
    if examples < 1:
        raise ValueError("examples must be at least 1")
    error = _compile_error(template_text)  # also fails early, with the install hint, without transformers
    if error is not None:
        raise TemplateCompileError(f"the template does not compile: {error}")
    strategies = _strategies()
    from hypothesis import HealthCheck, Phase, find, settings
    from hypothesis.errors import NoSuchExample

    if seed is None:
        seed = random.SystemRandom().randrange(2**32)
    tried = 0
    searching = True

    def differs(req: dict[str, Any]) -> bool:
        nonlocal tried, searching
        result = _compare(template_text, d, req, lenient)[0]
        if searching:
            tried += 1
            searching = not result  # calls after the first difference are shrinking
        return result

    cfg = settings(
        max_examples=examples, database=None, deadline=None, derandomize=False,
        suppress_health_check=list(HealthCheck), phases=[Phase.generate, Phase.shrink], report_multiple_bugs=False,
    )
    try:
        found = find(strategies.requests(d.name), differs, settings=cfg, random=random.Random(seed))
    except NoSuchExample:
        return VerifyReport(dialect=d.name, equivalent=True, examples=tried, seed=seed, lenient=lenient)
    found = _simplify(found, lambda req: _compare(template_text, d, req, lenient)[0])
    _, expected, actual, error = _compare(template_text, d, found, lenient)
    label = f"{d.name} (kimi_chat.render)"
    diff = prompt_diff(expected or "", actual, expected_label=label, actual_label="template") if actual is not None else ""
    lenient_diff = None
    if not lenient and actual is None and error is not None and error.startswith("SecurityError") and expected is not None:
        try:
            outside = render_with_dialect(template_text, found["messages"], d, tools=found["tools"],
                                          add_generation_prompt=found["add_generation_prompt"], lenient=True,
                                          **found["options"])
            lenient_diff = prompt_diff(expected, outside, expected_label=label, actual_label="template (lenient sandbox)")
        except Exception:  # noqa: BLE001 - it fails there too: nothing more to show
            lenient_diff = None
    return VerifyReport(dialect=d.name, equivalent=False, examples=tried, seed=seed, counterexample=found,
                        expected=expected, actual=actual, error=error, diff=diff, lenient_diff=lenient_diff,
                        lenient=lenient)
