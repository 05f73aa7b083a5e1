"""The caches of the per-request path, in one place: bounded, thread-safe, keyed exactly on content.

Servers render short conversations with the same tools on every request; what depends only on the
tools (their sorted JSON, the TypeScript declaration of K2.5 / K2.6, K3's declare block) is computed
once per distinct tool list and reused. Every cache here:

* is bounded: an :class:`LRUCache` keeps at most ``maxsize`` entries (the least recently used goes), a
  :class:`Generations` at most ``max_weight`` of weight (the entries not used for a generation go), and
  :func:`content_key` refuses (``None``: not cached) a value whose key is longer than
  ``max_key_bytes``, so each entry's memory is bounded too;
* is thread-safe: its writes hold a lock, its reads are single atomic dict operations (a value computed
  twice by two threads at once is the same value: the second ``put`` replaces the first);
* never changes an output: a key is the exact content (:func:`content_key`), so a hit returns what
  the computation returns for that input; exceptions are never cached (the input is computed again,
  and raises again);
* is listed in :data:`REGISTRY` (by name), or held by a cache that is, so tests can clear every cache
  (:func:`clear_all`) and run with the caches cold as well as warm.

:class:`PerTokenizer` holds data computed from a tokenizer (e.g. its marker ids and the ids of short
text pieces), dropped with the tokenizer (weak keys).

The classes take no attribute they do not declare (``__slots__``).
"""

from __future__ import annotations

import marshal
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator, Sized
from contextlib import contextmanager
from typing import Any, Final, Generic, TypeVar

__all__ = ["LRUCache", "Generations", "PerTokenizer", "content_key", "exact_key", "admitted_key", "clear_all", "bypassed",
           "REGISTRY", "MAX_KEY_BYTES"]

V = TypeVar("V")

MAX_KEY_BYTES: Final = 1 << 16
"""Default bound of a key's length (bytes): bigger content is not cached."""

REGISTRY: dict[str, "LRUCache[Any] | Generations[Any] | PerTokenizer[Any]"] = {}
"""Every cache of kimi_chat, by name (each registers itself when created, at import)."""

_MISSING: Final[Any] = object()

_bypassed = False
"""Set by :func:`bypassed`: every :class:`LRUCache` and :class:`Generations` lookup misses."""


KEY_VERSION: Final = 2
"""The ``marshal`` format of the keys. Version 2 writes no back-references: from version 3 on, marshal flags
every object whose reference count is above one, so an equal value got another key as soon as something
else held one of its parts (a cache holding a request's schema, say): a miss for the same request."""

QUICK_VERSION: Final = 4
"""The ``marshal`` format :func:`exact_key` reads a value with first: about half the cost of version 2 (it
writes ASCII text as it is, where version 2 encodes every string through the UTF-8 codec), but its bytes
depend on which parts are shared and on reference counts, so it is only a way to the version-2 key
(:data:`_QUICK`), never a key itself."""

_QUICK_MAX_WEIGHT: Final = 1 << 22
"""Bytes of quick texts kept in :data:`_QUICK` (4 MiB)."""


def exact_key(value: Any) -> bytes:
    """``marshal.dumps(value, KEY_VERSION)``: an exact key of plain data (:func:`content_key`), found at
    about half its cost for a value read before. The quick text (:data:`QUICK_VERSION`) of ``value``
    is looked up in :data:`_QUICK`, a bounded map of quick text -> version-2 key; on a miss the
    version-2 key is computed and recorded. Exact either way: ``marshal.loads`` inverts both texts, so
    equal quick texts are equal values of equal types in equal order, whose version-2 keys are equal; an
    equal value read with other sharing or reference counts has another quick text, a miss that computes
    the same version-2 key. Raises ``ValueError`` (not plain data) or ``RecursionError`` (too deep), as
    ``marshal.dumps`` does."""
    quick = marshal.dumps(value, QUICK_VERSION)
    key: bytes | None = _QUICK.find(quick)
    if key is None:
        key = marshal.dumps(value, KEY_VERSION)
        _QUICK.put(quick, key, len(quick) + len(key))
    return key


