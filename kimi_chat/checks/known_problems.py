"""Known problems of each template revision and of the known hand-edited copies (data).

``PROBLEMS`` describes each problem once; ``DIALECT_PROBLEMS`` lists the problems of each official
revision (a dialect record's ``known_problems``); ``KNOWN_TEMPLATES`` lists the template texts we know, by the sha256 of their
normalised text (CRLF/CR -> LF, trailing newlines dropped; see :func:`kimi_chat.checks.verification.normalize_template`),
so that :func:`kimi_chat.checks.verification.identify` recognises them without the reference data. The hashes are of
the files described in ``../shared/reference/PROVENANCE.md``; the tests check them against those files
when the reference data is present. No template text is stored here.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Literal

from ..dialect_records import DIALECTS

__all__ = [
    "KnownProblem",
    "KnownTemplate",
    "PROBLEMS",
    "DIALECT_PROBLEMS",
    "KNOWN_TEMPLATES",
    "problems_of",
    "known_template",
]

Severity = Literal["error", "warning", "info"]


@dataclass(frozen=True)
class KnownProblem:
    """One known problem of a template. ``severity``: ``error`` = the model sees a wrong prompt for
    common requests; ``warning`` = wrong for some requests or some runtimes; ``info`` = worth knowing."""

    code: str
    title: str
    detail: str
    severity: Severity

    def to_dict(self) -> dict[str, str]:
        """The problem as plain JSON data."""
        return {"code": self.code, "title": self.title, "detail": self.detail, "severity": self.severity}


PROBLEMS: dict[str, KnownProblem] = {
    p.code: p
    for p in (
        KnownProblem(
            "no-tool-calls",
            "no tool-call support",
            "assistant tool_calls are silently dropped and tool results are written without the id of "
            "their call: the model sees answers to calls it never made",
            "error",
        ),
        KnownProblem(
            "string-arguments-double-encoded",
            "string tool-call arguments double-encoded",
            "arguments given as a JSON string (the OpenAI shape) go through tojson again and reach the "
            'model as a quoted string ("{\\"city\\": ...}"), not as the JSON object it was trained to emit',
            "error",
        ),
        KnownProblem(
            "tool-call-ids-regenerated",
            "tool-call ids regenerated",
            "every call id is rewritten as functions.NAME:INDEX with INDEX restarting at 0 in each "
            "assistant turn, while tool results keep the tool_call_id given: results can name ids "
            "that no call in the prompt has",
            "warning",
        ),
        KnownProblem(
            "literal-backslash-n",
            "literal backslash-n after '## Return of ID'",
            "the template writes the two characters '\\' 'n' between a tool result's header and its "
            "content, not a newline",
            "warning",
        ),
        KnownProblem(
            "missing-final-im-end",
            "missing final <|im_end|> without a generation prompt",
            "with add_generation_prompt=False the last message gets no <|im_end|> (prefill mode): "
            "training or scoring a finished conversation with this template leaves the last turn open",
            "warning",
        ),
        KnownProblem(
            "superseded-revision",
            "superseded revision",
            "Moonshot has since revised this template (e.g. Kimi-K2-Thinking 'fix-default-system-prompt' "
            "declares tools with compact JSON separators); the current text is not in our reference data",
            "info",
        ),
        KnownProblem(
            "needs-tools-ts-str",
            "tool declarations need tools_ts_str from the official tokenizer",
            "the official K2.5 tokenizer passes a TypeScript-style declaration (tools_ts_str); a runtime "
            "that renders the template without that code (e.g. llama.cpp) falls back to a JSON "
            "declaration the model was not trained on",
            "warning",
        ),
        KnownProblem(
            "sandbox-security-error",
            "does not render in transformers' sandbox",
            "with tool calls in the conversation the template mutates a list (list.append / pop), "
            "which transformers' ImmutableSandboxedEnvironment refuses: SecurityError: access to "
            "attribute 'append' of 'list' object is unsafe",
            "error",
        ),
        KnownProblem(
            "template-exceeds-limits",
            "exceeds the rendering limits",
            "rendering a probe took longer, used more memory or wrote more text than the bounds of "
            "kimi_chat.checks.verification.bounded.LIMITS allow (a hostile or broken template); it was not run further",
            "error",
        ),
        KnownProblem(
            "tool-call-ids-renumbered",
            "tool-call ids replaced by a running counter",
            "every call id is rewritten as functions.NAME:COUNTER (a counter across the conversation), "
            "whatever id the request gave",
            "warning",
        ),
        KnownProblem(
            "tool-results-paired-by-order",
            "tool results paired with calls by order",
            "a queue pairs each tool result with the next pending call; the result's own tool_call_id "
            "is ignored (results answered out of order get the wrong id; a result without a pending "
            "call gets functions.NAME:COUNTER)",
            "warning",
        ),
        KnownProblem(
            "reasoning-retained-longer",
            "reasoning retained for more turns",
            "the loop that finds the last assistant turn without tool calls lost its {% break %}, so "
            "the history is split at the FIRST such turn: reasoning_content of later plain assistant "
            "turns stays in the prompt, which the official template drops",
            "warning",
        ),
        KnownProblem(
            "system-tool-newline",
            "newline after <|im_middle|> of system and tool messages",
            "an '{% endif %}' without whitespace control leaves a newline after the role header of "
            "system and tool messages; the official text has none",
            "warning",
        ),
        KnownProblem(
            "default-system-newline",
            "newline after the default system prompt",
            "a '{% endif %}' without whitespace control leaves a newline between the default system "
            "prompt's <|im_end|> and the next message",
            "warning",
        ),
        KnownProblem(
            "thinking-tool-layout",
            "tools and tool results laid out as Kimi-K2-Thinking does",
            "tools are declared without the '\\n  # Tools\\n  ' header and results written as "
            "'## Return of ID' + newline, where Kimi-K2-Instruct-0905 writes '## Return of ID' + newline "
            "+ four spaces",
            "warning",
        ),
        KnownProblem(
            "renamed-video-placeholder",
            "renamed video placeholder",
            "the video placeholder is spelled <|kite_video_placeholder|>, not <|kimi_k25_video_placeholder|>",
            "warning",
        ),
        KnownProblem(
            "accepts-medium-effort",
            "accepts thinking_effort=\"medium\"",
            "the port renders a thinking-effort message for thinking_effort=\"medium\", which the official "
            "Kimi-K3 encoder refuses (its valid efforts are low, high and max): the model is told an effort "
            "it was not trained with, where the official tokenizer raises",
            "warning",
        ),
        KnownProblem(
            "needs-parsed-arguments",
            "needs the host to parse string tool-call arguments",
            "given arguments as a JSON string (the OpenAI shape) the port writes one json element holding "
            "the raw text, where the official encoder parses it and writes one typed argument element per "
            "key; only a host that parses arguments into objects first (llama.cpp does) sends the official "
            "prompt",
            "error",
        ),
        KnownProblem(
            "accepts-non-object-arguments",
            "renders arguments that are JSON but not an object",
            "arguments whose JSON is a string or null (e.g. '\"Paris\"', 'null'), which the official "
            "encoder refuses, reach the port parsed by the host: a string is written as a json element, "
            "null as a call without arguments",
            "warning",
        ),
        KnownProblem(
            "case-insensitive-key-sort",
            "JSON keys sorted case-insensitively",
            "the port sorts tool declarations and the response schema with Jinja's dictsort, which "
            "ignores case, where the official encoder sorts keys by code point (uppercase first): "
            "schemas with keys that differ in case ('Units' and 'city') are declared in another order",
            "warning",
        ),
        KnownProblem(
            "llama-server-continuation",
            "llama-server rewrites a conversation that ends with the assistant",
            "with its default --prefill-assistant, llama-server renders the conversation without the last "
            "assistant message and without a generation prompt, then appends "
            "<|im_assistant|>assistant<|im_middle|><think> + reasoning (+ </think> + content) itself "
            "(common/parsers/kimi-k2.cpp): <think></think> even for revisions without reasoning; serve with "
            "--no-prefill-assistant for the template's own rendering",
            "info",
        ),
        KnownProblem(
            "llama-server-chat-fails",
            "llama-server's chat endpoint fails with this template",
            "without a generation prompt the template leaves the last <|im_end|> out, so the generation "
            "prompt llama-server computes starts with <|im_end|>: its Kimi parser rejects every answer "
            "(HTTP 500) and tool_choice \"required\" aborts the server (GGML_ABORT in llama-grammar.cpp); "
            "use /completion with kimi_chat.render's prompt and kimi_chat.parse, or kimi-chat run",
            "warning",
        ),
        KnownProblem(
            "llama-server-preserves-reasoning",
            "llama-server keeps every turn's reasoning",
            "llama-server's default --reasoning-preserve passes preserve_thinking=true, so the template "
            "keeps the reasoning of every assistant turn where the official default drops it; serve with "
            "--no-reasoning-preserve",
            "info",
        ),
    )
}
"""Every known problem, by code."""

class _DialectProblems(Mapping[str, tuple[str, ...]]):
    """Dialect name -> its record's ``known_problems`` (a view of the registry: a registered dialect is in it)."""

    def __getitem__(self, name: str) -> tuple[str, ...]:
        return DIALECTS[name].known_problems

    def __iter__(self) -> Iterator[str]:
        return iter(DIALECTS)

    def __len__(self) -> int:
        return len(DIALECTS)


