"""TypeScript-style tool declarations of Kimi-K2.5 and Kimi-K2.6 (the tokenizer's ``tools_ts_str``).

The K2.5 tokenizer (K2.6 ships the same files) does not hand the OpenAI ``tools`` list to the chat
template as JSON: its ``apply_chat_template`` first encodes the function tools as a TypeScript
namespace and passes that string to the template as ``tools_ts_str``. :func:`tools_to_typescript` reproduces that encoder byte
for byte (checked against the 20 input/output pairs of a port of the official encoder in the
reference data, ``unverified/k25_tools_ts.golden.jsonl``; see its PROVENANCE.md).

Example::

    >>> print(tools_to_typescript([{"type": "function", "function": {
    ...     "name": "get_weather", "description": "Get weather information.",
    ...     "parameters": {"type": "object", "required": ["city"], "properties": {
    ...         "city": {"type": "string", "description": "City name"},
    ...         "unit": {"enum": ["c", "f"], "default": "c"},
    ...         "days": {"type": "integer", "minimum": 1, "maximum": 7}}}}}]), end="")
    # Tools
    <BLANKLINE>
    ## functions
    namespace functions {
    // Get weather information.
    type get_weather = (_: {
      // City name
      city: string,
      // maximum: 7, minimum: 1
      days?: number,
      // Default: "c"
      unit?: "c" | "f"
    }) => any;
    }

The format, rule by rule:

* ``# Tools\\n\\n## functions\\nnamespace functions {\\n`` + one block per function tool (joined by
  ``\\n``) + ``\\n}\\n``. Tools whose ``type`` is not ``"function"`` (or with an empty ``function``) are
  skipped; with no function tool at all the result is ``""``.
* A block is: the ``interface`` declarations, the function description as ``// `` lines, then
  ``type <name> = (_: <parameters>) => any;``. Names are printed as given (no quoting).
* Descriptions become one ``// line`` per line at the current indent; an empty line stays empty.
  Empty descriptions print nothing.
* Objects: ``{`` + fields joined by ``,\\n`` + ``}``, two spaces per level, ``{}`` when empty. Required
  fields first, then optional ones (``name?:``), each group sorted by name. Before a field: its
  description, then its constraints as one sorted line (``// maximum: 10, minimum: 0``; strings:
  ``maxLength``, ``minLength``, ``pattern``; numbers: ``maximum``, ``minimum``; arrays: ``maxItems``,
  ``minItems``; values printed with Python's ``str``), then ``// Default: <value>`` (numbers and
  booleans with Python's ``repr`` -- ``False`` --, anything else as JSON with ``ensure_ascii=False``;
  a ``null`` default prints nothing).
* ``additionalProperties`` is a last field ``[k: string]: <type>`` (``true`` -> ``any``, ``false`` ->
  ``never``).
* ``integer`` is ``number``; other scalar types print their name (``string``, ``boolean``, ``null``).
* ``enum``: union of literals, strings in double quotes (not escaped), anything else with Python's
  ``str`` (``None``, ``True``, ``1.5``). With a declared ``type`` the members are checked against it.
* ``anyOf`` and ``type: [...]`` lists: ``" | "``-joined unions (in a type list ``object`` is ``{}`` and
  ``array`` is ``Array<any>``). Member descriptions and constraints are not printed.
* Arrays: ``Array<item>``; ``Array<any>`` without (or with empty) ``items``. When the item type has a
  description or constraints the array is written over several lines with the item's comments inside.
* ``$defs`` (of any object) are declared before the function as ``interface <Name> <type>`` (with the
  definition's description above) and ``{"$ref": "#/$defs/<Name>"}`` prints ``<Name>``. A
  ``{"$ref": "#"}`` in the parameters makes the parameters ``interface parameters {...}`` and the
  function ``type f = (_: parameters) => any;``.
* Boolean schemas: ``true`` and ``{}`` are ``any``; ``false`` is ``null`` with a warning.

Errors: what the official encoder rejects (unsupported ``$ref`` forms, a ``$ref`` to an undeclared
definition, an enum member that contradicts the declared type, an unknown name in a ``type`` list,
a sub-schema with none of ``$ref``/``anyOf``/``enum``/``type`` that is not ``{}``, a schema that is not
an object or a boolean, a non-string description, a malformed ``properties``/``required``/
``additionalProperties``...) raises :class:`kimi_chat.errors.ToolSchemaError`, which names the tool and
gives a JSON pointer into the tool entry. What it accepts is encoded exactly as it encodes it, even
when the schema is odd (a ``required`` string is a set of characters, an unknown scalar ``type`` string
is printed as is, a string ``enum`` is a union of its characters): the tokenizer would show the model
that text. How deep a schema may nest is the official encoder's limit: it recurses, and a schema that
exhausts Python's recursion limit makes it fail (and the tokenizer fall back to the JSON declaration);
this encoder recurses the same number of frames per level (a few hundred levels fit, from a shallow
caller), and raises :class:`ToolSchemaError` there, and for any schema nested deeper than
:data:`MAX_SCHEMA_DEPTH` levels.

Inputs are JSON values (what ``json.loads`` returns); the order of dict keys matters (properties are
sorted, but ``$defs`` are declared in their order).

Two encoders, one text: :func:`typescript_fast` writes what servers declare (typed properties, arrays,
enums, ``anyOf``, type lists, scalar defaults, string descriptions) in one pass over the schema, with no
parsed tree and no sorted copy of the tools (nothing it writes depends on key order); it leaves
everything else (``$defs``, ``$ref``, ``false`` schemas, container values, deep schemas, what the
official encoder rejects) to the parsing encoder, which reproduces the official one's errors and
recursion. :func:`tools_to_typescript` and the renderer try the first, then the second.
"""

