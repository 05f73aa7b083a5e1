"""``kimi-chat count``: the token count of a request's prompt (what the model reads), with the Kimi
tokenizer of a model snapshot.

Also the tokenizer helpers of the other commands: :func:`add_tokenizer_arguments` adds ``--tokenizer``,
``--tokenizer-config`` and ``--special-tokens``; :func:`rendered_tokens` renders a request
(:func:`~kimi_chat.cli._request.load_request`) to :class:`~kimi_chat.tokens.rendered.RenderedTokens`;
:func:`tokens_json` gives the ``render --tokens`` output.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ..dialect_records import get_dialect
from ..errors import KimiChatError, ReferenceDataError
from ..families import family_of
from ._io import InputError, fail
from ._request import add_request_arguments, findings_printed, load_request, print_findings


def add_tokenizer_arguments(p: argparse.ArgumentParser) -> None:
    """``--tokenizer DIR``, ``--tokenizer-config FILE`` and ``--special-tokens POLICY``."""
    p.add_argument(
        "--tokenizer", metavar="DIR",
        help="model snapshot directory with tiktoken.model and tokenizer_config.json (default: the reference "
        "data in $KIMI_CHAT_REFERENCE_DIR: the Kimi-K3 tokenizer for kimi-k3, the K2.6-derived "
        "config for reasoning dialects and the July-2025 K2-Instruct config otherwise)",
    )
    p.add_argument("--tokenizer-config", metavar="FILE",
                   help="tokenizer_config.json to use instead of the one in --tokenizer DIR")
    p.add_argument(
        "--special-tokens", choices=("text", "strict", "special"), default="text",
        help="special-token text typed inside messages or tools: 'text' (default) encodes it as ordinary text, "
        "'strict' refuses the request, 'special' encodes it as the special token (as tokenizer.encode(prompt) does; "
        "for kimi-k3 the official tokenizer does 'text', see kimi_chat.families.k3.tokens)",
    )


def load_tokenizer(args: argparse.Namespace, dialect: str) -> Any:
    """The tokenizer named by ``--tokenizer`` / ``--tokenizer-config`` (reference data by default)."""
    try:
        from ..tokens.tokenizer import KimiTokenizer  # noqa: F401
    except ImportError as e:  # pragma: no cover
        raise InputError(f"the tokenizer needs tiktoken: pip install -e '.[tokenizer]' in the checkout ({e})") from e
    try:
        import tiktoken  # noqa: F401
    except ImportError as e:
        raise InputError(f"the tokenizer needs tiktoken: pip install -e '.[tokenizer]' in the checkout ({e})") from e
    d = get_dialect(dialect)
    if args.tokenizer_config and not args.tokenizer:
        raise InputError("--tokenizer-config needs --tokenizer DIR (the directory holding tiktoken.model)")
    tok = snapshot_tokenizer(args.tokenizer, d, args.tokenizer_config, "--tokenizer")
    from ..families.k3.tokens import vocabulary_problem

    problem = vocabulary_problem(tok, d)
    if problem is not None:
        family = family_of(d).title
        raise InputError(f"--tokenizer {args.tokenizer}: {problem}; give --tokenizer a {family} model snapshot "
                         f"directory, or choose the dialect of that snapshot with --dialect")
    return tok


def snapshot_tokenizer(directory: str | None, d: Any, config: str | None, flag: str) -> Any:
    """The tokenizer of the model snapshot ``directory`` for dialect ``d`` (``None``: the reference data's,
    as :meth:`~kimi_chat.tokens.tokenizer.KimiTokenizer.from_reference` picks it for ``d``); reference data
    that is missing is an :class:`InputError` naming ``flag``, the option that gives a snapshot instead."""
    from ..tokens.tokenizer import KimiTokenizer

    family = family_of(d)
    if directory:
        return family.tokens.snapshot_tokenizer(Path(directory), config)
    try:
        return KimiTokenizer.from_reference(family.tokens.reference_tokenizer(d))
    except ReferenceDataError as e:
        raise InputError(f"{e} (or give a model snapshot directory with {flag} DIR)") from e


def rendered_tokens(args: argparse.Namespace, req: dict[str, Any]) -> Any:
    """:func:`kimi_chat.tokens.rendered.render_tokens` of a request
    (:func:`~kimi_chat.cli._request.load_request`)."""
    from ..tokens.rendered import render_tokens

    tok = load_tokenizer(args, req["dialect"])
    return render_tokens(
        req["messages"], tokenizer=tok, tools=req["tools"], dialect=req["dialect"],
        add_generation_prompt=req["add_generation_prompt"], continue_final_message=req.get("continue_final_message", False),
        special_tokens=args.special_tokens, strict=req.get("strict", False), **req["options"],
    )


def tokens_json(args: argparse.Namespace, req: dict[str, Any]) -> str:
    """The ``render --tokens`` output: ``{"ids", "spans", "assistant_mask"}`` as one line of JSON."""
    return json.dumps(rendered_tokens(args, req).to_dict(), separators=(",", ":")) + "\n"


def register(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    p = sub.add_parser(
        "count",
        help="count the tokens of a request's prompt",
        description="Render a chat.completions request ({\"messages\": [...], \"tools\": [...]}) or a bare list "
        "of messages with DIALECT and print the number of prompt tokens.",
    )
    add_request_arguments(p)
    add_tokenizer_arguments(p)
    out = p.add_mutually_exclusive_group()
    out.add_argument("--per-message", action="store_true",
                     help="also print a table of each message's tokens (index, role, tokens, trainable tokens; "
                     "the template's own tokens outside every message as 'scaffolding'), after the total")
    out.add_argument("--json", action="store_true",
                     help='print {"tokens", "trainable", "scaffolding", "messages": [{"index", "role", "tokens", '
                     '"trainable"}]}')
    p.add_argument("--quiet", "-q", action="store_true",
                   help="no notes (the dialect the model names) and no lint findings on stderr")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        req = load_request(args)
        with findings_printed():  # the option findings are printed below with the other lint findings
            r = rendered_tokens(args, req)
        print_findings(args, req)
    except (InputError, KimiChatError, TypeError) as e:
        return fail(str(e))
    roles = {i: m.get("role", "?") if isinstance(m, dict) else getattr(m, "role", "?") for i, m in enumerate(req["messages"])}
    per: dict[int, list[int]] = {}
    for s in r.spans:
        row = per.setdefault(s.message_index, [0, 0])
        row[0] += s.end - s.start
        row[1] += sum(r.assistant_mask[s.start : s.end])
    if args.json:
        doc = {
            "tokens": len(r.ids),
            "trainable": sum(r.assistant_mask),
            "scaffolding": per.get(-1, [0, 0])[0],
            "messages": [
                {"index": i, "role": roles.get(i), "tokens": n, "trainable": t}
                for i, (n, t) in sorted(per.items()) if i >= 0
            ],
        }
        print(json.dumps(doc, ensure_ascii=False))
        return 0
    print(len(r.ids))
    if args.per_message:
        print(f"{'message':<16} {'tokens':>8} {'trainable':>9}")
        for i, (n, t) in sorted(per.items()):
            label = "scaffolding" if i < 0 else f"{i:>4} {roles.get(i)}"
            print(f"{label:<16} {n:>8} {t:>9}")
    return 0
