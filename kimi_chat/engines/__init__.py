"""Inference engines on top of the core: :mod:`.native` (llama.cpp through llama-cpp-python), :mod:`.ik` (ik_llama.cpp), :mod:`.chat` (one chat turn: render, generate, parse by id),
:mod:`.conformance` (how an engine's own chat path compares with kimi_chat's)."""