from __future__ import annotations

import json
import reprlib
import warnings
from typing import Any, Union

from ...errors import ToolSchemaError
from .tools_ts_one_pass import _FIELD_DELIMITER, _INDENT, _UNION_TYPES, typescript_fast

__all__ = ["tools_to_typescript", "typescript_or_none", "typescript_failure", "typescript_fast", "MAX_SCHEMA_DEPTH"]

MAX_SCHEMA_DEPTH = 1000
"""Sub-schemas nested deeper than this raise :class:`ToolSchemaError` (the official encoder, recursing
several frames per level, cannot encode them under Python's default recursion limit of 1000)."""

Path = tuple  # of str | int segments
_SELF_REF = object()

_repr = reprlib.Repr()
_repr.maxstring = 60
_repr.maxother = 60
_repr.maxlevel = 3


def _short(value: Any) -> str:
    try:
        return _repr.repr(value)
    except Exception:  # pragma: no cover - a repr that fails
        return f"<{type(value).__name__}>"


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, dict):
        return "object"
    return type(value).__name__


def _pointer(path: Path) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path)


class _Ctx:
    """Per-function state: the tool's identity (for errors), its ``$defs`` and the self-ref flag."""

    def __init__(self, tool_index: int, tool_name: str | None):
        self.tool_index = tool_index
        self.tool_name = tool_name
        self.definitions: dict[str, tuple[Any, Path]] = {}
        self.has_self_ref = False
        self.warnings: list[str] = []

    def error(self, message: str, path: Path) -> ToolSchemaError:
        return ToolSchemaError(
            message, tool_name=self.tool_name, path=_pointer(path), tool_index=self.tool_index
        )

    def warn(self, message: str, path: Path) -> None:
        where = f"tools[{self.tool_index}]"
        if self.tool_name is not None:
            where += f" (function {self.tool_name!r})"
        self.warnings.append(f"{where} at {_pointer(path)!r}: {message}")

    def register(self, defs: Any, path: Path) -> None:
        if not defs:
            return
        if not isinstance(defs, dict):
            raise self.error(f"$defs must be an object, got {_json_type(defs)}", path)
        for name, schema in defs.items():
            if not isinstance(name, str):
                raise self.error(f"$defs key {name!r} is not a string", path)
            self.definitions[name] = (schema, path + (name,))

    def resolve(self, ref: Any, path: Path) -> Any:
        if ref == "#":
            self.has_self_ref = True
            return _SELF_REF
        if not isinstance(ref, str):
            raise self.error(f"$ref must be a string, got {_json_type(ref)}", path)
        if ref.startswith("#/$defs/"):
            name = ref.split("/")[-1]
            if name not in self.definitions:
                raise self.error(f"$ref {ref!r}: no definition {name!r} in $defs", path)
            return self.definitions[name]
        raise self.error(
            f"unsupported $ref {ref!r} (only '#' and '#/$defs/<name>' are supported)", path
        )

    # -- value printing, guarded so that odd values give a ToolSchemaError, never a crash --

    def pystr(self, value: Any, path: Path) -> str:
        if isinstance(value, str):
            return value
        try:
            return str(value)
        except (RecursionError, ValueError, TypeError) as exc:
            raise self.error(f"cannot print value: {exc}", path) from None

    def require_str(self, value: Any, path: Path) -> str:
        if not isinstance(value, str):
            raise self.error(f"type must be a string, got {_short(value)}", path + ("type",))
        return value

    def format_description(self, description: Any, indent: str, path: Path) -> str:
        if not isinstance(description, str):
            raise self.error(
                f"description must be a string, got {_json_type(description)}", path
            )
        return "\n".join(f"{indent}// {line}" if line else "" for line in description.split("\n"))


