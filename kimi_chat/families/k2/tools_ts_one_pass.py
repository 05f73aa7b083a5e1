"""The one-pass TypeScript encoder of K2.5/K2.6 tool declarations (:func:`typescript_fast`).

What a server declares (objects of typed properties, arrays, enums, anyOf, type lists, scalar
defaults, string descriptions) is written here in one pass over the schema, each field's text built
once, without the parsed tree of :mod:`.tools_ts`. Anything else -- $defs and $ref, a `false` schema (a warning),
a default or constraint or enum member that is a container, a value of an unexpected type, whatever
the official encoder rejects -- gives up (``_GiveUp``) and the parsing encoder (:mod:`.tools_ts`) does it all,
with its errors and warnings. Nothing this pass writes depends on the order of dict keys (properties
and constraints are sorted; what is declared in key order, $defs, and the JSON of container values are
given up): its text is the same for the tools and for their deep-sorted copy, so the K2.5 / K2.6
renderer calls it on the tools as given, without the copy the tokenizer sorts them into.
"""

from __future__ import annotations

import json
from typing import Any

# the text both encoders write (the parsing encoder in .tools_ts imports them from here)
_INDENT = "  "
_FIELD_DELIMITER = ",\n"
_UNION_TYPES = {
    "string": "string",
    "number": "number",
    "integer": "number",
    "boolean": "boolean",
    "null": "null",
    "object": "{}",
    "array": "Array<any>",
}


class _GiveUp(Exception):
    """The one-pass encoder leaves this input to the parsing one."""


_GIVE_UP = _GiveUp()
_FAST_DEPTH = 32
"""Deeper schemas are left to the parsing encoder, which fails where the official encoder runs out of stack."""
_SCALARS = (str, int, float, bool, type(None))
_STRING_CONSTRAINTS = ("maxLength", "minLength", "pattern")
_NUMBER_CONSTRAINTS = ("maximum", "minimum")
_ARRAY_CONSTRAINTS = ("maxItems", "minItems")  # sorted, as the official encoder prints them
_CONSTRAINT_KEYS = {"string": _STRING_CONSTRAINTS, "number": _NUMBER_CONSTRAINTS, "integer": _NUMBER_CONSTRAINTS}
_LEAVES = {"string": "string", "number": "number", "integer": "number", "boolean": "boolean", "null": "null"}
"""Scalar types whose schema, with no more than a ``description``, is written without a further look."""
_ENUM_CHECKS: dict[str, Any] = {"string": str, "number": (int, float), "integer": int, "boolean": bool}
_JSON_STRING = json.encoder.encode_basestring  # type: ignore[attr-defined]


def _comment(text: Any, indent: str) -> str:
    """``// `` lines of a description (``""`` for an empty one), each ending in a newline."""
    if not text:
        return ""
    if type(text) is not str:
        raise _GIVE_UP
    if "\n" not in text:
        return f"{indent}// {text}\n"
    return "\n".join(f"{indent}// {line}" if line else "" for line in text.split("\n")) + "\n"


def _constraints(schema: dict, keys: tuple[str, ...], indent: str) -> str:
    """The constraint line of ``schema`` (``keys`` in sorted order), with its newline, or ``""``."""
    parts = []
    for k in keys:
        if k in schema:
            v = schema[k]
            if type(v) not in _SCALARS:
                raise _GIVE_UP
            parts.append(f"{k}: {v}")
    return f"{indent}// {', '.join(parts)}\n" if parts else ""


def _typed(schema: Any, indent: str, depth: int) -> tuple[str, str]:
    """``(comments, type)`` of a sub-schema ``depth`` levels down: the lines written above it (its
    description, then its constraints) and its TypeScript type."""
    if type(schema) is not dict:
        if schema is True:
            return "", "any"
        raise _GIVE_UP  # false (a warning), or not a schema
    if len(schema) <= 2:  # the common leaf: a scalar type and at most a one-line description
        leaf = _LEAVES.get(schema.get("type"), None) if type(schema.get("type")) is str else None
        if leaf is not None:
            if len(schema) == 1:
                return "", leaf
            desc = schema.get("description")
            if type(desc) is str and "\n" not in desc:
                return (f"{indent}// {desc}\n" if desc else ""), leaf
    if depth > _FAST_DEPTH or "$ref" in schema:
        raise _GIVE_UP
    desc = schema.get("description")
    if not desc:
        doc = ""
    elif type(desc) is str and "\n" not in desc:
        doc = f"{indent}// {desc}\n"  # _comment's common case, inline
    else:
        doc = _comment(desc, indent)
    if "anyOf" in schema:
        members = schema["anyOf"]
        if type(members) is not list:
            raise _GIVE_UP
        return doc, " | ".join([_typed(m, indent, depth + 1)[1] for m in members])
    if "enum" in schema:
        return doc, _enum(schema)
    if "type" not in schema:
        if schema:
            raise _GIVE_UP
        return "", "any"
    typ = schema["type"]
    if type(typ) is str:
        if typ == "object":
            return doc, _object(schema, indent, depth)
        if typ == "array":
            if "minItems" in schema or "maxItems" in schema:
                doc += _constraints(schema, _ARRAY_CONSTRAINTS, indent)
            items = schema.get("items")
            if not items:
                return doc, "Array<any>"
            inner = indent + _INDENT
            item_doc, item = _typed(items, inner, depth + 1)
            if item_doc:
                return doc, f"Array<\n{item_doc}{inner}{item}\n{indent}>"
            if "\n" in item:  # written at the array's indent (only a type over several lines holds an indent)
                item = _typed(items, indent, depth + 1)[1]
            return doc, f"Array<{item}>"
        keys = _CONSTRAINT_KEYS.get(typ)
        if keys is None:
            return doc, typ
        for k in keys:
            if k in schema:
                doc += _constraints(schema, keys, indent)
                break
        return doc, "number" if typ == "integer" else typ
    if type(typ) is list:
        union = _UNION_TYPES.get
        names = [union(t) if type(t) is str else None for t in typ]
        if None in names:
            raise _GIVE_UP
        return doc, " | ".join(names)  # type: ignore[arg-type]
    raise _GIVE_UP