def content_key(value: Any, max_key_bytes: int = MAX_KEY_BYTES) -> bytes | None:
    """An exact key of plain data ``value``: ``marshal.dumps`` (:data:`KEY_VERSION`, computed by
    :func:`exact_key`), or ``None`` (do not cache).

    marshal serialises only plain data of exact types (dict, list, tuple, str, int, float, bool,
    None, bytes; no subclasses, no other objects) with each value's type written (``1``, ``1.0`` and
    ``True`` are three keys; a tuple is not a list), dicts in their key order, and ``marshal.loads``
    inverts it: equal keys are equal values of equal types in equal order, and equal values of equal
    types in equal order get equal keys, whoever else holds their parts. ``None`` for
    anything else (an object, a subclass, a value nested too deeply) and for keys longer than
    ``max_key_bytes``."""
    try:
        key = exact_key(value)
    except (ValueError, RecursionError):  # not plain data, or nested too deeply for marshal
        return None
    return key if len(key) <= max_key_bytes else None


def admitted_key(value: Any, max_key_bytes: int = MAX_KEY_BYTES) -> bytes | None:
    """:func:`content_key` of a value read before, ``None`` (do not cache) the first time.

    A multi-tenant server sees tool lists it never sees again: for those an exact key (two
    ``marshal`` texts, and the entries stored under it) costs about what rendering them costs, and is
    never used. So a value earns its key on its second reading: the first stores only its quick text
    (:data:`QUICK_VERSION`, the cheaper ``marshal`` text) in :data:`_SEEN`, a bounded map; a value whose
    quick text is there (or already keyed in :data:`_QUICK`) gets the exact key, which finds what its
    earlier readings stored, from the third on. Exact either way (the key is :func:`exact_key`'s).
    Raises ``ValueError`` (not plain data) or ``RecursionError`` (too deep), as ``marshal.dumps`` does:
    the caller's check that ``value`` is plain data."""
    quick = marshal.dumps(value, QUICK_VERSION)
    key: bytes | None = _QUICK.find(quick)
    if key is None:
        if _SEEN.find(quick) is None:  # a first reading: not worth a key yet
            _SEEN.put(quick, True, len(quick))
            return None
        key = marshal.dumps(value, KEY_VERSION)
        _QUICK.put(quick, key, len(quick) + len(key))
    return key if len(key) <= max_key_bytes else None


