"""kimi_chat's own Jinja chat templates, one per dialect (``templates/<dialect>.jinja``).

Each template renders, under transformers' sandboxed Jinja environment, the same bytes as
:func:`kimi_chat.render` for its dialect (checked by ``tests/test_templates.py``), so a server can load
it with ``--chat-template``. They are written for this project, not copied from the official files.
In llama-server's own Jinja engine they give the official prompt too, except where llama-server
rewrites the request first (``tests/engines/test_llama_server.py`` asserts each case; README "llama-server").

Where the files are:

* installed from a wheel: package data ``kimi_chat/templates_data/<dialect>.jinja``;
* in a checkout (or an editable install): ``<repo>/templates/<dialect>.jinja``.

Reading a template needs no Jinja and no transformers.
"""

from __future__ import annotations

from pathlib import Path

from .dialect_records import DialectRecord as Dialect, get_dialect

__all__ = ["LLAMA_SERVER_FLAGS", "template_path", "template_text", "template_dirs"]

LLAMA_SERVER_FLAGS: tuple[str, ...] = ("--jinja", "--no-prefill-assistant", "--no-reasoning-preserve")
"""The llama-server flags to serve our templates with (the README's command, run by
``tests/engines/test_llama_server.py``), beside ``--chat-template-file``: ``--no-prefill-assistant`` stops the
continuation rewrite of a conversation whose last message is the assistant's; ``--no-reasoning-preserve``
stops llama-server from setting ``preserve_thinking=true`` (its default), which keeps every turn's
reasoning in K2.6's prompt (see :mod:`kimi_chat.checks.known_problems`)."""

_PACKAGE_DIR = Path(__file__).resolve().parent
_CANDIDATE_DIRS = (
    _PACKAGE_DIR / "templates_data",  # wheel (package data)
    _PACKAGE_DIR.parent / "templates",  # repository layout
)


def template_dirs() -> list[Path]:
    """The directories searched for templates, in order (only those that exist)."""
    return [d for d in _CANDIDATE_DIRS if d.is_dir()]


def template_path(dialect: str | Dialect) -> Path:
    """Path of kimi_chat's template for ``dialect`` (a canonical name, an alias or a
    :class:`~kimi_chat.dialects.Dialect`).

    Raises :class:`~kimi_chat.errors.UnknownDialectError` for an unknown dialect and
    ``FileNotFoundError`` (naming the places searched) when the template file is missing, or saying
    so for a dialect that has no Jinja template (the K3 family: its official tokenizer renders in Python).
    """
    d = get_dialect(dialect)
    name = d.name
    if not d.family_parts.official.jinja_templates:
        raise FileNotFoundError(f"dialect {name!r} has no Jinja chat template: its official tokenizer renders "
                                "in Python (kimi_chat.render serves it; servers: --tokenizer-mode / the release's tokenizer)")
    filename = name + ".jinja"
    for d in _CANDIDATE_DIRS:
        p = d / filename
        if p.is_file():
            return p
    searched = ", ".join(str(d) for d in _CANDIDATE_DIRS)
    raise FileNotFoundError(f"no chat template for dialect {name!r}: {filename} not found in {searched}")


def template_text(dialect: str | Dialect) -> str:
    """Text of kimi_chat's template for ``dialect`` (see :func:`template_path`)."""
    return template_path(dialect).read_text(encoding="utf-8")
