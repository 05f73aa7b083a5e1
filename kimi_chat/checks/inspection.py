"""Inspect what a model ships: a ``.gguf`` file, a model directory / ``tokenizer_config.json`` or a
``.jinja`` file. Says which chat template it carries (:func:`kimi_chat.checks.verification.identify`), the known
problems of that revision, the tokenizer facts that disagree with the official Kimi tokenizer (ids
from :mod:`kimi_chat.markers`) and the command that fixes the template.

GGUF metadata is read by a small reader of the GGUF key/value section (format as defined by the
``gguf`` package / ggml): ``gguf.GGUFReader`` parses every tensor and array element up front, which
takes ~16 s for Kimi's 163,840-entry token list; this reader takes a fraction of a second and never
touches tensor data (so it also works on the first shard of a split model).
"""

from __future__ import annotations

import json
import mmap
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from .. import markers as M
from ..dialect_records import DEFAULT_DIALECT, DIALECTS, DialectRecord as Dialect, dialect_for_model, get_dialect
from ..families import Family
from ..errors import KimiChatError
from ..templates import LLAMA_SERVER_FLAGS
from .verification import Identification, identify, own_template_path, template_sha256

__all__ = [
    "InspectError",
    "TokenizerFact",
    "Inspection",
    "GGUFArray",
    "read_gguf_metadata",
    "inspect_path",
    "load_template",
    "OFFICIAL_PRE_TOKENIZER",
]


class InspectError(KimiChatError, ValueError):
    """The path cannot be inspected (missing, not a GGUF / JSON / Jinja file, corrupt)."""


# ---------------------------------------------------------------------------------------------------
# GGUF key/value reader

_GGUF_MAGIC = b"GGUF"
# GGUFValueType (gguf.constants): 0 UINT8 1 INT8 2 UINT16 3 INT16 4 UINT32 5 INT32 6 FLOAT32 7 BOOL
# 8 STRING 9 ARRAY 10 UINT64 11 INT64 12 FLOAT64
_SCALARS = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}
_STRING, _ARRAY = 8, 9
_LOADED_ARRAYS = frozenset({"tokenizer.ggml.tokens", "tokenizer.ggml.token_type"})


@dataclass(frozen=True)
class GGUFArray:
    """An array value that was not loaded (only its element type and length)."""

    element_type: int
    count: int


class _Cursor:
    def __init__(self, buf: Any, order: str) -> None:
        self.buf = buf
        self.pos = 0
        self.order = order

    def take(self, fmt: str) -> Any:
        s = struct.Struct(self.order + fmt)
        if self.pos + s.size > len(self.buf):
            raise InspectError("truncated GGUF metadata")
        (v,) = s.unpack_from(self.buf, self.pos)
        self.pos += s.size
        return v

    def string(self) -> str:
        n = self.take("Q")
        end = self.pos + n
        if end > len(self.buf):
            raise InspectError("truncated GGUF metadata (string runs past the end of the file)")
        raw = bytes(self.buf[self.pos : end])
        self.pos = end
        return raw.decode("utf-8", errors="replace")

    def skip_string(self) -> None:
        n = self.take("Q")
        self.pos += n

    def value(self, vtype: int, key: str) -> Any:
        if vtype in _SCALARS:
            return self.take(_SCALARS[vtype])
        if vtype == _STRING:
            return self.string()
        if vtype == _ARRAY:
            etype = self.take("I")
            count = self.take("Q")
            if key in _LOADED_ARRAYS:
                if etype == _STRING:
                    return [self.string() for _ in range(count)]
                if etype in _SCALARS:
                    s = struct.Struct(f"{self.order}{count}{_SCALARS[etype]}")
                    if self.pos + s.size > len(self.buf):
                        raise InspectError("truncated GGUF metadata")
                    out = list(s.unpack_from(self.buf, self.pos))
                    self.pos += s.size
                    return out
            # not needed: skip it
            if etype in _SCALARS:
                self.pos += count * struct.calcsize(_SCALARS[etype])
            elif etype == _STRING:
                for _ in range(count):
                    self.skip_string()
            else:
                for _ in range(count):
                    self.value(etype, "")
            return GGUFArray(etype, count)
        raise InspectError(f"unknown GGUF value type {vtype} (key {key!r})")


