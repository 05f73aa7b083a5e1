"""``--tokenizer-mode kimi_chat``: a model directory's family and dialect come from the families' serving
hooks (``MODEL_TYPES``, ``VOCABULARY``, ``SERVED_DIALECT``), not from a family's marker or name
written in the vLLM adapter. The directories hold the reference tiktoken model and configs (no weights)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from kimi_chat import markers as M
from kimi_chat.reference import reference_dir
from kimi_chat.servers.vllm.tokenizer import directory_family, load_kimi_tokenizer, model_dialect
from kimi_chat.tokens.tokenizer import K3_CONFIG, REFERENCE_CONFIGS


def _dir(root: Path, name: str, model_type: str | None, config: dict | None) -> Path:
    ref = reference_dir()
    if ref is None:
        pytest.fail("the reference data is needed ($KIMI_CHAT_REFERENCE_DIR)")
    d = root / name
    d.mkdir()
    shutil.copy(ref / "tokenizer/tiktoken.model", d / "tiktoken.model")
    if config is not None:
        (d / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    (d / "config.json").write_text(json.dumps({} if model_type is None else {"model_type": model_type}),
                                   encoding="utf-8")
    return d


def _k2_config() -> dict:
    ref = reference_dir()
    assert ref is not None
    return json.loads((ref / REFERENCE_CONFIGS["k2"]).read_text(encoding="utf-8"))


@pytest.mark.parametrize("model_type, config", [
    ("kimi_k3", K3_CONFIG),      # the model type says so
    ("kimi_k3", None),           # ... and the reference K3 special tokens stand in for a missing config
    (None, K3_CONFIG),           # no model type: the config holds <|open|> / <|end_of_msg|> at K3's ids
])
def test_a_k3_directory_is_served_as_k3(tmp_path, model_type, config):
    d = _dir(tmp_path, "m", model_type, config)
    tok = load_kimi_tokenizer(d)
    assert tok.special_tokens[M.K3_OPEN.text] == M.K3_OPEN.id
    assert tok.special_tokens[M.K3_END_OF_MSG.text] == M.K3_END_OF_MSG.id
    md = model_dialect(d, tok)  # no chat template in the directory: the vocabulary decides
    assert md.dialect.name == "kimi-k3" and md.reason == "Kimi-K3 vocabulary (<|open|>/<|end_of_msg|> special tokens)"


def test_a_k2_directory_is_the_default_family(tmp_path):
    cfg = _k2_config()
    assert directory_family({"model_type": "kimi_k2"}, cfg).name == "k2"
    # <|open|> named at an id that is not K3's does not make a K3 directory
    stray = {**cfg, "added_tokens_decoder": {**cfg.get("added_tokens_decoder", {}),
                                             "163999": {"content": M.K3_OPEN.text, "special": True}}}
    assert directory_family({}, stray).name == "k2"
    d = _dir(tmp_path, "k2", "kimi_k2", cfg)
    tok = load_kimi_tokenizer(d)
    assert M.K3_OPEN.text not in tok.special_tokens and tok.special_tokens[M.IM_END.text] == M.IM_END.id



@pytest.mark.parametrize("name, served", [("Kimi-K2.7-Code", "kimi-k2.7-code"), ("Kimi-K2.6", "kimi-k2.6")])
def test_the_model_name_decides_what_the_template_cannot_tell(tmp_path, name, served):
    # Kimi-K2.7-Code ships Kimi-K2.6's format: the K2.6 template identifies as K2.6, the directory's name says which
    from kimi_chat.templates import template_text

    ref = reference_dir()
    assert ref is not None
    cfg = json.loads((ref / REFERENCE_CONFIGS["k2.6"]).read_text(encoding="utf-8"))
    d = _dir(tmp_path, name, "kimi_k25", cfg)
    (d / "chat_template.jinja").write_text(template_text("kimi-k2.6"), encoding="utf-8")
    md = model_dialect(d, load_kimi_tokenizer(d))
    assert md.dialect.name == served, md.reason