class _Type:
    """A parsed sub-schema. ``ts`` returns its TypeScript text (scalars may return a non-string
    ``type`` as is, like the official encoder, which then formats it with ``str``)."""

    def __init__(self, schema: dict, path: Path, ctx: _Ctx, allowed: tuple[str, ...] = ()):
        self.path = path
        self.ctx = ctx
        self.description = schema.get("description", "")
        self.constraints = {k: v for k, v in schema.items() if k in allowed}

    def docstring(self, indent: str) -> str:
        lines = []
        if self.description:
            lines.append(
                self.ctx.format_description(self.description, indent, self.path + ("description",))
            )
        if self.constraints:
            parts = [
                f"{k}: {self.ctx.pystr(v, self.path + (k,))}"
                for k, v in sorted(self.constraints.items(), key=lambda kv: kv[0])
            ]
            lines.append(f"{indent}// {', '.join(parts)}")
        return "".join(x + "\n" for x in lines)

    def ts(self, indent: str) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError


class _Scalar(_Type):
    def __init__(self, type_: Any, schema: dict | None, path: Path, ctx: _Ctx):
        self.type = type_
        allowed: tuple[str, ...] = ()
        if type_ == "string":
            allowed = ("maxLength", "minLength", "pattern")
        elif type_ in ("number", "integer"):
            allowed = ("maximum", "minimum")
        super().__init__(schema or {}, path, ctx, allowed)

    def ts(self, indent: str) -> Any:
        if self.type == "integer":
            return "number"
        return self.type


class _Object(_Type):
    def __init__(self, schema: Any, path: Path, ctx: _Ctx, depth: int):
        if not isinstance(schema, dict):
            raise ctx.error(f"an object schema must be an object, got {_json_type(schema)}", path)
        super().__init__(schema, path, ctx)
        self.properties: list[_Param] = []
        self.additional: Any = None
        if not schema:
            return
        if "$defs" in schema:
            ctx.register(schema["$defs"], path + ("$defs",))
        additional = schema.get("additionalProperties")
        if isinstance(additional, dict):
            additional = _parse(additional, path + ("additionalProperties",), ctx, depth + 1)
        self.additional = additional
        if "properties" not in schema:
            return
        props = schema["properties"]
        if not isinstance(props, dict):
            raise ctx.error(
                f"properties must be an object, got {_json_type(props)}", path + ("properties",)
            )
        required = _as_set(schema.get("required", []), ctx, path + ("required",))
        for name in props:
            if not isinstance(name, str):
                raise ctx.error(f"property name {name!r} is not a string", path + ("properties",))
        # a comprehension calling _parse, as in the official encoder: the same recursion depth per level
        self.properties = [
            _Param(name=name, type=_parse(prop, path + ("properties", name), ctx, depth + 1),
                   optional=name not in required, default=prop.get("default") if isinstance(prop, dict) else None,
                   path=path + ("properties", name))
            for name, prop in props.items()
        ]

    def ts(self, indent: str) -> str:
        required = sorted((p for p in self.properties if not p.optional), key=lambda p: p.name)
        optional = sorted((p for p in self.properties if p.optional), key=lambda p: p.name)
        fields = [p.ts(indent + _INDENT) for p in required + optional]
        if self.additional is not None:
            ap = self.additional
            apath = self.path + ("additionalProperties",)
            if ap is True:
                ap_str = "any"
            elif ap is False:
                ap_str = "never"
            elif isinstance(ap, _Type):
                ap_str = self.ctx.pystr(ap.ts(indent + _INDENT), apath)
            else:
                raise self.ctx.error(
                    f"additionalProperties must be a boolean or a schema, got {_short(ap)}", apath
                )
            fields.append(f"{indent + _INDENT}[k: string]: {ap_str}")
        if not fields:
            return "{}"
        return "{\n" + _FIELD_DELIMITER.join(fields) + "\n" + indent + "}"