class LRUCache(Generic[V]):
    """A bounded, thread-safe least-recently-used map, registered in :data:`REGISTRY` as ``name``
    (``name=None``: not registered, for a cache held by a registered one, e.g. one per tokenizer in
    a :class:`PerTokenizer`, cleared with it). ``max_weight``: also bounded by the sum of the entries'
    weights (``put(..., weight=)``, e.g. their length): the least recently used go until it fits."""

    __slots__ = ("name", "maxsize", "max_weight", "weight", "_weights", "_data", "_lock", "__weakref__")

    def __init__(self, name: str | None, maxsize: int = 64, max_weight: int | None = None) -> None:
        if name is not None and name in REGISTRY:
            raise ValueError(f"a cache named {name!r} exists already")
        self.name = name
        self.maxsize = maxsize
        self.max_weight = max_weight
        self.weight = 0
        """The sum of the entries' weights (with ``max_weight``)."""
        self._weights: dict[Hashable, int] = {}
        self._data: OrderedDict[Hashable, V] = OrderedDict()
        self._lock = threading.Lock()
        if name is not None:
            REGISTRY[name] = self

    def get(self, key: Hashable, default: Any = None) -> Any:
        """The value of ``key`` (now the most recently used), or ``default``. Read without the lock (every
        request reads here): the lookup and the move to the end are each one atomic ``OrderedDict`` call,
        and a key another thread drops between the two is simply not moved."""
        if _bypassed:
            return default
        data = self._data
        value = data.get(key, _MISSING)
        if value is _MISSING:
            return default
        try:
            data.move_to_end(key)
        except KeyError:  # dropped meanwhile by a put of another thread
            pass
        return value

    def put(self, key: Hashable, value: V, weight: int = 1) -> None:
        """Store ``value`` under ``key``; drop the least recently used entries beyond ``maxsize`` (and
        beyond ``max_weight``, ``weight`` being this entry's)."""
        with self._lock:
            data = self._data
            data[key] = value
            data.move_to_end(key)
            if self.max_weight is None:
                while len(data) > self.maxsize:
                    data.popitem(last=False)
                return
            weights = self._weights
            self.weight += weight - weights.get(key, 0)
            weights[key] = weight
            while len(data) > self.maxsize or self.weight > self.max_weight:
                old, _ = data.popitem(last=False)
                self.weight -= weights.pop(old)

    def keys(self) -> list[Hashable]:
        """The keys, least recently used first (a copy: a snapshot under the lock)."""
        with self._lock:
            return list(self._data)

    def items(self) -> list[tuple[Hashable, V]]:
        """The entries, least recently used first (a copy: a snapshot under the lock)."""
        with self._lock:
            return list(self._data.items())

    def find(self, key: Hashable) -> V | None:
        """The value of ``key``, or ``None``, read without the lock and without marking it recently used
        (one dict lookup, atomic; for a hot path whose entries are cheap to compute again: an entry in
        steady use may then go before one seen once since)."""
        return None if _bypassed else self._data.get(key)

    def get_or_compute(self, key: Hashable | None, compute: Callable[..., V], *args: Any) -> V:
        """``compute(*args)``, cached under ``key`` (``None``: not cached, computed every time). ``args``
        spare a hot caller a closure per call. An exception of ``compute`` propagates and nothing is stored."""
        if key is None:
            return compute(*args)
        value = self.get(key, _MISSING)
        if value is _MISSING:
            value = compute(*args)
            self.put(key, value)
        return value

    def clear(self) -> None:
        """Drop every entry."""
        with self._lock:
            self._data.clear()
            self._weights.clear()
            self.weight = 0

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"<LRUCache {self.name}: {len(self._data)}/{self.maxsize}>"


class Generations(Generic[V]):
    """A bounded, thread-safe map whose ``put`` is O(1) and cheap, each entry weighing the length of its
    key (e.g. a text and what was computed from it): an approximate least-recently-used map in two
    generations of plain dicts, for a cache filled on almost every call (the ids of text never seen
    before), where an :class:`LRUCache`'s ordered bookkeeping and eviction loop cost a noticeable share of
    the work cached. Registered in :data:`REGISTRY` as ``name`` (``None``: not registered, for a cache
    held by a registered one).

    A ``put`` goes into the young generation; when the young generation's weight would pass half of
    ``max_weight``, it becomes the old one (the old one is dropped, all at once) and a new young one
    starts. A lookup reads the young generation, then the old one: a hit there is put in the young
    generation again (promoted), so an entry in use survives every rotation and one not read for a
    generation goes. Bounded: each generation holds at most ``max_weight // 2`` of weight (a key longer
    than that is not kept), so :attr:`weight` ``<= max_weight`` (an entry promoted is counted in both
    generations while it is in both). Thread-safe: a lookup is two atomic dict reads without the lock (one
    racing a rotation at worst misses: the value is computed again); ``put`` holds the lock for one dict
    store and an addition (a dropped generation is freed after the lock is released)."""

    __slots__ = ("name", "max_weight", "_young", "_old", "_young_weight", "_old_weight", "_lock", "__weakref__")

    def __init__(self, name: str | None, max_weight: int) -> None:
        if name is not None and name in REGISTRY:
            raise ValueError(f"a cache named {name!r} exists already")
        self.name = name
        self.max_weight = max_weight
        self._young: dict[Sized, V] = {}
        self._old: dict[Sized, V] = {}
        self._young_weight = 0
        self._old_weight = 0
        self._lock = threading.Lock()
        if name is not None:
            REGISTRY[name] = self

    @property
    def weight(self) -> int:
        """The sum of the lengths of the keys held, both generations' (at most ``max_weight``)."""
        return self._young_weight + self._old_weight

    def get(self, key: Sized, default: Any = None) -> Any:
        """The value of ``key`` (promoted to the young generation when found in the old one), or
        ``default``; ``default`` inside :func:`bypassed`."""
        if _bypassed:
            return default
        value = self._young.get(key, _MISSING)
        if value is _MISSING:
            value = self._old.get(key, _MISSING)
            if value is _MISSING:
                return default
            self.put(key, value)
        return value

    def put(self, key: Sized, value: V) -> None:
        """Store ``value`` under ``key`` in the young generation, rotating the generations first when it
        would not fit in half of ``max_weight``; a key longer than that is not kept."""
        weight = len(key)
        half = self.max_weight // 2
        if weight > half:
            return
        dropped = None
        with self._lock:
            w = self._young_weight + weight
            if w > half:
                dropped = self._old  # freed on return, outside the lock
                self._old, self._old_weight = self._young, self._young_weight
                self._young, w = {}, weight
            self._young[key] = value
            self._young_weight = w
        del dropped

    def clear(self) -> None:
        """Drop every entry."""
        with self._lock:
            self._young, self._old = {}, {}
            self._young_weight = self._old_weight = 0

    def __len__(self) -> int:
        """The entries held (one promoted and still in the old generation counts once)."""
        young, old = self._young, self._old
        return len(young) + len(old.keys() - young.keys()) if old else len(young)

    def __repr__(self) -> str:
        return f"<Generations {self.name}: weight {self.weight}/{self.max_weight}>"

