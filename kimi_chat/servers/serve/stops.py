"""The request's ``stop`` sequences over the streamed content: text that could be the start of a stop
sequence is held back until it is known not to be; at a stop sequence the content ends before it."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["StopText"]


class StopText:
    """Feed content pieces in order; each :meth:`feed` returns the text now safe to send. After a stop
    sequence, :attr:`hit` is true and nothing more is released."""

    def __init__(self, stops: Sequence[str]) -> None:
        self.stops = [s for s in stops if s]
        self._held = ""
        self.hit = False
        self.sent: list[str] = []
        """Every piece released, in order."""

    def feed(self, text: str) -> str:
        if self.hit or not self.stops:
            if not self.hit:
                self.sent.append(text)
            return "" if self.hit else text
        buf = self._held + text
        cut = min((i for i in (buf.find(s) for s in self.stops) if i >= 0), default=-1)
        if cut >= 0:
            self.hit = True
            self._held = ""
            return self._release(buf[:cut])
        keep = 0  # the longest end of buf that begins a stop sequence
        for s in self.stops:
            for n in range(min(len(s) - 1, len(buf)), keep, -1):
                if s.startswith(buf[-n:]):
                    keep = n
                    break
        self._held = buf[len(buf) - keep:] if keep else ""
        return self._release(buf[:len(buf) - keep])

    def finish(self) -> str:
        """The text still held (the content ended without a stop sequence)."""
        held, self._held = self._held, ""
        return "" if self.hit else self._release(held)

    def _release(self, text: str) -> str:
        if text:
            self.sent.append(text)
        return text
