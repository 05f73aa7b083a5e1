"""Serving Kimi models: the streaming stages shared by every server plugin (:mod:`.stages`: a reasoning stage
and a body stage that parse by token id and hand out OpenAI deltas), what they log (:mod:`.diagnostics`), the
family a served model speaks (:mod:`.family`), what they ask of a family (:mod:`.hooks`: each family's
``serving`` module answers), and the plugins: :mod:`.vllm`, :mod:`.sglang`.
"""

from __future__ import annotations

from .stages import *  # noqa: F401,F403
from .stages import __all__  # noqa: F401
