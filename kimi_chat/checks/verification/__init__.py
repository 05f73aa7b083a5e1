"""Is this chat template right? :func:`identify` says which known template a text is; :func:`verify`
searches for a conversation where a template renders differently from a dialect, and shrinks it.

Both render the template the way transformers does (:func:`kimi_chat.reference.oracle.render_template`: its
sandboxed Jinja environment, its input normalisation, the Kimi tokenizer's tool pre-processing) and
compare with :func:`kimi_chat.render`. transformers is an optional extra:
``pip install -e '.[verify]'`` in the checkout.

Runtimes such as llama.cpp run their own Jinja engines, which allow what transformers' sandbox
refuses (``list.append``); their adapted templates fail in transformers with a ``SecurityError``.
That is reported as a finding, and :func:`identify` then renders the template once more in a
sandbox that allows mutating lists (still a sandbox: no attribute escapes), to show what such a
runtime would send the model.

Kimi-K3 ships no template; a Jinja port of its encoder (llama.cpp's) is rendered as llama.cpp runs it
(tool-call arguments JSON strings parsed first, :func:`~kimi_chat.checks.verification.rendering.host_parsed_arguments`)
and compared with ``render(dialect="kimi-k3")``; diagnostic probes detect a port's known problems.

The modules:

* :mod:`~kimi_chat.checks.verification.identification`: :func:`identify` and its result :class:`Identification`;
* :mod:`~kimi_chat.checks.verification.search`: :func:`verify` and its result :class:`VerifyReport`;
* :mod:`~kimi_chat.checks.verification.probes`: the fixed conversations :func:`identify` renders;
* :mod:`~kimi_chat.checks.verification.diffing`: normalised text and hash, visible whitespace, prompt diffs;
* :mod:`~kimi_chat.checks.verification.rendering`: a template rendered for a dialect (strict or lenient
  sandbox), kimi_chat's own templates;
* :mod:`~kimi_chat.checks.verification.bounded`: the time, memory and output bounds every rendering runs within
  (:data:`~kimi_chat.checks.verification.bounded.LIMITS`): a template exceeding them (a hostile one) is reported
  by :func:`identify` as the problem ``template-exceeds-limits``; :func:`verify` raises
  :class:`~kimi_chat.checks.verification.bounded.TemplateLimitError`.

Every name is importable from ``kimi_chat.verify`` as before. ``kimi_chat.verify`` as an attribute
of ``kimi_chat`` is the function; ``importlib.import_module("kimi_chat.verify")`` is this package.
"""

from __future__ import annotations

from .diffing import first_difference, normalize_template, prompt_diff, template_sha256, visible
from .identification import Difference, Identification, Kind, identify
from .probes import PROBES, Probe
from .rendering import (
    VERIFY_EXTRA,
    TemplateCompileError,
    TemplateLimitError,
    own_template_path,
    own_template_text,
    host_parsed_arguments,
    render_with_dialect,
)
from .search import VerifyReport, verify

__all__ = [
    "TemplateCompileError",
    "TemplateLimitError",
    "Difference",
    "Identification",
    "Kind",
    "VerifyReport",
    "Probe",
    "PROBES",
    "VERIFY_EXTRA",
    "identify",
    "verify",
    "normalize_template",
    "template_sha256",
    "render_with_dialect",
    "host_parsed_arguments",
    "visible",
    "first_difference",
    "prompt_diff",
    "own_template_text",
    "own_template_path",
]
