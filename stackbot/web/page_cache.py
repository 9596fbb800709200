"""Computed pages kept while the database's read clock has not moved.

A series page of 500 PRs and 5,000 jobs takes most of a second to compute, and every open
dashboard asks for it again whenever ``/api/changes`` moves. Here each page body is computed
once per change to the data: a request reads the read clock (one indexed single-row query,
:mod:`stackbot.db.read_clock`) and, when the body kept for its page was computed at that tick,
sends it as is. The clock is moved by database triggers in the writing transaction, so a kept
body is never older than the data (see that module for why).

One process keeps its own bodies (a few tens of MB at most: :data:`MAX_BYTES`, least recently
used out first). Two requests for the same page at a new tick compute it once: the second
waits for the first (a lock per page key, striped).
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

from fastapi import HTTPException, Request, Response
from fastapi.encoders import jsonable_encoder
from sqlalchemy import Engine
from sqlmodel import Session

from stackbot.db import read_clock
from stackbot.services.read_batch import SharedMemo
from stackbot.web.fragments import Fragments

MAX_BYTES = 64 * 1024 * 1024
_STRIPES = 64


@dataclass(frozen=True)
class Kept:
    """A page body (None: the page does not exist) and the tick it was computed at."""

    tick: int
    body: bytes | None


class PageCache:
    def __init__(self, engine: Engine, *, max_bytes: int = MAX_BYTES) -> None:
        self.engine = engine
        self._max_bytes = max_bytes
        self._bytes = 0
        self._pages: OrderedDict[Hashable, Kept] = OrderedDict()
        self._lock = threading.Lock()
        self._stripes = [threading.Lock() for _ in range(_STRIPES)]
        self.hits = 0
        self.builds = 0
        # What pages derive from the runs' tables only, kept across builds while those tables
        # stand still (a PR's title changed: the page is built again, its 5,000 jobs are not).
        self.derived = SharedMemo()
        # Rendered per-PR pieces of pages, by their exact content (stackbot/web/fragments.py).
        self.fragments = Fragments()

    def body(self, key: Hashable, build: Callable[[], bytes | None]) -> bytes | None:
        """The body of page ``key``: kept if computed at the clock's current tick (or later),
        else ``build()`` (which reads the database in its own session, after the clock)."""
        with Session(self.engine) as session:
            tick = read_clock.ticks(session)
        if tick is None:  # no clock row: nothing can be known unchanged
            self.builds += 1
            return build()
        kept = self._fresh(key, tick)
        if kept is not None:
            return kept.body
        with self._stripes[hash(key) % _STRIPES]:
            kept = self._fresh(key, tick)  # built by the request we waited for
            if kept is not None:
                return kept.body
            body = build()
            self.builds += 1
            self._keep(key, Kept(tick, body))
            return body

    def _fresh(self, key: Hashable, tick: int) -> Kept | None:
        with self._lock:
            kept = self._pages.get(key)
            if kept is None or kept.tick < tick:
                return None
            self._pages.move_to_end(key)
            self.hits += 1
            return kept

    def _keep(self, key: Hashable, kept: Kept) -> None:
        size = len(kept.body or b"")
        with self._lock:
            old = self._pages.pop(key, None)
            if old is not None:
                self._bytes -= len(old.body or b"")
            if size > self._max_bytes:
                return
            self._pages[key] = kept
            self._bytes += size
            while self._bytes > self._max_bytes:
                _, dropped = self._pages.popitem(last=False)
                self._bytes -= len(dropped.body or b"")


_made = threading.Lock()


def of(request: Request) -> PageCache:
    """The app's page cache, on the app's engine (made on first use)."""
    state = request.app.state
    with _made:
        cache: PageCache | None = getattr(state, "page_cache", None)
        if cache is None or cache.engine is not state.engine:
            cache = state.page_cache = PageCache(state.engine)
    return cache


def send(
    request: Request,
    key: Hashable,
    build: Callable[[], bytes | None],
    *,
    missing: str,
    media_type: str,
) -> Response:
    """Page ``key``'s body, kept or built (:meth:`PageCache.body`); 404 saying ``missing`` when
    the page does not exist."""
    body = of(request).body(key, build)
    if body is None:
        raise HTTPException(404, missing)
    return Response(body, media_type=media_type)


def json_bytes(value: Any) -> bytes:
    """``value`` encoded as FastAPI's JSONResponse encodes a returned dict. The read models'
    ``to_json`` give plain JSON values already, so FastAPI's encoder (a third of a 500-PR series'
    time) is asked only for what ``json`` cannot encode itself."""
    text = json.dumps(
        value, ensure_ascii=False, allow_nan=False, separators=(",", ":"), default=jsonable_encoder
    )
    return text.encode("utf-8")


#: OpenAPI's description of a cached JSON object response (the route returns bytes).
JSON_OBJECT: dict[int | str, dict[str, Any]] = {
    200: {"content": {"application/json": {"schema": {"type": "object"}}}}
}
