"""``kimi-chat serve``: an OpenAI-compatible chat-completions server for Kimi models on one host.

The request contract is :mod:`kimi_chat.servers.contract`'s (Moonshot's, as its Vendor Verifier tests
it); :mod:`~kimi_chat.servers.serve.generation` renders, constrains and parses by token id;
:mod:`~kimi_chat.servers.serve.engines` generates (in process, or on a running llama-server);
:mod:`~kimi_chat.servers.serve.app` is the Starlette app (extra ``serve``: ``pip install -e '.[serve]'``
in the checkout).

    from kimi_chat.servers.serve import NativeEngine, ServeConfig, create_app
    app = create_app(NativeEngine.load("model.gguf"), ServeConfig(api_key="..."))
    # or answer /health (503 "loading model") while it loads:
    app = create_app(EngineLoader(lambda: NativeEngine.load("model.gguf"), "model.gguf"), ServeConfig())
"""

from __future__ import annotations

from .engines import Engine, EngineError, NativeEngine, Sampling, UpstreamEngine

__all__ = ["Engine", "EngineError", "NativeEngine", "UpstreamEngine", "Sampling", "ServeConfig", "EngineLoader",
           "create_app"]


def __getattr__(name: str) -> object:  # the app needs starlette (extra ``serve``): imported when asked for
    if name in ("ServeConfig", "EngineLoader", "create_app"):
        from . import app

        return getattr(app, name)
    raise AttributeError(name)