class _Array(_Type):
    def __init__(self, schema: dict, path: Path, ctx: _Ctx, depth: int):
        super().__init__(schema, path, ctx, ("minItems", "maxItems"))
        items = schema.get("items")
        if items:
            self.item: _Type = _parse(items, path + ("items",), ctx, depth + 1)
        else:
            self.item = _Scalar("any", None, path, ctx)

    def ts(self, indent: str) -> str:
        doc = self.item.docstring(indent + _INDENT)
        if doc:
            item = self.ctx.require_str(self.item.ts(indent + _INDENT), self.item.path)
            return "Array<\n" + doc + indent + _INDENT + item + "\n" + indent + ">"
        return f"Array<{self.ctx.pystr(self.item.ts(indent), self.item.path)}>"


class _Enum(_Type):
    def __init__(self, schema: dict, path: Path, ctx: _Ctx):
        super().__init__(schema, path, ctx)
        self.enum = schema["enum"]
        if "type" not in schema:
            return
        typ = schema["type"]
        tpath = path + ("type",)
        if isinstance(typ, list):
            if len(typ) == 1:
                typ = typ[0]
            elif len(typ) == 2 and "null" in typ:
                typ = typ[0] if typ[0] != "null" else typ[1]
            else:
                raise ctx.error(
                    f"enum with type {_short(typ)} is not supported (one type, or one type and "
                    '"null")',
                    tpath,
                )
        checks = {
            "string": (str, "a string"),
            "number": ((int, float), "a number"),
            "integer": (int, "an integer"),
            "boolean": (bool, "a boolean"),
        }
        check = checks.get(typ) if isinstance(typ, str) else None
        for i, val in enumerate(self._members()):
            if val is None or check is None:
                continue
            if not isinstance(val, check[0]):
                raise ctx.error(
                    f"enum member {_short(val)} is not {check[1]} (declared type {typ!r})",
                    self._member_path(i),
                )

    def _members(self) -> list:
        e = self.enum
        if isinstance(e, (list, tuple, str, dict)):
            return list(e)
        raise self.ctx.error(f"enum must be an array, got {_json_type(e)}", self.path + ("enum",))

    def _member_path(self, i: int) -> Path:
        if isinstance(self.enum, (list, tuple)):
            return self.path + ("enum", i)
        return self.path + ("enum",)

    def ts(self, indent: str) -> str:
        return " | ".join(
            f'"{e}"' if isinstance(e, str) else self.ctx.pystr(e, self._member_path(i))
            for i, e in enumerate(self._members())
        )


class _AnyOf(_Type):
    def __init__(self, schema: dict, path: Path, ctx: _Ctx, depth: int):
        super().__init__(schema, path, ctx)
        members = schema["anyOf"]
        apath = path + ("anyOf",)
        if isinstance(members, (list, tuple)):
            self.types = [_parse(t, apath + (i,), ctx, depth + 1) for i, t in enumerate(members)]
        elif isinstance(members, (str, dict)) and not members:
            self.types = []  # the official encoder iterates it: nothing to encode
        else:
            raise ctx.error(f"anyOf must be an array, got {_json_type(members)}", apath)

    def ts(self, indent: str) -> str:
        return " | ".join(self.ctx.require_str(t.ts(indent), t.path) for t in self.types)


class _Union(_Type):
    def __init__(self, schema: dict, path: Path, ctx: _Ctx):
        super().__init__(schema, path, ctx)
        self.types = []
        for i, t in enumerate(schema["type"]):
            if not isinstance(t, str) or t not in _UNION_TYPES:
                raise ctx.error(
                    f"unsupported type {_short(t)} in a type list (supported: "
                    f"{', '.join(_UNION_TYPES)})",
                    path + ("type", i),
                )
            self.types.append(_UNION_TYPES[t])

    def ts(self, indent: str) -> str:
        return " | ".join(self.types)