def read_gguf_metadata(path: str | Path) -> dict[str, Any]:
    """The key/value metadata of a GGUF file (v2 or v3, either byte order). The token list
    (``tokenizer.ggml.tokens``) and token types are loaded; other arrays are :class:`GGUFArray`.
    ``GGUF.version`` and ``GGUF.tensor_count`` are added as keys."""
    p = Path(path)
    try:
        with open(p, "rb") as f:
            if f.read(4) != _GGUF_MAGIC:
                raise InspectError(f"{p}: not a GGUF file (no GGUF magic)")
            f.seek(0)
            with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
                try:
                    return _parse(buf)
                except InspectError as e:
                    raise InspectError(f"{p}: {e}") from e
                except (struct.error, ValueError, OverflowError, MemoryError) as e:
                    raise InspectError(f"{p}: corrupt GGUF metadata ({e})") from e
    except OSError as e:
        raise InspectError(f"{p}: cannot read: {e.strerror or e}") from e


def _parse(buf: Any) -> dict[str, Any]:
    if len(buf) < 24:
        raise InspectError("truncated GGUF header")
    (raw_version,) = struct.unpack_from("<I", buf, 4)
    order = ">" if raw_version & 0xFFFF == 0 else "<"
    c = _Cursor(buf, order)
    c.pos = 4
    version = c.take("I")
    if version < 2:
        raise InspectError(f"GGUF version {version} is not supported (v2 and v3 are)")
    tensor_count = c.take("Q")
    kv_count = c.take("Q")
    out: dict[str, Any] = {"GGUF.version": version, "GGUF.tensor_count": tensor_count}
    for _ in range(kv_count):
        key = c.string()
        vtype = c.take("I")
        out[key] = c.value(vtype, key)
    return out


# ---------------------------------------------------------------------------------------------------
# facts


OFFICIAL_PRE_TOKENIZER = "kimi-k2"
"""llama.cpp's name for the Kimi-K2 pre-tokenizer (its regex = the official ``pat_str``)."""

_TOKEN_TYPE = {1: "normal", 2: "unknown", 3: "control", 4: "user-defined", 5: "unused", 6: "byte"}


