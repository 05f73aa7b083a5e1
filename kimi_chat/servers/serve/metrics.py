"""``GET /metrics`` of ``kimi-chat serve`` in the Prometheus text format (``prometheus_client``, in the
``serve`` extra): requests by status, prompt and completion tokens, the requests waiting and running,
time to first token and generation time. Each app has its own registry (two apps in one process do not
share counters)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["Metrics"]


class Metrics:
    """The server's counters; every method is a no-op without ``prometheus_client`` (then
    :meth:`exposition` is ``None``)."""

    def __init__(self, waiting: Callable[[], float], running: Callable[[], float]) -> None:
        try:
            import prometheus_client as pc
        except ImportError:
            self._pc: Any = None
            return
        self._pc = pc
        self.registry = pc.CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = pc.Counter("kimi_chat_requests", "Chat-completion requests answered, by HTTP status.",
                                   ["status"], registry=r)
        self.prompt_tokens = pc.Counter("kimi_chat_prompt_tokens", "Prompt tokens of the requests generated.",
                                        registry=r)
        self.completion_tokens = pc.Counter("kimi_chat_completion_tokens", "Tokens generated.", registry=r)
        pc.Gauge("kimi_chat_requests_waiting", "Requests held for the engine, not yet generating.",
                 registry=r).set_function(waiting)
        pc.Gauge("kimi_chat_requests_running", "Requests the engine is generating.", registry=r).set_function(running)
        buckets = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)
        self.ttft = pc.Histogram("kimi_chat_time_to_first_token_seconds", "From the request's arrival to its first "
                                 "generated token (waiting included).", buckets=buckets, registry=r)
        self.generation = pc.Histogram("kimi_chat_generation_seconds", "Time the engine spent on a request (all "
                                       "its choices).", buckets=buckets, registry=r)

    def request(self, status: int) -> None:
        if self._pc is not None:
            self.requests.labels(status=str(status)).inc()

    def tokens(self, prompt: int, completion: int) -> None:
        if self._pc is not None:
            self.prompt_tokens.inc(prompt)
            self.completion_tokens.inc(completion)

    def first_token(self, seconds: float) -> None:
        if self._pc is not None:
            self.ttft.observe(seconds)

    def generated(self, seconds: float) -> None:
        if self._pc is not None:
            self.generation.observe(seconds)

    def exposition(self) -> tuple[bytes, str] | None:
        """The text format and its content type; ``None`` without ``prometheus_client``."""
        if self._pc is None:
            return None
        return self._pc.generate_latest(self.registry), self._pc.CONTENT_TYPE_LATEST
