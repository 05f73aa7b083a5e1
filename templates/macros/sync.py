"""Copy the tools_ts macro block (templates/macros/tools_ts.jinja) into the templates that use it.

Transformers renders a chat template from a string (no loader, so no ``{% include %}``): the block is
pasted into each template between its BEGIN/END comments. Run ``python templates/macros/sync.py``
after editing the block; ``tests/test_templates_tools_ts.py`` fails while a template is out of step.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "tools_ts.jinja"
TARGETS = ("kimi-k2.5.jinja", "kimi-k2.6.jinja")
BEGIN = "{#- BEGIN tools_ts macros"
END = "{#- END tools_ts macros -#}\n"
ANCHOR = "{%- macro render_content(content) -%}"


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


def main() -> int:
    for name in TARGETS:
        path = HERE.parent / name
        text = path.read_text(encoding="utf-8")
        out = synced(text)
        if out != text:
            path.write_text(out, encoding="utf-8")
            print(f"updated {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