@dataclass(frozen=True)
class TokenizerFact:
    """A tokenizer fact of the inspected model, compared with the official tokenizer."""

    name: str
    value: Any
    official: Any
    ok: bool
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The fact as plain JSON data."""
        return {"name": self.name, "value": self.value, "official": self.official, "ok": self.ok, "note": self.note}


def _record(dialect: str | None) -> Dialect:
    """The dialect named ``dialect`` (a canonical name); the default dialect for ``None`` or another name."""
    d = DIALECTS.get(dialect) if dialect is not None else None
    return d if d is not None else get_dialect(DEFAULT_DIALECT)


def _family(dialect: str | None) -> Family:
    return _record(dialect).family_parts


def _markers_for(dialect: str | None) -> tuple[M.Marker, ...]:
    d = _record(dialect)
    return d.family_parts.markers.inspected(d)


def _turn_end(dialect: str | None) -> M.Marker:
    """The marker that ends the model's turn (its family's: ``<|im_end|>`` for K2, ``<|end_of_msg|>`` for K3)."""
    return _family(dialect).markers.turn_end


def _gguf_facts(meta: dict[str, Any], dialect: str | None) -> list[TokenizerFact]:
    facts: list[TokenizerFact] = []
    model = meta.get("tokenizer.ggml.model")
    facts.append(TokenizerFact("tokenizer.ggml.model", model, "gpt2", model == "gpt2",
                               "" if model == "gpt2" else "Kimi's tokenizer is byte-level BPE (tiktoken)"))
    pre = meta.get("tokenizer.ggml.pre")
    facts.append(TokenizerFact(
        "tokenizer.ggml.pre", pre, OFFICIAL_PRE_TOKENIZER, pre == OFFICIAL_PRE_TOKENIZER,
        "" if pre == OFFICIAL_PRE_TOKENIZER else
        "another pre-tokenizer splits text differently from the official pat_str: prompts tokenize "
        "into other ids than the model was trained on",
    ))
    tokens = meta.get("tokenizer.ggml.tokens")
    types = meta.get("tokenizer.ggml.token_type")
    markers = _markers_for(dialect)
    top = max(m.id for m in markers if m.id is not None)
    if not isinstance(tokens, list):
        facts.append(TokenizerFact("vocab size", None, f"> {top}", False, "no token list in the metadata"))
        tokens = []
    else:
        n = len(tokens)
        facts.append(TokenizerFact(
            "vocab size", n, f"> {top} (every official marker id)", n > top,
            "" if n > top else "some official marker ids are out of range",
        ))
    wrong = []
    for m in markers:
        assert m.id is not None
        have = tokens[m.id] if m.id < len(tokens) else None
        if have != m.text:
            wrong.append(f"{m.id}: {have!r} (official {m.text!r})")
    facts.append(TokenizerFact(
        "marker tokens", "all at their official ids" if not wrong else wrong,
        f"{len(markers)} markers at their official ids", not wrong,
        "" if not wrong else "markers at other ids are not the tokens the model was trained on",
    ))
    if isinstance(types, list) and tokens:
        plain = [f"{m.text} ({_TOKEN_TYPE.get(types[m.id], types[m.id])})" for m in markers
                 if m.id is not None and m.id < len(types) and m.id < len(tokens) and tokens[m.id] == m.text
                 and types[m.id] not in (3, 4)]
        facts.append(TokenizerFact(
            "marker token types", "control or user-defined" if not plain else plain, "control or user-defined",
            not plain, "" if not plain else "llama.cpp tokenizes markers of other types as plain text",
        ))
    bos = meta.get("tokenizer.ggml.bos_token_id")
    facts.append(TokenizerFact("bos token id", bos, M.BOS.id, bos in (None, M.BOS.id),
                               "" if bos in (None, M.BOS.id) else f"official bos is {M.BOS.text} {M.BOS.id}"))
    eog = {k: meta.get(f"tokenizer.ggml.{k}_token_id") for k in ("eos", "eot", "eom")}
    end = _turn_end(dialect)
    im_end_eog = end.id in eog.values()
    shown = ", ".join(f"{k} {v}" for k, v in eog.items() if v is not None) or "none set"
    facts.append(TokenizerFact(
        f"{end.text} is end-of-generation", im_end_eog,
        f"True ({end.text} {end.id} ends every assistant turn)", im_end_eog,
        f"eos/eot/eom ids: {shown}" + ("" if im_end_eog else
        f"; llama.cpp also recognises {end.text} by its name, runtimes that read only these ids "
        "run past the end of the turn"),
    ))
    add_bos = meta.get("tokenizer.ggml.add_bos_token")
    if add_bos is not None:
        facts.append(TokenizerFact(
            "tokenizer.ggml.add_bos_token", bool(add_bos), False, not add_bos,
            "" if not add_bos else f"the runtime prepends {M.BOS.text}; the official prompt has none",
        ))
    return facts


def _config_facts(config: dict[str, Any], dialect: str | None) -> list[TokenizerFact]:
    facts: list[TokenizerFact] = []
    decoder = config.get("added_tokens_decoder")
    if isinstance(decoder, dict):
        wrong = []
        for m in _markers_for(dialect):
            entry = decoder.get(str(m.id))
            content = entry.get("content") if isinstance(entry, dict) else None
            if content != m.text:
                wrong.append(f"{m.id}: {content!r} (official {m.text!r})")
            elif isinstance(entry, dict) and entry.get("special") is not None and bool(entry["special"]) != m.special:
                wrong.append(f"{m.id} {m.text}: special={entry['special']} (official {m.special})")
        facts.append(TokenizerFact(
            "added_tokens_decoder", "all markers as official" if not wrong else wrong,
            "every marker at its official id and special flag", not wrong,
        ))
    for key, official in (("bos_token", M.BOS.text), ("eos_token", M.EOS.text)):
        if key in config:
            v = config[key]
            v = v.get("content") if isinstance(v, dict) else v
            facts.append(TokenizerFact(key, v, official, v == official,
                                       "" if v == official else "differs from the official tokenizer_config.json"))
    return facts


# ---------------------------------------------------------------------------------------------------
# inspection


Kind = Literal["gguf", "tokenizer_config", "jinja"]


@dataclass
class Inspection:
    """What :func:`inspect_path` found."""

    path: str
    kind: Kind
    template_source: str | None
    """Where the chat template came from (``tokenizer.chat_template``, ``chat_template.jinja``, ...)."""
    template_sha256: str | None
    identification: Identification | None
    facts: list[TokenizerFact] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    metadata: dict[str, Any] = field(default_factory=dict)
    """A few raw metadata values (GGUF version, architecture, model name)."""

    @property
    def disagreements(self) -> list[TokenizerFact]:
        """Tokenizer facts that disagree with the official tokenizer."""
        return [f for f in self.facts if not f.ok]

    @property
    def fix_dialect(self) -> str | None:
        """The dialect the template should be: the one the model's name says when it names another
        model line than the template's, else the identified one (``None`` when neither is known)."""
        ident = self.identification
        named = self.named_dialect
        if named is not None and (ident is None or ident.dialect is None or _line(ident.dialect) != _line(named)):
            return named
        return ident.dialect if ident is not None else None

    @property
    def named_dialect(self) -> str | None:
        """The dialect the model's name (GGUF ``general.name`` / directory) points to, if any."""
        return _dialect_from_name(self.metadata.get("name") or "")

    @property
    def fix_template(self) -> str | None:
        """The installed template of :attr:`fix_dialect` (:func:`kimi_chat.templates.template_path`, an absolute
        path: what a command run from any directory finds; ``templates/<dialect>.jinja`` if the file is
        missing), ``None`` for Kimi-K3 (no template)."""
        d = self.fix_dialect
        if d is None or not _family(d).official.jinja_templates:
            return None
        own = own_template_path(d)
        return str(own) if own is not None else f"templates/{d}.jinja"

    @property
    def needs_fix(self) -> bool:
        """The template is not the official (or our) text of a dialect nor renders like one, or it is
        another model line's template than the model's name says."""
        ident = self.identification
        if ident is None or ident.kind not in ("official", "ours", "equivalent"):
            return True
        return self.fix_dialect != ident.dialect

    @property
    def fix_hint(self) -> str | None:
        """What to do: :attr:`fix_command`, or for Kimi-K3 (no template to use instead) how to render
        its prompts exactly (its family's ``fix_hint``)."""
        d = self.fix_dialect
        hint = _family(d).checks.fix_hint if d is not None else None
        return hint if hint is not None else self.fix_command

    @property
    def fix_command(self) -> str | None:
        """The command (flags) that makes a server render the dialect exactly (``None`` for Kimi-K3,
        which has no template: see :attr:`fix_hint`)."""
        t = self.fix_template
        if t is None:
            return None
        if self.kind == "gguf":
            jinja, *rest = LLAMA_SERVER_FLAGS
            return f"llama-server -m {self.path} {jinja} --chat-template-file {t} {' '.join(rest)}"
        return f"--chat-template-file {t} (llama.cpp; vLLM / SGLang: --chat-template {t})"

    def to_dict(self) -> dict[str, Any]:
        """The inspection as plain JSON data (what ``kimi-chat inspect --json`` prints)."""
        d = self.fix_template
        own = own_template_path(self.identification.dialect) if self.identification and self.identification.dialect else None
        return {
            "path": self.path,
            "kind": self.kind,
            "metadata": self.metadata,
            "template_source": self.template_source,
            "template_sha256": self.template_sha256,
            "identification": self.identification.to_dict() if self.identification else None,
            "tokenizer": [f.to_dict() for f in self.facts],
            "disagreements": [f.name for f in self.disagreements],
            "needs_fix": self.needs_fix,
            "fix_template": d,
            "fix_template_path": str(own) if own else None,
            "fix_command": self.fix_command,
            "fix_hint": self.fix_hint,
            "notes": self.notes,
        }

    def format_text(self, *, max_differences: int = 5) -> str:
        """The human report ``kimi-chat inspect`` prints."""
        lines = [f"path:      {self.path} ({self.kind})"]
        for k, v in self.metadata.items():
            lines.append(f"{k + ':':<10} {v}")
        named = self.named_dialect
        ident0 = self.identification
        if named is not None and ident0 is not None and ident0.dialect is not None and _line(named) != _line(ident0.dialect):
            lines.append(f"mismatch:  the model's name says {named}, its template is {ident0.dialect}")
        ident = self.identification
        if self.template_source is None or ident is None:
            lines.append("template:  none found")
        else:
            lines.append(f"template:  {self.template_source} (sha256 of the LF-normalised text {self.template_sha256[:16] if self.template_sha256 else '?'}…)")
            if ident.dialect is not None:
                status = ident.status.value if ident.status is not None else "?"
                lines.append(f"dialect:   {ident.dialect} [{status}] — {ident.label}")
                lines.append(f"           {ident.description} ({ident.match} match, confidence {ident.confidence:.2f})")
                lines.append(f"           {get_dialect(ident.dialect).summary}")
            else:
                lines.append(f"dialect:   unknown — {ident.description}")
            if ident.renders_in_sandbox is False:
                lines.append("           fails in transformers' sandbox (SecurityError); rendered in a lenient sandbox to compare")
            if ident.problems:
                lines.append("known problems:")
                for p in ident.problems:
                    lines.append(f"  - [{p.severity}] {p.title}: {p.detail}")
            if ident.differences:
                lines.append(f"differences found ({len(ident.differences)} probes):")
                for diff in ident.differences[:max_differences]:
                    lines.append(f"  - {diff.summary}")
                if len(ident.differences) > max_differences:
                    lines.append(f"  … {len(ident.differences) - max_differences} more (--json for all)")
            for n in ident.notes:
                lines.append(f"note: {n}")
        if self.facts:
            bad = self.disagreements
            lines.append("tokenizer:" + ("" if bad else " agrees with the official tokenizer"))
            for f in self.facts:
                mark = "ok  " if f.ok else "DIFF"
                value = f.value if not isinstance(f.value, list) else "; ".join(map(str, f.value))
                line = f"  {mark} {f.name}: {value}"
                if not f.ok:
                    line += f" (official: {f.official})"
                lines.append(line)
                if f.note and not f.ok:
                    lines.append(f"       {f.note}")
        for n in self.notes:
            lines.append(f"note: {n}")
        cmd = self.fix_command
        if cmd is None and self.fix_hint is not None:
            lines.append(f"fix:       {self.fix_hint}")
        if cmd is not None:
            if self.needs_fix:
                lines.append(f"fix:       {cmd}")
            else:
                assert ident is not None
                lines.append(f"use:       {cmd}")
                lines.append(f"           (the template: {ident.label}; ours renders the official bytes in any "
                             "Jinja runtime, with the official tokenizer's pre-processing built in)")
        return "\n".join(lines)


