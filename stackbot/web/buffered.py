"""One response held whole before it is sent: what the ETag and the path redaction both need."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Message = MutableMapping[str, Any]
Send = Callable[[Message], Awaitable[None]]


def buffered(
    send: Send,
    keep: Callable[[Message], bool],
    finish: Callable[[Message, bytes], Awaitable[None]],
) -> Send:
    """A ``send`` that holds a response whose start ``keep`` accepts until its whole body has
    come, then hands the start and the body to ``finish``; any other response passes as it is."""
    held: Message | None = None
    chunks: list[bytes] = []

    async def answer(message: Message) -> None:
        nonlocal held
        if message["type"] == "http.response.start" and keep(message):
            held = message
            return
        if message["type"] != "http.response.body" or held is None:
            await send(message)
            return
        chunks.append(message.get("body", b""))
        if message.get("more_body", False):
            return
        await finish(held, b"".join(chunks))

    return answer
