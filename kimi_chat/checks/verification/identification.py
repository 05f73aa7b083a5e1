"""``identify``: which known template a text is, by an exact match of its normalised text (official
templates, known variants and runtime adaptations, kimi_chat's own) or by how it renders the
:data:`~kimi_chat.checks.verification.probes.PROBES` compared with :func:`kimi_chat.render` for each dialect."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from typing import Any, Literal

from ...dialect_records import DIALECTS as ALL_DIALECTS, K2_DIALECTS as DIALECTS, DialectRecord as Dialect, Status
from ...dialect_records import get_dialect
from ...errors import KimiChatError
from ...families.k2.spec import K2Spec
from ..known_problems import DIALECT_PROBLEMS, KnownProblem, KnownTemplate, known_template, problems_of
from ...reference.oracle import OracleUnavailable
from ...prompt import render
from .diffing import first_difference, normalize_template, template_sha256
from .probes import PROBES, Probe
from .rendering import (
    VERIFY_EXTRA,
    TemplateLimitError,
    _compile_error,
    _describe_error,
    _is_security_error,
    _oracle_text,
    own_template_path,
    own_template_text,
    render_with_dialect,
)

__all__ = ["Difference", "Identification", "Kind", "identify"]


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
        """One line: the probe and where the renderings first differ (or what the template raised)."""
        if self.actual is None:
            return f"{self.probe}: the template raised {self.error}"
        if self.expected is None:
            return f"{self.probe}: the dialect refuses this input, the template renders it"
        where = first_difference(self.expected, self.actual)
        return f"{self.probe}: {where}" + (" (rendered outside transformers' sandbox)" if self.lenient else "")

    def to_dict(self) -> dict[str, Any]:
        """The difference as plain JSON data."""
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
      adaptation, or an unknown text that fails in transformers' sandbox and behaves mostly like it)
      or, for Kimi-K3 (no official template), a Jinja port of its encoder, such as llama.cpp's, or an
      unknown text whose diagnostic probes show known problems of a port;
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
    compile_error: str | None = None
    """The syntax error of the template under transformers' Jinja environment (``None``: it compiles,
    or the check did not run: transformers missing, or an exact match that needed no rendering)."""

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
        """The identification as plain JSON data."""
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
            "compile_error": self.compile_error,
        }


SOLVED_BY_OUR_TEMPLATES = frozenset({"needs-tools-ts-str"})
"""Known problems of an official template that kimi_chat's own copy does not have: ours compute the
TypeScript tool declaration (``tools_ts_str``) in Jinja, where the official one needs the tokenizer's Python."""

_SANDBOX = problems_of(["sandbox-security-error"])[0]
_LIMITS = problems_of(["template-exceeds-limits"])[0]


def _render_probe(template: str, probe: Probe, d: Dialect) -> tuple[str | None, str | None, bool]:
    """(text, error, lenient) for a probe rendered through ``template`` with ``d``'s pre-processing."""
    args = dict(tools=list(probe.tools) if probe.tools is not None else None,
                add_generation_prompt=probe.add_generation_prompt, parse_arguments=probe.parse_arguments,
                **probe.options)
    msgs = [dict(m) for m in probe.messages]
    try:
        return render_with_dialect(template, msgs, d, **args), None, False
    except (OracleUnavailable, TemplateLimitError):
        raise
    except Exception as e:  # noqa: BLE001 - any template error is a finding
        if not _is_security_error(e):
            return None, _describe_error(e), False
        try:
            return render_with_dialect(template, msgs, d, lenient=True, **args), None, True
        except TemplateLimitError:
            raise
        except Exception as e2:  # noqa: BLE001
            return None, _describe_error(e2), True


def _expected(probe: Probe, d: Dialect) -> str | None:
    read = probe.options_for(d)
    try:
        return render([dict(m) for m in probe.messages], tools=list(probe.tools) if probe.tools else None,
                      dialect=d, add_generation_prompt=probe.add_generation_prompt, **read)
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
    detected: dict[str, list[str]] = field(default_factory=dict)
    """Per dialect: the codes of the known problems its diagnostic probes found."""