_LINES = {
    "kimi-k2-instruct@rev1": "kimi-k2-instruct",
    "kimi-k2-instruct@rev2": "kimi-k2-instruct",
}


def _line(dialect: str) -> str:
    """The model line of a dialect (the revisions of one model's template share it)."""
    return _LINES.get(dialect, dialect)


def _dialect_from_name(name: str) -> str | None:
    return dialect_for_model(name)


def _ident(text: str | None) -> tuple[Identification | None, str | None]:
    if text is None:
        return None, None
    return identify(text), template_sha256(text)


def _inspect_gguf(p: Path) -> Inspection:
    meta = read_gguf_metadata(p)
    template = meta.get("tokenizer.chat_template")
    template = template if isinstance(template, str) else None
    ident, digest = _ident(template)
    info = {"gguf": f"v{meta['GGUF.version']}, {meta['GGUF.tensor_count']} tensors"}
    for key, label in (("general.architecture", "arch"), ("general.name", "name")):
        if isinstance(meta.get(key), str):
            info[label] = meta[key]
    ins = Inspection(str(p), "gguf", "tokenizer.chat_template" if template is not None else None, digest, ident,
                     _gguf_facts(meta, ident.dialect if ident else None), metadata=info)
    named = sorted(k[len("tokenizer.chat_template."):] for k in meta if k.startswith("tokenizer.chat_template."))
    if named:
        ins.notes.append(f"named templates also present: {', '.join(named)} (not inspected)")
    if template is None:
        split = meta.get("split.no")
        ins.notes.append("no tokenizer.chat_template in this file" + (
            f" (split shard {split}: inspect the first shard)" if isinstance(split, int) and split > 0 else ""))
    return ins


