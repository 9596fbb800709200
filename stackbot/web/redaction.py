"""The web app's boundary for server paths: every textual answer (pages, JSON, plain text) has
the server's directories replaced by placeholders on its way out
(:class:`stackbot.path_redaction.PathRedactor`), whichever route, read model, template or error
handler produced it. Static files and answers without a body (``HEAD``) pass untouched."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from stackbot.path_redaction import PathRedactor
from stackbot.web.buffered import buffered

Message = MutableMapping[str, Any]
_TEXTUAL = (b"text/", b"application/json", b"application/problem+json")


class RedactPaths:
    """Pure ASGI middleware: buffers a textual answer's body, rewrites it, fixes its length."""

    def __init__(self, app: Callable[..., Awaitable[None]], paths: PathRedactor) -> None:
        self.app = app
        self.paths = paths

    async def __call__(
        self,
        scope: MutableMapping[str, Any],
        receive: Callable[[], Awaitable[Message]],
        send: Callable[[Message], Awaitable[None]],
    ) -> None:
        if (
            scope["type"] != "http"
            or scope.get("method") == "HEAD"
            or str(scope.get("path", "")).startswith("/static/")
        ):
            await self.app(scope, receive, send)
            return

        async def finish(held: Message, original: bytes) -> None:
            body = self._redact(held, original) if original else original
            if body != original:  # (otherwise the answer goes as it was: a 304 keeps its headers)
                headers = [
                    (k, v) for k, v in held.get("headers", ()) if k.lower() != b"content-length"
                ]
                held = {**held, "headers": [*headers, (b"content-length", str(len(body)).encode())]}
            await send(held)
            await send({"type": "http.response.body", "body": body})

        await self.app(scope, receive, buffered(send, _textual, finish))

    def _redact(self, start: Message, body: bytes) -> bytes:
        text = body.decode("utf-8", "surrogateescape")
        markup = b"html" in _header(start, b"content-type")
        return self.paths.redact(text, markup=markup).encode("utf-8", "surrogateescape")


def _header(message: Message, name: bytes) -> bytes:
    for key, value in message.get("headers", ()):
        if key.lower() == name:
            return bytes(value).lower()
    return b""


def _textual(start: Message) -> bool:
    if _header(start, b"content-encoding"):
        return False  # compressed: not text this step can read
    return _header(start, b"content-type").startswith(_TEXTUAL)