class _Ref(_Type):
    def __init__(self, schema: dict, path: Path, ctx: _Ctx):
        super().__init__(schema, path, ctx)
        ref = schema["$ref"]
        resolved = ctx.resolve(ref, path + ("$ref",))
        if resolved is _SELF_REF:
            self.name = "parameters"
            return
        target, target_path = resolved
        if not isinstance(target, dict):
            raise ctx.error(
                f"$ref {ref!r}: the definition must be an object schema, got "
                f"{_json_type(target)}",
                target_path,
            )
        self.name = "parameters" if target.get("$self_ref", False) else ref.split("/")[-1]

    def ts(self, indent: str) -> str:
        return self.name


class _Param:
    """A field of an object: name, type, whether it is optional, its default."""

    def __init__(self, name: str, type: _Type, optional: bool, default: Any, path: Path):
        self.name = name
        self.type = type
        self.optional = optional
        self.default = default
        self.path = path

    def ts(self, indent: str) -> str:
        ctx = self.type.ctx
        comments = self.type.docstring(indent)
        if self.default is not None:
            d = self.default
            try:
                if isinstance(d, (int, float, bool)):
                    rendered = repr(d)
                else:
                    rendered = json.dumps(d, ensure_ascii=False)
            except (TypeError, ValueError, RecursionError) as exc:
                raise ctx.error(f"cannot print default: {exc}", self.path + ("default",)) from None
            comments += f"{indent}// Default: {rendered}\n"
        type_str = ctx.pystr(self.type.ts(indent), self.path)
        return f"{comments}{indent}{self.name}{'?' if self.optional else ''}: {type_str}"


def _as_set(required: Any, ctx: _Ctx, path: Path) -> set:
    """``set(required)`` as the official encoder computes it (a string is a set of characters)."""
    if isinstance(required, (str, dict)):
        return set(required)
    if isinstance(required, (list, tuple)):
        for i, r in enumerate(required):
            if isinstance(r, (list, dict)):
                raise ctx.error(
                    f"required member must be a string, got {_json_type(r)}", path + (i,)
                )
        try:
            return set(required)
        except TypeError as exc:
            raise ctx.error(f"invalid required: {exc}", path) from None
    raise ctx.error(f"required must be an array, got {_json_type(required)}", path)


def _parse(schema: Any, path: Path, ctx: _Ctx, depth: int) -> _Type:
    if depth > MAX_SCHEMA_DEPTH:
        raise ctx.error(f"schema nested deeper than {MAX_SCHEMA_DEPTH} levels", path)
    if isinstance(schema, bool):
        if schema:
            return _Scalar("any", None, path, ctx)
        ctx.warn("the boolean schema false is not supported; encoded as null", path)
        return _Scalar("null", None, path, ctx)
    if not isinstance(schema, dict):
        raise ctx.error(
            f"a schema must be an object or a boolean, got {_json_type(schema)} {_short(schema)}",
            path,
        )
    if "$ref" in schema:
        return _Ref(schema, path, ctx)
    if "anyOf" in schema:
        return _AnyOf(schema, path, ctx, depth)
    if "enum" in schema:
        return _Enum(schema, path, ctx)
    if "type" in schema:
        typ = schema["type"]
        if isinstance(typ, list):
            return _Union(schema, path, ctx)
        if typ == "object":
            return _Object(schema, path, ctx, depth)
        if typ == "array":
            return _Array(schema, path, ctx, depth)
        return _Scalar(typ, schema, path, ctx)
    if not schema:
        return _Scalar("any", None, path, ctx)
    raise ctx.error(
        "unsupported schema: it has none of $ref, anyOf, enum, type (keys: "
        f"{', '.join(map(str, list(schema)[:8]))})",
        path,
    )


def _encode_function(function: dict, ctx: _Ctx) -> str:
    path: Path = ("function", "parameters")
    parameters = function.get("parameters") or {}
    parsed = _Object(parameters, path, ctx, 0)

    interfaces = []
    root_name = None
    if ctx.has_self_ref:
        root_name = "parameters"
        fields = _FIELD_DELIMITER.join(p.ts(_INDENT) for p in parsed.properties)
        fields = f"\n{fields}\n" if fields else ""
        interfaces.append(f"interface {root_name} {{{fields}}}")

    for def_name, (def_schema, def_path) in list(ctx.definitions.items()):
        body = ctx.pystr(_parse(def_schema, def_path, ctx, 1).ts(""), def_path)
        if not isinstance(def_schema, dict):
            raise ctx.error(
                f"a definition must be an object schema, got {_json_type(def_schema)}", def_path
            )
        description = def_schema.get("description", "")
        part = ""
        if description:
            part = ctx.format_description(description, "", def_path + ("description",)) + "\n"
        interfaces.append(f"{part}interface {def_name} {body}")

    name = ctx.pystr(function.get("name", "function"), ("function", "name"))
    if root_name:
        type_def = f"type {name} = (_: {root_name}) => any;"
    else:
        type_def = f"type {name} = (_: {parsed.ts('')}) => any;"

    description = function.get("description")
    desc = description and ctx.format_description(description, "", ("function", "description"))
    return "\n".join(x for x in ("\n".join(interfaces), desc or "", type_def) if x)


