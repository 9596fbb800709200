"""What an error means, decided in one place.

Every error stackbot raises on purpose derives from :class:`StackbotError` and says, by its
class, what the caller should do with it:

- :class:`BadInput`: the user gave something unusable (unknown ref, malformed JSON, wrong
  type). The CLI prints the message and exits 2; the HTTP API answers 4xx; a PR command gets a
  reply. Never retried.
- :class:`RetryLater`: a passing condition (rate limit, a lock, a network hiccup). The task
  queue retries after ``retry_after`` seconds (or its own backoff).
- :class:`Permanent`: retrying cannot help (a git object is gone, a repo was deleted). The task
  is dead-lettered with the message; the dashboard shows it.

Anything else is a bug: tasks retry it with backoff and dead-letter it after the last attempt.
"""

from __future__ import annotations

from enum import Enum


class StackbotError(Exception):
    """Base of stackbot's deliberate errors; the message is written for the person who acts."""


class BadInput(StackbotError):
    pass


class UnusableValue(BadInput):
    """A well-formed input holding a value no one sends (an id out of range, a NUL in a name):
    kept as a record of what came and refused with its reason, never acted on."""


class RetryLater(StackbotError):
    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class Permanent(StackbotError):
    pass


class Disposition(Enum):
    """What to do with a failure, by its error's class: tell the user (never retried), retry
    with backoff, or dead-letter it (see :func:`disposition`)."""

    TELL_USER = "tell_user"
    RETRY = "retry"
    DEAD = "dead"


def disposition(error: BaseException) -> Disposition:
    """The :class:`Disposition` of ``error``: bad input tells, permanent is dead, else retry."""
    if isinstance(error, BadInput):
        return Disposition.TELL_USER
    if isinstance(error, Permanent):
        return Disposition.DEAD
    return Disposition.RETRY