_QUICK: Final["LRUCache[bytes]"] = LRUCache("caches.quick_keys", 256, max_weight=_QUICK_MAX_WEIGHT)
"""Quick text (``marshal`` :data:`QUICK_VERSION`) -> the version-2 key of the same value (:func:`exact_key`):
bounded by count and by the bytes of both texts."""

_SEEN: Final["LRUCache[bool]"] = LRUCache("caches.seen_once", 256, max_weight=_QUICK_MAX_WEIGHT)
"""Quick texts of values read once and not keyed yet (:func:`admitted_key`): bounded by count and bytes."""


class PerTokenizer(Generic[V]):
    """Data computed once per tokenizer object (weakly keyed: it goes with the tokenizer), registered
    in :data:`REGISTRY` as ``name``. ``get(tokenizer, build)`` returns ``build(tokenizer)``, built on
    the first call for that tokenizer (under a lock: built once)."""

    __slots__ = ("name", "_data", "_lock")

    def __init__(self, name: str) -> None:
        if name in REGISTRY:
            raise ValueError(f"a cache named {name!r} exists already")
        self.name = name
        self._data: weakref.WeakKeyDictionary[Any, V] = weakref.WeakKeyDictionary()
        self._lock = threading.Lock()
        REGISTRY[name] = self

    def get(self, tokenizer: Any, build: Callable[[Any], V]) -> V:
        """The data of ``tokenizer``, built by ``build(tokenizer)`` on first use (an exception of
        ``build`` propagates and nothing is stored)."""
        value = self._data.get(tokenizer, _MISSING)
        if value is _MISSING:
            with self._lock:
                value = self._data.get(tokenizer, _MISSING)
                if value is _MISSING:
                    value = build(tokenizer)
                    self._data[tokenizer] = value
        return value

    def clear(self) -> None:
        """Drop the data of every tokenizer."""
        with self._lock:
            self._data.clear()

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"<PerTokenizer {self.name}: {len(self._data)} tokenizers>"


@contextmanager
def bypassed() -> Iterator[None]:
    """Every lookup of every :class:`LRUCache` misses while inside (what is computed is still stored):
    every request computes everything, as without caches. The tests run with the caches cold so; an
    operator can rule the caches out with it. Process-wide, for every thread."""
    global _bypassed
    _bypassed = True
    try:
        yield
    finally:
        _bypassed = False


def clear_all() -> None:
    """Empty every cache of :data:`REGISTRY` (tests run with the caches cold this way)."""
    for cache in list(REGISTRY.values()):
        cache.clear()
