"""Conditional GETs for the dashboard: each page answer carries an ``ETag`` (a hash of its
body) and ``Cache-Control: no-cache``; a request whose ``If-None-Match`` names the body the
page would send now is answered ``304 Not Modified`` without it.

A dashboard left open asks for its page again only when ``/api/changes`` moved, and then only
"has *this* page changed?": a write elsewhere (another series, a task's heartbeat) costs a
304 of a few hundred bytes instead of the whole page (159 KB at 50 PRs, 1.5 MB at 500). The
browser sends ``If-None-Match`` itself (``fetch(url, {cache: "no-cache"})`` in
``static/live.js``): the page it already has is in its HTTP cache, kept because
``no-cache`` means "store, but ask before using".

The body is still built (or taken from :mod:`stackbot.web.page_cache`) to know its hash;
what is saved is the transfer and the browser's parsing and patching of an unchanged page.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from stackbot.web.buffered import buffered

Message = MutableMapping[str, Any]
_PAGES = (b"text/html", b"application/json")


def etag_of(body: bytes) -> str:
    return '"' + hashlib.blake2b(body, digest_size=12).hexdigest() + '"'


def matches(if_none_match: str, etag: str) -> bool:
    """Whether an ``If-None-Match`` header names ``etag`` (a list, ``*``, weak forms)."""
    wanted = {part.strip().removeprefix("W/") for part in if_none_match.split(",")}
    return "*" in wanted or etag in wanted


class ConditionalGet:
    """Pure ASGI middleware: buffers a 200 answer to a GET of a page (HTML or JSON), adds its
    ``ETag``, and sends a bodiless 304 instead when the request already holds that body."""

    def __init__(self, app: Callable[..., Awaitable[None]]) -> None:
        self.app = app

    async def __call__(
        self,
        scope: MutableMapping[str, Any],
        receive: Callable[[], Awaitable[Message]],
        send: Callable[[Message], Awaitable[None]],
    ) -> None:
        if scope["type"] != "http" or scope.get("method") != "GET":
            await self.app(scope, receive, send)
            return
        asked = _header(scope.get("headers", ()), b"if-none-match").decode("latin-1")

        async def finish(held: Message, body: bytes) -> None:
            etag = etag_of(body)
            headers = [
                (k, v)
                for k, v in held.get("headers", ())
                if k.lower() not in (b"etag", b"cache-control")
            ]
            headers += [(b"etag", etag.encode()), (b"cache-control", b"no-cache")]
            if asked and matches(asked, etag):
                kept = [(k, v) for k, v in headers if k.lower() != b"content-length"]
                await send({**held, "status": 304, "headers": kept})
                await send({"type": "http.response.body", "body": b""})
                return
            await send({**held, "headers": headers})
            await send({"type": "http.response.body", "body": body})

        await self.app(scope, receive, buffered(send, _page, finish))


def _header(headers: Any, name: bytes) -> bytes:
    for key, value in headers:
        if bytes(key).lower() == name:
            return bytes(value)
    return b""


def _page(start: Message) -> bool:
    if start.get("status") != 200 or _header(start.get("headers", ()), b"content-encoding"):
        return False
    return _header(start.get("headers", ()), b"content-type").lower().startswith(_PAGES)
