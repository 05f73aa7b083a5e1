"""Generate the K2.5-line templates (Kimi-K2.5, Kimi-K2.6, Kimi-K2.7-Code) from one source.

The three templates are one text, ``templates/macros/kimi-k2.x.jinja.in``, with the few places they differ
left as ``@@NAME@@`` lines: the header comment, the documentation of the reasoning policy, which options
decide the history split (``HISTORY``), how an assistant turn's ``<think>`` is written (``THINK``) and how
the generation prompt opens it (``GENERATION_THINK``). :data:`VARIANTS` fills them per template, and
``@@TOOLS_TS@@`` is the tools_ts macro block (``templates/macros/tools_ts.jinja``): transformers renders a
chat template from a string (no loader, so no ``{% include %}``), so the block is pasted in.

    python templates/macros/sync.py          # write the templates (a second run changes nothing)
    python templates/macros/sync.py --check  # exit 1 naming the templates that are out of step

``tests/test_templates_generated.py`` fails while a committed template differs from its generated text.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "tools_ts.jinja"
"""The tools_ts macro block."""
TEMPLATE_SOURCE = HERE / "kimi-k2.x.jinja.in"
"""The one source of the K2.5-line templates."""
BEGIN = "{#- BEGIN tools_ts macros"
END = "{#- END tools_ts macros -#}\n"
ANCHOR = "{%- macro render_content(content) -%}"

_K25_LINE_GENERATION_DOC = (
    "    * no default system prompt;\n"
    "    * generation prompt: <|im_assistant|>assistant<|im_middle|> + <think> (thinking on) or\n"
    "      <think></think> (thinking=false);\n"
)
_THINKING_OFF = "{%- set thinking_off = thinking is defined and thinking is false -%}\n"
_SPLIT = "{%- set split = namespace(index=-1) -%}\n"
_SPLIT_LOOP = (
    "{%- for message in messages -%}\n"
    "  {%- if message['role'] == 'assistant' and not message.get('tool_calls') -%}\n"
    "    {%- set split.index = loop.index0 -%}\n"
    "  {%- endif -%}\n"
    "{%- endfor -%}\n"
)
_REASONING_FIRST = "message.get('reasoning', message.get('reasoning_content', message.get('thinking', '')))"
"""K2.6's reading of a turn's reasoning: ``reasoning``, else ``reasoning_content``, else ``thinking``."""


def _think(condition: str | None, reasoning: str) -> str:
    """An assistant turn's ``<think>``: empty where ``condition`` holds (``None``: never), else the reasoning."""
    kept = "{{- '<think>' ~ " + reasoning + " ~ '</think>' -}}\n"
    if condition is None:
        return "    " + kept
    return ("    {%- if " + condition + " -%}\n      {{- '<think></think>' -}}\n    {%- else -%}\n      " + kept
            + "    {%- endif -%}\n")


_GENERATION_SWITCH = ("  {%- if thinking_off -%}\n    {{- '<think></think>' -}}\n  {%- else -%}\n"
                      "    {{- '<think>' -}}\n  {%- endif -%}\n")

