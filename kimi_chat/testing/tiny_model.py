"""A tiny, randomly initialised Kimi-architecture model as a GGUF file, built on the fly.

Kimi-K2 runs on llama.cpp (and ik_llama.cpp) as the DeepSeek-V3 architecture (``deepseek2``): MLA
attention, routed + shared experts with sigmoid gating, the 163,840-id Kimi vocabulary and the
``kimi-k2`` pre-tokenizer. :func:`build_tiny_model` writes the same architecture at toy size so the
real engines can load it, tokenize with the real vocabulary and generate (noise) from it:

* hidden 64, 2 layers (the first dense, the second MoE), 4 heads (``head_count_kv == head_count``),
  q/kv low rank 32, head dims 16 (no-rope key part, rope part, value), 4 routed experts (2 active)
  + 1 shared expert, sigmoid gating with ``exp_probs_b``, ``expert_weights_scale``;
* the older MLA layout (one ``attn_kv_b`` tensor per layer, no ``key_length_mla``), ``output.weight``
  and the q low-rank tensors, which both llama.cpp and ik_llama.cpp load;
* the vocabulary of ``tiktoken.model`` + ``tokenizer_config.json`` as llama.cpp's converter writes it
  (``convert_hf_to_gguf.py``, DeepseekV2 with a ``TikTokenTokenizer``): byte-level token strings, BPE
  merges derived from the tiktoken ranks, the special ids as CONTROL tokens named after the config
  (``<|reserved_token_N|>`` otherwise), ``tokenizer.ggml.pre = "kimi-k2"``, vocab padded to 163,840;
* ``tokenizer.chat_template`` = kimi_chat's own template for a dialect (``templates/<dialect>.jinja``).

For a Kimi-K3 dialect (``dialect="kimi-k3"``) the same base vocabulary carries K3's 256 special ids
(:meth:`KimiTokenizer.from_reference("k3") <kimi_chat.tokens.tokenizer.KimiTokenizer.from_reference>`:
``<|end_of_msg|>`` 163586, ``<|open|>`` 163587, ``<|close|>`` 163588, ``<|sep|>`` 163589, the others
``<|reserved_token_N|>``), the end of generation is ``<|end_of_msg|>`` (the GGUF's eos, as K3's
``config.json`` has it) and no chat template is embedded (K3 has none: its official tokenizer renders in
Python; :class:`~kimi_chat.engines.native.NativeModel` recognises the K3 vocabulary instead).

About 49 MB (the embedding and output matrices in F16), written in a few seconds. Needs the ``gguf``
and ``numpy`` packages (``bash .ci/install-native.sh .venv`` in the checkout) and the reference tokenizer files
(:func:`kimi_chat.reference.reference_dir`, or explicit paths). Nothing is downloaded.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..dialect_records import DEFAULT_DIALECT, get_dialect
from ..errors import KimiChatError, ReferenceDataError
from ..tokens.tokenizer import BYTE_ENCODER, KimiTokenizer

__all__ = ["TinyConfig", "build_tiny_model", "bpe_merges", "token_strings", "TINY_VOCAB_SIZE"]

TINY_VOCAB_SIZE = 163_840
"""``vocab_size`` of the Kimi-K2 ``config.json``: 163,584 BPE ranks + 256 special ids (the two extra
ids 163840/163841 that ``tokenization_kimi.py`` numbers are outside the model's embedding)."""


@dataclass(frozen=True)
class TinyConfig:
    """Sizes of the tiny model. The defaults keep the Kimi-K2 architecture (deepseek2: MLA, dense then MoE
    layers, shared experts) and its real vocabulary at the smallest sizes."""

    hidden: int = 64
    layers: int = 2
    dense_layers: int = 1
    heads: int = 4
    q_lora_rank: int = 32
    kv_lora_rank: int = 32
    qk_nope_dim: int = 16
    qk_rope_dim: int = 16
    v_dim: int = 16
    ffn: int = 128
    expert_ffn: int = 32
    experts: int = 4
    experts_used: int = 2
    shared_experts: int = 1
    context: int = 4096
    rope_theta: float = 50000.0
    expert_weights_scale: float = 2.827
    init_std: float = 0.5




def _tok_str(b: bytes) -> str:
    return "".join(BYTE_ENCODER[x] for x in b)


def bpe_merges(ranks: Mapping[bytes, int]) -> list[str]:
    """The BPE merges of a tiktoken rank table, in rank order, as llama.cpp's converter derives them
    (``QwenModel.bpe(ranks, token, max_rank=rank)``: the two parts a token is merged from, using only
    lower ranks), written as byte-level strings ``"A B"``."""
    out: list[str] = []
    get = ranks.get
    for token, rank in sorted(ranks.items(), key=lambda kv: kv[1]):
        if len(token) == 1:
            continue
        parts = [token[i : i + 1] for i in range(len(token))]
        while len(parts) > 2:
            best = None
            best_rank = rank
            for i in range(len(parts) - 1):
                r = get(parts[i] + parts[i + 1])
                if r is not None and r < best_rank:
                    best, best_rank = i, r
            if best is None:
                break
            parts[best : best + 2] = [parts[best] + parts[best + 1]]
        if len(parts) == 2 and (r2 := get(parts[0] + parts[1])) is not None and r2 <= rank:
            out.append(_tok_str(parts[0]) + " " + _tok_str(parts[1]))
    return out


def token_strings(tok: KimiTokenizer, vocab_size: int = TINY_VOCAB_SIZE) -> tuple[list[str], list[int]]:
    """Token strings and GGUF token types for ids ``0..vocab_size-1``: byte-level strings for the
    BPE ranks (NORMAL), special-token names for the special ids (CONTROL), ``[PAD{i}]`` (UNUSED) for
    ids that are neither."""
    import gguf

    tokens = [f"[PAD{i}]" for i in range(vocab_size)]
    types = [int(gguf.TokenType.UNUSED)] * vocab_size
    for b, i in tok.mergeable_ranks.items():
        if i < vocab_size:
            tokens[i] = _tok_str(b)
            types[i] = int(gguf.TokenType.NORMAL)
    for name, i in tok.special_tokens.items():
        if i < vocab_size:
            tokens[i] = name
            types[i] = int(gguf.TokenType.CONTROL)
    return tokens, types


def _chat_template(dialect: str) -> str:
    try:
        from ..templates import template_text

        return template_text(dialect)
    except (ImportError, FileNotFoundError):
        from ..reference.oracle import oracle_template

        return oracle_template(dialect)


def build_tiny_model(
    path: str | os.PathLike[str],
    *,
    dialect: str = DEFAULT_DIALECT,
    tokenizer: KimiTokenizer | None = None,
    chat_template: str | None = None,
    config: TinyConfig = TinyConfig(),
    seed: int = 0,
    terse: bool = False,
    progress: Callable[[str], None] | None = None,
) -> Path:
    """Write the tiny deepseek2 GGUF to ``path`` and return it.

    ``tokenizer`` defaults to the reference tokenizer of the dialect
    (:meth:`KimiTokenizer.from_reference` of its family's ``reference_tokenizer``: the K2.6 config for a
    reasoning dialect, whose ``<think>`` / ``</think>`` are special ids, the July-2025 one for the instruct
    dialects, ``"k3"`` for a K3 dialect), so the model has every marker its dialect writes;
    ``chat_template`` to kimi_chat's template for ``dialect`` (none for K3, which
    has no Jinja template; the end of generation is then ``<|end_of_msg|>``). The weights are random (normal,
    ``config.init_std``) from ``seed``, so the model's output is noise, but it is the same noise for
    the same seed. ``terse``: a bias built into the weights makes its turns end (short replies, constrained
    calls that complete: :mod:`kimi_chat.testing.terse`). ``progress`` receives a line per step (the
    vocabulary, the merges, the weights, the file).
    """
    say = progress or (lambda _line: None)
    try:
        import gguf
        import numpy as np
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise KimiChatError(
            f"building the tiny model needs the 'gguf' and 'numpy' packages ({e.name} is missing): "
            "pip install -e '.[native]' (run in the kimi_chat checkout)"
        ) from e
    d = get_dialect(dialect)
    family = d.family_parts
    if tokenizer is None:  # the dialect's own: a reasoning dialect's <think> / </think> are special ids
        say(f"reading the {family.tokens.reference_tokenizer(d)} tokenizer ...")
        tokenizer = KimiTokenizer.from_reference(family.tokens.reference_tokenizer(d))
    if chat_template is None and family.official.jinja_templates:
        chat_template = _chat_template(d.name)
    eos_id = tokenizer.eos_id
    if not family.official.jinja_templates:  # no template to say where a turn ends: generation ends at the turn's end
        end = family.markers.turn_end.text
        eos_id = tokenizer.special_tokens.get(end)
        if eos_id is None:
            raise KimiChatError(f"dialect {d.name}: the tokenizer has no {end} token "
                                f"(use KimiTokenizer.from_reference({family.tokens.base_tokenizer!r}))")
    if tokenizer.num_base_tokens > TINY_VOCAB_SIZE:
        raise ReferenceDataError(f"{tokenizer.model_path}: more BPE ranks than the model vocabulary")
    c = config
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)

    rng = np.random.default_rng(seed)

    def w(*shape: int, dtype: Any = np.float16) -> Any:
        return (rng.standard_normal(shape, dtype=np.float32) * c.init_std / np.sqrt(shape[-1]) * 4).astype(dtype)

    def ones(n: int) -> Any:
        return np.ones(n, dtype=np.float32)

    arch = "deepseek2"
    tmp = path.with_name(path.name + ".part")
    writer = gguf.GGUFWriter(str(tmp), arch)
    put = writer.add_tensor
    if terse:
        from .terse import terse_shaping

        shape = terse_shaping(tokenizer, d)
        put = lambda name, a: writer.add_tensor(name, shape(name, a))  # noqa: E731
    try:
        writer.add_name(f"kimi-chat tiny {family.title} ({'terse' if terse else 'random'} weights)")
        writer.add_context_length(c.context)
        writer.add_embedding_length(c.hidden)
        writer.add_block_count(c.layers)
        writer.add_feed_forward_length(c.ffn)
        writer.add_head_count(c.heads)
        writer.add_head_count_kv(c.heads)
        writer.add_rope_freq_base(c.rope_theta)
        writer.add_layer_norm_rms_eps(1e-6)
        writer.add_expert_used_count(c.experts_used)
        writer.add_expert_count(c.experts)
        writer.add_leading_dense_block_count(c.dense_layers)
        writer.add_vocab_size(TINY_VOCAB_SIZE)
        writer.add_q_lora_rank(c.q_lora_rank)
        writer.add_kv_lora_rank(c.kv_lora_rank)
        writer.add_key_length(c.qk_nope_dim + c.qk_rope_dim)
        writer.add_value_length(c.v_dim)
        writer.add_expert_feed_forward_length(c.expert_ffn)
        writer.add_expert_shared_count(c.shared_experts)
        writer.add_expert_weights_scale(c.expert_weights_scale)
        writer.add_expert_weights_norm(True)
        writer.add_expert_gating_func(gguf.ExpertGatingFuncType.SIGMOID)
        writer.add_rope_dimension_count(c.qk_rope_dim)

        say(f"writing the vocabulary ({TINY_VOCAB_SIZE} tokens) and its BPE merges ...")
        tokens, types = token_strings(tokenizer)
        writer.add_tokenizer_model("gpt2")
        writer.add_tokenizer_pre("kimi-k2")
        writer.add_token_list(tokens)
        writer.add_token_types(types)
        writer.add_token_merges(bpe_merges(tokenizer.mergeable_ranks))
        for key, tid in (("bos", tokenizer.bos_id), ("eos", eos_id), ("unk", tokenizer.unk_id),
                         ("pad", tokenizer.pad_id)):
            if tid is not None:
                getattr(writer, f"add_{key}_token_id")(tid)
        writer.add_add_bos_token(False)
        if chat_template is not None:
            writer.add_chat_template(chat_template)

        say(f"drawing the random weights ({c.layers} layers, seed {seed}) ...")
        # tensors: numpy shapes are the reverse of ggml's ne
        H, V = c.hidden, TINY_VOCAB_SIZE
        put("token_embd.weight", w(V, H))
        put("output_norm.weight", ones(H))
        put("output.weight", w(V, H))
        k_dim = c.qk_nope_dim + c.qk_rope_dim
        for i in range(c.layers):
            p = f"blk.{i}."
            put(p + "attn_norm.weight", ones(H))
            put(p + "attn_q_a_norm.weight", ones(c.q_lora_rank))
            put(p + "attn_kv_a_norm.weight", ones(c.kv_lora_rank))
            put(p + "attn_q_a.weight", w(c.q_lora_rank, H))
            put(p + "attn_q_b.weight", w(c.heads * k_dim, c.q_lora_rank))
            put(p + "attn_kv_a_mqa.weight", w(c.kv_lora_rank + c.qk_rope_dim, H))
            put(p + "attn_kv_b.weight", w(c.heads * (c.qk_nope_dim + c.v_dim), c.kv_lora_rank))
            put(p + "attn_output.weight", w(H, c.heads * c.v_dim))
            put(p + "ffn_norm.weight", ones(H))
            if i < c.dense_layers:
                put(p + "ffn_gate.weight", w(c.ffn, H))
                put(p + "ffn_up.weight", w(c.ffn, H))
                put(p + "ffn_down.weight", w(H, c.ffn))
            else:
                E, F = c.experts, c.expert_ffn
                put(p + "ffn_gate_inp.weight", w(E, H, dtype=np.float32))
                put(p + "exp_probs_b.bias", np.zeros(E, dtype=np.float32))
                put(p + "ffn_gate_exps.weight", w(E, F, H))
                put(p + "ffn_up_exps.weight", w(E, F, H))
                put(p + "ffn_down_exps.weight", w(E, H, F))
                S = F * c.shared_experts
                put(p + "ffn_gate_shexp.weight", w(S, H))
                put(p + "ffn_up_shexp.weight", w(S, H))
                put(p + "ffn_down_shexp.weight", w(H, S))

        say(f"writing {path} ...")
        writer.write_header_to_file()
        writer.write_kv_data_to_file()
        writer.write_tensors_to_file()
        writer.close()
        os.replace(tmp, path)
    except BaseException:
        writer.close()
        tmp.unlink(missing_ok=True)  # no half-written file left behind
        raise
    return path
