"""The official rendering: a template rendered by transformers' own chat-template machinery.

This is the oracle the formatter is checked against (tests, ``fixtures/golden/regenerate.py``,
``kimi-chat verify``). It reproduces what the official Kimi tokenizer's ``apply_chat_template(...,
tokenize=False)`` does:

* transformers' input normalisation: message objects to dicts, ``None``-valued keys dropped,
  ``reasoning`` / ``thinking`` copied to ``reasoning_content``, everything made plain JSON data;
* the rendering itself: transformers' sandboxed Jinja environment (``trim_blocks``, ``lstrip_blocks``,
  its own ``tojson``), compiled once per template text;
* the Kimi tokenizer's own pre-processing: later ``tokenization_kimi.py`` versions sort the keys of
  every dict in ``tools`` (``deep_sort_dict``), and the K2.5 / K2.6 tokenizer passes ``tools_ts_str``,
  computed by its own ``tool_declaration_ts.py`` (from the reference data), or nothing when that
  encoder fails (the template then writes the tools as JSON).

That is the K2 family's machinery (:mod:`kimi_chat.families.k2.oracle` renders with it). :func:`render_official`
knows every family (its record's ``official_render``): Kimi-K3 ships no template, its official rendering is the
release's own tokenizer (:mod:`kimi_chat.families.k3.oracle`).

transformers is an optional dependency (``pip install -e '.[verify]'`` in the checkout).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..errors import KimiChatError, ReferenceDataError
from ..nesting import deep_sort_dict
from . import reference_dir
from ..families.k2.spec import K2Spec

__all__ = [
    "OracleUnavailable", "NoOracleTemplateError", "deep_sort_dict", "render_template", "render_as_tokenizer",
    "render_official", "oracle_template", "official_tools_ts", "official_tools_ts_encoder",
    "OFFICIAL_TOOLS_TS",
]


class OracleUnavailable(KimiChatError, ImportError):
    """transformers (the official chat-template machinery) is not installed."""


class NoOracleTemplateError(KimiChatError, ValueError):
    """The dialect's official rendering is not a Jinja template (Kimi-K3: the tokenizer's Python encoder)."""


def _chat_template_utils() -> Any:
    try:
        import os

        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        from transformers.utils import chat_template_utils
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise OracleUnavailable(
            "rendering a template the official way needs transformers: "
            "pip install -e '.[verify]' (run in the kimi_chat checkout)"
        ) from e
    return chat_template_utils


def render_template(
    template: str,
    messages: Sequence[Any],
    *,
    tools: Sequence[Mapping[str, Any]] | None = None,
    add_generation_prompt: bool = True,
    sort_tool_keys: bool = False,
    **template_kwargs: Any,
) -> str:
    """Render ``template`` exactly as a Kimi tokenizer's ``apply_chat_template(tokenize=False)`` would.

    ``sort_tool_keys`` applies the tokenizer's ``deep_sort_dict`` to ``tools`` first. Template errors
    propagate as raised by Jinja / transformers.
    """
    ctu = _chat_template_utils()
    if not messages:
        # what PreTrainedTokenizerBase.apply_chat_template does
        raise ValueError("Cannot apply chat template to an empty conversation. Provide at least one message.")
    normalize = getattr(ctu, "_normalize_chat_messages", None)
    if normalize is not None:
        normalized = normalize(list(messages))
    else:  # transformers < 5.2x (vLLM 0.33 pins 5.19): the same normalisation of plain dict messages
        normalized = [{k: v for k, v in dict(m).items() if v is not None} for m in messages]
    if tools and sort_tool_keys:
        to_dicts = getattr(ctu, "_message_objects_to_dicts", None)
        tools = deep_sort_dict(to_dicts(list(tools)) if to_dicts is not None else list(tools))
    rendered, _ = ctu.render_jinja_template(
        conversations=[normalized],
        tools=list(tools) if tools is not None else None,
        chat_template=template,
        add_generation_prompt=add_generation_prompt,
        **template_kwargs,
    )
    return str(rendered[0])


_TEMPLATE_CACHE: dict[Path, str] = {}


def oracle_template(dialect: Any) -> str:
    """The text of a dialect's oracle template from the reference directory.

    Raises :class:`~kimi_chat.errors.ReferenceDataError` when the reference data is absent, and
    :class:`NoOracleTemplateError` for a dialect whose official rendering is no Jinja template (Kimi-K3:
    see :func:`render_official`).
    """
    from ..dialect_records import K2_DIALECTS, get_dialect

    d = get_dialect(dialect)
    if d.name not in K2_DIALECTS:
        raise NoOracleTemplateError(
            f"dialect {d.name} has no Jinja oracle template ({d.oracle} is the official tokenizer's Python "
            "encoder): render it officially with kimi_chat.reference.oracle.render_official or kimi_chat.families.k3.oracle"
        )
    root = reference_dir()
    if root is None:
        raise ReferenceDataError(
            "reference data not found: set $KIMI_CHAT_REFERENCE_DIR to the reference directory"
        )
    path = root / d.oracle
    if path not in _TEMPLATE_CACHE:
        try:
            _TEMPLATE_CACHE[path] = path.read_text(encoding="utf-8")
        except OSError as e:
            raise ReferenceDataError(f"{path}: cannot read the oracle template of {d.name}: {e}") from e
    return _TEMPLATE_CACHE[path]


OFFICIAL_TOOLS_TS = "Kimi-K2.6/tool_declaration_ts.py"
"""The official K2.5/K2.6 TypeScript tool encoder in the reference data (Moonshot's own copy)."""
_TS_MODULES: dict[Path, Any] = {}


def official_tools_ts_encoder() -> Any:
    """The official ``encode_tools_to_typescript_style`` (:data:`OFFICIAL_TOOLS_TS` of the reference
    data, imported from there under a private module name, never copied). Raises
    :class:`~kimi_chat.errors.ReferenceDataError` when the file is absent."""
    import importlib.util

    root = reference_dir()
    path = root / OFFICIAL_TOOLS_TS if root is not None else None
    if path is None or not path.is_file():
        raise ReferenceDataError(f"{path or OFFICIAL_TOOLS_TS}: file not found (the official K2.5/K2.6 tool encoder)")
    if path not in _TS_MODULES:
        spec = importlib.util.spec_from_file_location("_kimi_chat_oracle_k26.tool_declaration_ts", path)
        if spec is None or spec.loader is None:  # pragma: no cover - a regular .py file always has one
            raise ReferenceDataError(f"{path}: cannot be imported")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _TS_MODULES[path] = module.encode_tools_to_typescript_style
    return _TS_MODULES[path]


def official_tools_ts(tools: Sequence[Any]) -> str | None:
    """The ``tools_ts_str`` the official K2.5/K2.6 tokenizer passes to its template for ``tools``
    (already key-sorted, as its ``apply_chat_template`` sorts them first): the official encoder's
    result, or ``None`` where it raises (the tokenizer catches any ``Exception`` and the template
    then declares the tools as JSON)."""
    encode = official_tools_ts_encoder()
    try:
        return str(encode(tools))
    except Exception:  # noqa: BLE001 - exactly what tokenization_kimi.apply_chat_template catches
        return None


def render_as_tokenizer(
    template: str,
    messages: Sequence[Any],
    dialect: Any,
    *,
    tools: Sequence[Mapping[str, Any]] | None = None,
    add_generation_prompt: bool = True,
    tools_ts: Callable[[list[Any]], str | None] | None = None,
    **options: Any,
) -> str:
    """Render ``template`` as the official tokenizer of ``dialect`` would: transformers' machinery,
    tool keys sorted where the dialect's tokenizer sorts them, ``tools_ts_str`` for K2.5 / K2.6 computed
    by the official encoder (:func:`official_tools_ts`, with the tokenizer's fallback to JSON where it
    fails; ``tools_ts`` replaces it, e.g. where the reference data is absent). Template errors propagate."""
    from ..dialect_records import get_dialect

    d = get_dialect(dialect)
    kwargs = dict(options)
    k2 = d.spec if isinstance(d.spec, K2Spec) else None  # (a K3 port declares tools as its encoder does: no switch)
    sort_tool_keys = k2 is not None and k2.sort_tool_keys
    if k2 is not None and k2.tools_typescript and tools:
        ts_tools = deep_sort_dict(list(tools)) if sort_tool_keys else list(tools)
        ts = (tools_ts or official_tools_ts)(ts_tools)
        if ts is not None:  # as the tokenizer: a failed encoding passes nothing, the template writes JSON
            kwargs["tools_ts_str"] = ts
    return render_template(
        template, messages, tools=tools, add_generation_prompt=add_generation_prompt,
        sort_tool_keys=sort_tool_keys, **kwargs,
    )


def render_official(
    messages: Sequence[Any],
    *,
    tools: Sequence[Mapping[str, Any]] | None = None,
    dialect: Any = "kimi-k2-instruct",
    add_generation_prompt: bool = True,
    **options: Any,
) -> str:
    """The official rendering of a dialect, whatever its family (the family record's ``official_render``): for the
    K2 family its oracle template with its tokenizer's pre-processing (:func:`render_as_tokenizer`),
    for Kimi-K3 the official tokenizer (:func:`kimi_chat.families.k3.oracle.official_k3_render`). Errors of the
    official machinery propagate as raised."""
    from ..dialect_records import get_dialect

    d = get_dialect(dialect)
    return d.family_parts.official.render(messages, tools, d, add_generation_prompt, **options)