DIALECT_PROBLEMS: Mapping[str, tuple[str, ...]] = _DialectProblems()
"""Known problems of each official revision (dialect name -> problem codes: each record's ``known_problems``)."""


@dataclass(frozen=True)
class KnownTemplate:
    """A template text we know, identified by the sha256 of its normalised text."""

    sha256: str
    name: str
    kind: Literal["official", "variant", "adapted"]
    """``official``: the dialect's oracle text; ``variant``: another copy of the same revision that
    differs in a few places; ``adapted``: a runtime's hand-edited copy (for Kimi-K3, which ships no
    template, a runtime's Jinja port of its Python encoder)."""
    dialect: str
    """The dialect it is (``official``) or is a copy of."""
    source: str
    """Path in the reference directory."""
    problems: tuple[str, ...]


KNOWN_TEMPLATES: tuple[KnownTemplate, ...] = (
    KnownTemplate(
        "0d19c3a601c02d8f788799efcaceee9f0cda955e165b9c137ea9f7198fea4d37",
        "Kimi-K2-Instruct chat template rev1 (July 2025; also its CRLF copy)",
        "official", "kimi-k2-instruct@rev1", "Kimi-K2-Instruct/chat_template.rev1.jinja",
        DIALECT_PROBLEMS["kimi-k2-instruct@rev1"],
    ),
    KnownTemplate(
        "aab20feb9bc6881f941ea649356130ffbc4943b3c2577c0991e1fba90de5a0fc",
        "Kimi-K2-Instruct chat template rev2 (Jul-Aug 2025)",
        "official", "kimi-k2-instruct@rev2", "Kimi-K2-Instruct/chat_template.rev2.jinja",
        DIALECT_PROBLEMS["kimi-k2-instruct@rev2"],
    ),
    KnownTemplate(
        "e6fa021588a5df3d87323e0b121c36eb6b97ce40db9de68ef7d5ae63b54212da",
        "Kimi-K2-Instruct-0905 chat template (candidate A)",
        "official", "kimi-k2-instruct-0905", "unverified/Kimi-K2-Instruct-0905.chat_template.candidate-A.jinja",
        DIALECT_PROBLEMS["kimi-k2-instruct-0905"],
    ),
    KnownTemplate(
        "c06a13ddd7473f73f8aa85150e6787520369d2d1d5c56997de24d0eca723f55e",
        "Kimi-K2-Instruct-0905 chat template, candidate B (a llama.cpp fork's test copy)",
        "variant", "kimi-k2-instruct-0905", "unverified/Kimi-K2-Instruct-0905.chat_template.candidate-B.jinja",
        ("system-tool-newline",),
    ),
    KnownTemplate(
        "f1838522f489f10c9196540a7e995578511168f9d6d7ce8a373909446c35d643",
        "Kimi-K2-Thinking chat template rev1 (Nov 2025)",
        "official", "kimi-k2-thinking@rev1", "Kimi-K2-Thinking/chat_template.rev1.jinja",
        DIALECT_PROBLEMS["kimi-k2-thinking@rev1"],
    ),
    KnownTemplate(
        "5bedbcf938aa8bd589432bed04281eab86e2376921f8d919b9790420335ee14c",
        "Kimi-K2.5 chat template (reconstructed: miles' copy without miles' preserve_thinking patch)",
        "official", "kimi-k2.5", "unverified/Kimi-K2.5.chat_template.reconstructed-v2.jinja",
        DIALECT_PROBLEMS["kimi-k2.5"],
    ),
    KnownTemplate(
        "8bf859698fd4781c0e1e1c63ce74422aab27e53ccc5f47116317c64cda06132f",
        "Kimi-K2.6 chat template (reconstructed; the text once taken for K2.5's)",
        "official", "kimi-k2.6", "unverified/Kimi-K2.6.chat_template.reconstructed.jinja",
        DIALECT_PROBLEMS["kimi-k2.6"],
    ),
    KnownTemplate(
        "345ca6238f38c22aa4ade14a9bba5a7e4d1c4ae1a1fc040a267bed55509a505b",
        "Kimi-K2.6 chat template, renamed copy (kite1.0)",
        "variant", "kimi-k2.6", "unverified/Kimi-K2.6-derived.chat_template.jinja",
        ("renamed-video-placeholder", "needs-tools-ts-str"),
    ),
    KnownTemplate(
        "c8ae60ab656318c2ecbccab4d3d730476681df9d4ef0f424138ba921a92ab4e2",
        "llama.cpp's adapted Kimi-K2-Thinking template",
        "adapted", "kimi-k2-thinking@rev1", "llama.cpp-adaptations/llama.cpp__Kimi-K2-Thinking.jinja",
        ("sandbox-security-error", "tool-results-paired-by-order", "reasoning-retained-longer"),
    ),
    KnownTemplate(
        "4027d478e682204ecc53bb42cd60402338dcac3c9312c32335865fcaf59cb1e8",
        "ik_llama.cpp's adapted Kimi-K2-Thinking template",
        "adapted", "kimi-k2-thinking@rev1", "llama.cpp-adaptations/ik_llama.cpp__Kimi-K2-Thinking.jinja",
        ("sandbox-security-error", "tool-call-ids-renumbered", "tool-results-paired-by-order",
         "reasoning-retained-longer"),
    ),
    KnownTemplate(
        "02e91795d2270374161c7063c9b1d084bb8cb3fb04b1ae977cf0e2953bdbbf92",
        "ik_llama.cpp's adapted Kimi-K2-Instruct template",
        "adapted", "kimi-k2-instruct-0905", "llama.cpp-adaptations/ik_llama.cpp__Kimi-K2-Instruct.jinja",
        ("sandbox-security-error", "tool-call-ids-renumbered", "tool-results-paired-by-order",
         "default-system-newline", "thinking-tool-layout"),
    ),
    KnownTemplate(
        "98cb34f3e4aa2ce1ec792a7d16a9a419ac47225ca22323b9418058e8179ef0b5",
        "llama.cpp's Jinja port of the Kimi-K3 encoder (models/templates/Kimi-K3.jinja)",
        "adapted", "kimi-k3", "llama.cpp-adaptations/llama.cpp__Kimi-K3.jinja",
        ("accepts-medium-effort", "needs-parsed-arguments", "accepts-non-object-arguments",
         "case-insensitive-key-sort"),
    ),
)
"""Every template text we know (official oracle texts, variants, runtime adaptations)."""

_BY_HASH = {t.sha256: t for t in KNOWN_TEMPLATES}


def known_template(sha256: str) -> KnownTemplate | None:
    """The known template with this normalised-text sha256, if any."""
    return _BY_HASH.get(sha256)


def problems_of(codes_or_dialect: str | tuple[str, ...] | list[str]) -> list[KnownProblem]:
    """The problems of a dialect (given its canonical name) or of a list of problem codes."""
    if isinstance(codes_or_dialect, str):
        codes: tuple[str, ...] | list[str] = DIALECT_PROBLEMS.get(codes_or_dialect, ())
    else:
        codes = codes_or_dialect
    return [PROBLEMS[c] for c in codes]