def typescript_or_none(tools: Union[list[dict[str, Any]], None], warned: list[str] | None = None) -> str | None:
    """The ``tools_ts_str`` the official K2.5 / K2.6 tokenizer hands its template: :func:`tools_to_typescript`,
    or ``None`` where the official encoder fails (:class:`ToolSchemaError`): its ``apply_chat_template``
    catches any exception of the encoder and the template then declares the tools as JSON (what
    :func:`kimi_chat.render` writes; :func:`kimi_chat.lint` reports it as ``tools-not-typescript``).
    ``warned``: a list the warnings' messages are appended to (they are emitted too)."""
    try:
        return tools_to_typescript(tools, warned)
    except ToolSchemaError:
        return None


def tools_to_typescript(tools: Union[list[dict[str, Any]], None], warned: list[str] | None = None) -> str:
    """The ``tools_ts_str`` the Kimi-K2.5 and Kimi-K2.6 tokenizer computes from an OpenAI ``tools`` list.

    Returns ``""`` when there is no function tool. Raises :class:`ToolSchemaError` (naming the tool
    and a JSON pointer into its entry) for a declaration the official encoder cannot encode; emits a
    :class:`UserWarning` for each ``false`` sub-schema (encoded as ``null``; its message is appended
    to ``warned`` if given).
    """
    text, pending = _encode(tools)
    for message in pending:
        warnings.warn(message, UserWarning, stacklevel=2)
    if warned is not None:
        warned.extend(pending)
    return text


def typescript_failure(tools: Union[list[dict[str, Any]], None]) -> ToolSchemaError | None:
    """Why the official encoder cannot encode ``tools`` (the :class:`ToolSchemaError`), or ``None``
    when it can (no warnings emitted)."""
    try:
        _encode(tools)
    except ToolSchemaError as e:
        return e
    return None


def _encode(tools: Union[list[dict[str, Any]], None], one_pass: bool = True) -> tuple[str, list[str]]:
    """:func:`tools_to_typescript`'s text and the warnings it emits: the one-pass encoder's
    (:func:`typescript_fast`) where it writes the tools (``one_pass``), else the parsing encoder's (every
    input: errors with their paths, warnings; it recurses here, as deeply per level as the official one)."""
    if one_pass:
        fast = typescript_fast(tools)
        if fast is not None:
            return fast, []
    if not tools:
        return "", []
    if not isinstance(tools, (list, tuple)):
        raise ToolSchemaError(f"tools must be a list, got {_json_type(tools)}")
    blocks = []
    pending: list[str] = []
    for i, tool in enumerate(tools):
        if not isinstance(tool, dict):
            raise ToolSchemaError(
                f"a tool must be an object, got {_json_type(tool)}", tool_index=i
            )
        if tool.get("type") != "function":
            continue
        function = tool.get("function", {})
        if not function:
            continue
        if not isinstance(function, dict):
            raise ToolSchemaError(
                f"function must be an object, got {_json_type(function)}",
                path="/function",
                tool_index=i,
            )
        name = function.get("name")
        ctx = _Ctx(i, name if isinstance(name, str) else None)
        try:
            blocks.append(_encode_function(function, ctx))
        except ToolSchemaError:
            raise
        except RecursionError:
            # the official encoder recurses as deeply per level, and fails here too
            raise ctx.error("schema nested deeper than Python's recursion limit allows (the official encoder "
                            "fails too)", ("function", "parameters")) from None
        except (TypeError, ValueError, KeyError, AttributeError) as exc:
            # Safety net: every known failure is reported above with its exact path.
            raise ctx.error(
                f"unexpected {type(exc).__name__} while encoding: {exc}", ("function",)
            ) from exc
        pending.extend(ctx.warnings)
    if not blocks:
        return "", []
    return "# Tools\n\n## functions\nnamespace functions {\n" + "\n".join(blocks) + "\n}\n", pending