def _enum(schema: dict) -> str:
    members = schema["enum"]
    if type(members) is not list:
        raise _GIVE_UP
    check = None
    if "type" in schema:
        typ = schema["type"]
        if type(typ) is not str:
            raise _GIVE_UP
        check = _ENUM_CHECKS.get(typ)
    out = []
    for e in members:
        t = type(e)
        if t not in _SCALARS or (check is not None and e is not None and not isinstance(e, check)):
            raise _GIVE_UP  # a container (printed from its keys' order), or a member the official encoder refuses
        out.append(f'"{e}"' if t is str else str(e))
    return " | ".join(out)


def _object(schema: dict, indent: str, depth: int) -> str:
    """An object schema's ``{...}`` (the function's parameters whatever their ``type``)."""
    if not schema:
        return "{}"
    if "$defs" in schema:
        raise _GIVE_UP
    inner = indent + _INDENT
    fields = []
    if "properties" in schema:
        props = schema["properties"]
        if type(props) is not dict:
            raise _GIVE_UP
        names = sorted(props)
        if "required" in schema:
            required = schema["required"]
            if type(required) is not list:
                raise _GIVE_UP
            for r in required:
                if type(r) is not str:
                    raise _GIVE_UP
            if required:
                names = [n for n in names if n in required] + [n for n in names if n not in required]
        else:
            required = ()
        append = fields.append
        leaves = _LEAVES.get
        for name in names:
            if type(name) is not str:
                raise _GIVE_UP
            prop = props[name]
            mark = ": " if name in required else "?: "
            if type(prop) is dict and len(prop) <= 2:  # _typed's common leaf, inline
                typ = prop.get("type")
                leaf = leaves(typ) if type(typ) is str else None
                if leaf is not None:
                    if len(prop) == 1:
                        append(f"{inner}{name}{mark}{leaf}")
                        continue
                    desc = prop.get("description")
                    if type(desc) is str and "\n" not in desc:
                        append(f"{inner}// {desc}\n{inner}{name}{mark}{leaf}" if desc else f"{inner}{name}{mark}{leaf}")
                        continue
            doc, text = _typed(prop, inner, depth + 1)
            if type(prop) is dict and "default" in prop:
                default = prop["default"]
                t = type(default)
                if t is str:
                    doc += f"{inner}// Default: {_JSON_STRING(default)}\n"
                elif t is bool or t is int or t is float:
                    doc += f"{inner}// Default: {default!r}\n"
                elif default is not None:
                    raise _GIVE_UP
            append(f"{doc}{inner}{name}{mark}{text}")
    if "additionalProperties" in schema:
        ap = schema["additionalProperties"]
        if ap is True:
            fields.append(f"{inner}[k: string]: any")
        elif ap is False:
            fields.append(f"{inner}[k: string]: never")
        elif type(ap) is dict:
            fields.append(f"{inner}[k: string]: {_typed(ap, inner, depth + 1)[1]}")
        elif ap is not None:
            raise _GIVE_UP
    if not fields:
        return "{}"
    return "{\n" + _FIELD_DELIMITER.join(fields) + "\n" + indent + "}"


def typescript_fast(tools: Any) -> str | None:
    """:func:`~.tools_ts.tools_to_typescript` of ``tools`` in one pass, or ``None`` where it leaves the work to the
    parsing encoder (see above: ``$defs``, ``$ref``, a ``false`` schema, container defaults, odd values,
    anything the official encoder rejects, no function tool at all). The same text for ``tools`` and for
    their deep-sorted copy."""
    if type(tools) is not list:
        return None
    blocks = []
    try:
        for tool in tools:
            if type(tool) is not dict:
                return None
            if tool.get("type") != "function":
                continue
            function = tool.get("function")
            if not function:
                continue
            if type(function) is not dict:
                return None
            name = function.get("name", "function")
            parameters = function.get("parameters") or {}
            if type(name) is not str or type(parameters) is not dict:
                return None
            head = _comment(function.get("description"), "")
            blocks.append(f"{head}type {name} = (_: {_object(parameters, '', 0)}) => any;")
    except (_GiveUp, RecursionError, ValueError, TypeError):
        # ValueError: an int too long for str(); TypeError: an unhashable property name in `required`
        return None
    if not blocks:
        return None
    return "# Tools\n\n## functions\nnamespace functions {\n" + "\n".join(blocks) + "\n}\n"