def _behaviour(template: str) -> _Behaviour:
    """Per dialect (every family): the share of probes rendered alike, the mean textual similarity of
    the renderings and the differences, the known problems the diagnostic probes found; whether the
    template rendered every probe in transformers' sandbox."""
    out = _Behaviour({}, {}, {}, True)
    cache: dict[tuple[int, str, bool, bool], tuple[str | None, str | None, bool]] = {}
    for d in ALL_DIALECTS.values():
        matched = applicable = 0
        sim = 0.0
        found: list[Difference] = []
        detected: list[str] = []
        for i, probe in enumerate(PROBES):
            if not probe.applies_to(d):
                continue
            expected = _expected(probe, d)
            k2 = d.spec if isinstance(d.spec, K2Spec) else None  # (the tool declaration switches: K2 templates)
            key = (i, d.family, k2 is not None and k2.sort_tool_keys and bool(probe.tools),
                   k2 is not None and k2.tools_typescript and bool(probe.tools))
            if key not in cache:
                cache[key] = _render_probe(template, probe, d)
            actual, error, lenient = cache[key]
            out.in_sandbox = out.in_sandbox and not lenient
            if probe.problem is not None:  # diagnostic: a difference is that problem, not a lower score
                if actual is not None and actual != expected:
                    detected.append(probe.problem)
                    found.append(Difference(probe.name, expected, actual, error, lenient))
                continue
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
        out.detected[d.name] = detected
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
    error: str | None = None

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
                ours = tuple(c for c in DIALECT_PROBLEMS.get(d.name, ()) if c not in SOLVED_BY_OUR_TEMPLATES)
                exact = ("ours", d, str(path) if path else None, problems_of(ours),
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
                                          description="not valid Jinja", sha256=digest, notes=tuple(notes),
                                          compile_error=error)
            beh = _behaviour(template_text)
        except OracleUnavailable:
            notes.append(f"behavioural match skipped: it renders the template with transformers ({VERIFY_EXTRA})")
        except TemplateLimitError as e:  # a hostile template: reported as such, not run further
            return Identification(dialect=None, kind="unknown", match="none", confidence=0.0,
                                  description="exceeds the rendering limits (a hostile or broken template)",
                                  sha256=digest, problems=(_LIMITS,), notes=(*notes, str(e)))

    if exact is not None:
        kind, d, source, problems, desc = exact
        return Identification(
            dialect=d.name, kind=kind, match="exact", confidence=1.0, description=desc, status=d.status,
            source=source, sha256=digest, problems=tuple(problems),
            differences=tuple(beh.differences[d.name]) if beh else (),
            renders_in_sandbox=beh.in_sandbox if beh else (False if kind == "adapted" else None),
            scores=beh.scores if beh else {}, notes=tuple(notes), compile_error=error,
        )

    if beh is None:
        return Identification(dialect=None, kind="unknown", match="none", confidence=0.0,
                              description="not a known template text", sha256=digest, notes=tuple(notes))

    # closest dialect: most probes identical, then the most similar renderings; first in DIALECTS on ties
    best = max(beh.scores, key=lambda name: (beh.scores[name], beh.similarity[name]))
    score, similarity = beh.scores[best], beh.similarity[best]
    d = get_dialect(best)
    extra = [] if beh.in_sandbox else [_SANDBOX]
    n = sum(1 for p in PROBES if p.applies_to(d) and p.problem is None and _expected(p, d) is not None)
    alike = f"{round(score * n)} of {n} probes rendered alike, {similarity:.1%} similar"
    detected = problems_of(beh.detected[best])
    if score >= 1.0:
        kind: Kind = "equivalent" if beh.in_sandbox and not detected else "adapted"
        desc = f"renders every probe as {best} does" + ("" if beh.in_sandbox else " (outside transformers' sandbox)")
        if detected:
            desc += f"; its diagnostic probes show {len(detected)} known problem(s)"
        problems = problems_of(best) + extra + detected
    elif similarity >= _SIMILAR:
        kind = "modified" if beh.in_sandbox and not detected else "adapted"
        desc = f"closest to {best}: {alike}"
        problems = extra + detected
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
