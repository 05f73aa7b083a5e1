"""Text helpers for comparing prompts: the normalised template text and its hash, whitespace made
visible, where two prompts first differ and a readable diff."""

from __future__ import annotations

import difflib
import hashlib

from ... import markers as M

__all__ = ["normalize_template", "template_sha256", "visible", "first_difference", "prompt_diff"]


def normalize_template(text: str) -> str:
    """The text compared for an exact match: CRLF and CR turned into LF, trailing newlines dropped
    (converters and editors add or drop them; Jinja renders the same either way)."""
    return text.replace("\r\n", "\n").replace("\r", "\n").rstrip("\n")


def template_sha256(text: str) -> str:
    """sha256 of the normalised text (the key of :data:`kimi_chat.checks.known_problems.KNOWN_TEMPLATES`)."""
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