def _read_json(p: Path) -> dict[str, Any]:
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except OSError as e:
        raise InspectError(f"{p}: cannot read: {e.strerror or e}") from e
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise InspectError(f"{p}: not valid JSON ({e})") from e
    if not isinstance(data, dict):
        raise InspectError(f"{p}: expected a JSON object")
    return data


def _config_template(config: dict[str, Any]) -> str | None:
    t = config.get("chat_template")
    if isinstance(t, str):
        return t
    if isinstance(t, list):  # [{"name": "default", "template": "..."}, ...]
        for entry in t:
            if isinstance(entry, dict) and entry.get("name") == "default" and isinstance(entry.get("template"), str):
                return str(entry["template"])
    return None


def _inspect_config(config_path: Path | None, jinja_path: Path | None, shown: Path) -> Inspection:
    config = _read_json(config_path) if config_path is not None else {}
    notes: list[str] = []
    template: str | None = None
    source: str | None = None
    if jinja_path is not None:
        try:
            template = jinja_path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise InspectError(f"{jinja_path}: cannot read: {e}") from e
        source = jinja_path.name
        if _config_template(config) is not None:
            notes.append(f"tokenizer_config.json also has a chat_template; {jinja_path.name} takes precedence "
                         "(as in transformers)")
    elif config_path is not None:
        template = _config_template(config)
        source = "tokenizer_config.json chat_template" if template is not None else None
    ident, digest = _ident(template)
    facts = _config_facts(config, ident.dialect if ident else None) if config_path is not None else []
    if template is None:
        notes.append("no chat template found")
    return Inspection(str(shown), "tokenizer_config", source, digest, ident, facts, notes)