VARIANTS: dict[str, dict[str, str]] = {
    "kimi-k2.5.jinja": {
        "HEADER": (
            "{#- kimi_chat's chat template for dialect kimi-k2.5 (Kimi-K2.5). Written for kimi_chat (not a copy of\n"
            "    the official file) and generated to match kimi_chat.render() byte for byte under transformers'\n"
            "    sandboxed Jinja environment (tests/test_templates.py). The official template lives in the\n"
            "    Kimi-K2.5 Hugging Face repo (chat_template.jinja); our reference copy (RECONSTRUCTED: another\n"
            "    project's copy with that project's patch taken out):\n"
            "    ../shared/reference/unverified/Kimi-K2.5.chat_template.reconstructed-v2.jinja.\n"
            "    Options (template kwargs): thinking (default true), and tools_ts_str, the TypeScript tool\n"
            "    declaration the official tokenizer computes and passes (kimi_chat.tools_to_typescript(tools)).\n"
            "    preserve_thinking is not read (that flag is Kimi-K2.6's: templates/kimi-k2.6.jinja).\n"
        ),
        "REASONING_DOC": _K25_LINE_GENERATION_DOC + (
            "    * history split: assistant turns up to and including the LAST assistant turn without tool calls\n"
            "      get <think></think>; later ones get <think>REASONING</think> (REASONING = reasoning_content,\n"
            "      else `thinking`, else `reasoning`: the official reads reasoning_content only, which\n"
            "      transformers fills from those three in that order), or <think></think> when thinking=false;\n"
        ),
        "HISTORY": _THINKING_OFF + _SPLIT + _SPLIT_LOOP,
        "THINK": _think("loop.index0 <= split.index or thinking_off",
                        "message.get('reasoning_content', message.get('thinking', message.get('reasoning', '')))"),
        "GENERATION_THINK": _GENERATION_SWITCH,
    },
    "kimi-k2.6.jinja": {
        "HEADER": (
            "{#- kimi_chat's chat template for dialect kimi-k2.6 (Kimi-K2.6). Written for kimi_chat (not a copy of\n"
            "    the official file) and generated to match kimi_chat.render() byte for byte under transformers'\n"
            "    sandboxed Jinja environment (tests/test_templates.py). The official template lives in the\n"
            "    Kimi-K2.6 Hugging Face repo (chat_template.jinja); our reference copy (RECONSTRUCTED from a renamed\n"
            "    copy): ../shared/reference/unverified/Kimi-K2.6.chat_template.reconstructed.jinja.\n"
            "    Options (template kwargs): thinking (default true), preserve_thinking (default false), and\n"
            "    tools_ts_str, the TypeScript tool declaration the official tokenizer computes and passes\n"
            "    (kimi_chat.tools_to_typescript(tools)).\n"
        ),
        "REASONING_DOC": _K25_LINE_GENERATION_DOC + (
            "    * history split (unless preserve_thinking): assistant turns up to and including the LAST\n"
            "      assistant turn without tool calls get <think></think>; later ones get <think>REASONING</think>\n"
            "      (REASONING = `reasoning`, else reasoning_content, else `thinking`), or <think></think> when\n"
            "      thinking=false and preserve_thinking is false; preserve_thinking=true keeps every reasoning;\n"
        ),
        "HISTORY": ("{%- set preserve = preserve_thinking is defined and preserve_thinking is true -%}\n"
                    + _THINKING_OFF + _SPLIT + "{%- if not preserve -%}\n"
                    + "".join("  " + line + "\n" for line in _SPLIT_LOOP.splitlines()) + "{%- endif -%}\n"),
        "THINK": _think("loop.index0 <= split.index or (thinking_off and not preserve)", _REASONING_FIRST),
        "GENERATION_THINK": _GENERATION_SWITCH,
    },
    "kimi-k2.7-code.jinja": {
        "HEADER": (
            "{#- kimi_chat's chat template for dialect kimi-k2.7-code (Kimi-K2.7-Code). Written for kimi_chat and\n"
            "    generated to match kimi_chat.render() byte for byte under transformers' sandboxed Jinja\n"
            "    environment (tests/test_templates.py). No official template of Kimi-K2.7-Code is public: its\n"
            "    format is RECONSTRUCTED as Kimi-K2.6's (same architecture and tokenizer) with reasoning always on\n"
            "    and every turn's reasoning kept, that is Kimi-K2.6's reference template\n"
            "    (../shared/reference/unverified/Kimi-K2.6.chat_template.reconstructed.jinja) rendered with\n"
            "    thinking=true and preserve_thinking=true. Options (template kwargs): tools_ts_str only, the\n"
            "    TypeScript tool declaration (kimi_chat.tools_to_typescript(tools)); thinking and\n"
            "    preserve_thinking are not read.\n"
        ),
        "REASONING_DOC": (
            "    * no default system prompt;\n"
            "    * generation prompt: <|im_assistant|>assistant<|im_middle|> + <think> (always);\n"
            "    * every assistant turn gets <think>REASONING</think> (REASONING = `reasoning`, else\n"
            "      reasoning_content, else `thinking`): no history split, no thinking switch;\n"
        ),
        "HISTORY": "",
        "THINK": _think(None, _REASONING_FIRST),
        "GENERATION_THINK": "  {{- '<think>' -}}\n",
    },
}
"""Template file name -> the text of each ``@@NAME@@`` line of :data:`TEMPLATE_SOURCE`."""
TARGETS = tuple(VARIANTS)


def block() -> str:
    """The macro block as it must appear in every target template."""
    return SOURCE.read_text(encoding="utf-8")


def synced(text: str) -> str:
    """``text`` (a template) with its macro block replaced by (or, if absent, inserted as) the source's."""
    new = block()
    if BEGIN in text:
        start = text.index(BEGIN)
        end = text.index(END, start) + len(END)
        return text[:start] + new + text[end:]
    at = text.index(ANCHOR)
    return text[:at] + new + text[at:]


def generate(name: str) -> str:
    """The text of template ``name`` (a key of :data:`VARIANTS`): the source with its ``@@NAME@@`` lines filled."""
    values = dict(VARIANTS[name], TOOLS_TS=block())
    out = []
    for line in TEMPLATE_SOURCE.read_text(encoding="utf-8").splitlines(keepends=True):
        key = line.strip()
        if key.startswith("@@") and key.endswith("@@"):
            out.append(values.pop(key[2:-2]))
        else:
            out.append(line)
    if values:
        raise ValueError(f"{name}: {TEMPLATE_SOURCE.name} has no @@ line for {', '.join(sorted(values))}")
    return "".join(out)


def main(argv: list[str] | None = None) -> int:
    check = "--check" in (sys.argv[1:] if argv is None else argv)
    stale = []
    for name in TARGETS:
        path = HERE.parent / name
        text = path.read_text(encoding="utf-8") if path.is_file() else None
        out = generate(name)
        if out != text:
            stale.append(name)
            if not check:
                path.write_text(out, encoding="utf-8")
                print(f"updated {path}")
    if check and stale:
        print(f"out of step with {TEMPLATE_SOURCE.name}: {', '.join(stale)} (run python templates/macros/sync.py)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