def load_template(path: str | Path) -> tuple[str, str]:
    """The chat template carried by ``path`` (anything :func:`inspect_path` takes) and where in it
    it was found. Raises :class:`InspectError` when there is none."""
    p = Path(path)
    if p.is_file():
        try:
            with open(p, "rb") as f:
                head = f.read(4)
        except OSError as e:
            raise InspectError(f"{p}: cannot read: {e.strerror or e}") from e
        if head != _GGUF_MAGIC and p.suffix != ".json":
            try:
                return p.read_text(encoding="utf-8"), p.name
            except UnicodeDecodeError as e:
                raise InspectError(f"{p}: not a GGUF file, JSON or a UTF-8 Jinja template") from e
    if p.is_file() and p.suffix != ".json":
        meta = read_gguf_metadata(p)
        t = meta.get("tokenizer.chat_template")
        if isinstance(t, str):
            return t, "tokenizer.chat_template"
        raise InspectError(f"{p}: no tokenizer.chat_template in this GGUF file")
    base = p if p.is_dir() else p.parent
    jinja = base / "chat_template.jinja"
    if jinja.is_file():
        return jinja.read_text(encoding="utf-8"), str(jinja)
    config = p if p.is_file() else base / "tokenizer_config.json"
    if config.is_file():
        t = _config_template(_read_json(config))
        if t is not None:
            return t, f"{config} chat_template"
    if p.is_dir():
        ggufs = sorted(p.glob("*.gguf"))
        if ggufs:
            return load_template(ggufs[0])
    if not p.exists():
        raise InspectError(f"{p}: no such file or directory")
    raise InspectError(f"{p}: no chat template found")


def inspect_path(path: str | Path) -> Inspection:
    """Inspect a ``.gguf`` file, a model directory, a ``tokenizer_config.json`` or a ``.jinja`` file.

    Raises :class:`InspectError` when the path is missing or unreadable.
    """
    p = Path(path)
    if not p.exists():
        raise InspectError(f"{p}: no such file or directory")
    if p.is_dir():
        config = p / "tokenizer_config.json"
        jinja = p / "chat_template.jinja"
        if config.is_file() or jinja.is_file():
            return _inspect_config(config if config.is_file() else None, jinja if jinja.is_file() else None, p)
        ggufs = sorted(p.glob("*.gguf"))
        if ggufs:
            ins = _inspect_gguf(ggufs[0])
            if len(ggufs) > 1:
                ins.notes.append(f"{len(ggufs)} .gguf files in {p}; inspected {ggufs[0].name}")
            return ins
        raise InspectError(f"{p}: no tokenizer_config.json, chat_template.jinja or .gguf file in this directory")
    try:
        with open(p, "rb") as f:
            head = f.read(4)
    except OSError as e:
        raise InspectError(f"{p}: cannot read: {e.strerror or e}") from e
    if head == _GGUF_MAGIC:
        return _inspect_gguf(p)
    if p.suffix == ".json":
        jinja = p.parent / "chat_template.jinja"
        return _inspect_config(p, jinja if jinja.is_file() else None, p)
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise InspectError(f"{p}: not a GGUF file, JSON or a UTF-8 Jinja template") from e
    ident, digest = _ident(text)
    return Inspection(str(p), "jinja", p.name, digest, ident)
