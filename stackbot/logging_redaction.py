"""Secrets never reach logs: a logging filter that masks them in every record it sees.

Masked: every value registered with :func:`register_secret` (the webhook secret, the token,
installation tokens as they are minted, the App's private key), and anything shaped like a
credential even if nobody registered it: PEM private keys, GitHub tokens (``ghp_``, ``ghs_``,
``github_pat_`` ...), JWTs, and ``Authorization:`` header values.

:func:`install_redaction` puts the filter on the root logger's handlers and on the loggers
that carry GitHub traffic; the GitHub adapter installs it on its own logger at import.
"""

from __future__ import annotations

import contextlib
import logging
import re
import threading
from pathlib import Path
from typing import Any

MASK = "[REDACTED]"
MIN_SECRET_LENGTH = 6  # shorter values would mask ordinary words

# A "keep" group is left in place so the log still says what was masked.
_PATTERNS = (
    re.compile(
        r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|\Z)", re.S
    ),
    re.compile(r"\b(?:gh[opsru]_[A-Za-z0-9_\-]{16,}|github_pat_[A-Za-z0-9_]{20,})"),
    re.compile(r"\beyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}"),
    re.compile(
        r"(?i)(?P<keep>authorization['\"]?\s*[:=]\s*['\"]?(?:token|bearer|basic)\s+)[^\s'\",}]+"
    ),
    re.compile(
        r"(?i)(?P<keep>x-hub-signature(?:-256)?['\"]?\s*[:=]\s*['\"]?)sha(?:1|256)=[0-9a-f]+"
    ),
)

# Loggers that see GitHub traffic (PyGithub's requester logs request and response bodies at
# DEBUG, which include freshly minted installation tokens).
GITHUB_LOGGERS = (
    "stackbot.adapters.github",
    "github",
    "github.Requester",
    "github.GithubRetry",
    "urllib3.connectionpool",
    "httpx",
)


class Redactor:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._secrets: set[str] = set()

    def add(self, secret: str | None) -> None:
        if not secret or len(secret) < MIN_SECRET_LENGTH:
            return
        with self._lock:
            self._secrets.add(secret)
            # A PEM file's lines appear on their own in tracebacks and reprs.
            for line in secret.splitlines():
                if len(line.strip()) >= 16 and "-----" not in line:
                    self._secrets.add(line.strip())

    def redact(self, text: str) -> str:
        with self._lock:
            known = sorted(self._secrets, key=len, reverse=True)
        # Shapes first: a whole PEM block goes at once, before its lines are masked one by one.
        for pattern in _PATTERNS:
            text = pattern.sub(_mask_match, text)
        for secret in known:
            if secret in text:
                text = text.replace(secret, MASK)
        return text


def _mask_match(match: re.Match[str]) -> str:
    keep = match.groupdict().get("keep")
    return (keep or "") + MASK


_REDACTOR = Redactor()


def register_secret(secret: str | None) -> None:
    """Mask this value wherever it appears in logs and in the adapter's error messages."""
    _REDACTOR.add(secret)


def redact(text: str) -> str:
    return _REDACTOR.redact(text)


class RedactingFilter(logging.Filter):
    """Rewrites each record's message, arguments and traceback text with secrets masked."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed record is logging's problem, not a reason to leak
            message = str(record.msg)
        record.msg = redact(message)
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        return True


_FILTER = RedactingFilter()


def _attach(target: logging.Logger | logging.Handler) -> None:
    if _FILTER not in target.filters:
        target.addFilter(_FILTER)


def install_on(*logger_names: str) -> None:
    for name in logger_names:
        _attach(logging.getLogger(name))


def install_redaction(settings: Any) -> RedactingFilter:
    """Register the configured secrets and put the filter where records pass.

    ``settings`` is a :class:`stackbot.config.Settings` (typed loosely so this module stays
    importable without it). Call it again after adding handlers to the root logger.
    """
    for name in ("webhook_secret", "github_token"):
        value = getattr(settings, name, None)
        if value is not None:
            register_secret(
                value.get_secret_value() if hasattr(value, "get_secret_value") else str(value)
            )
    key_path = getattr(settings, "github_private_key_path", None)
    if key_path is not None:
        # An unreadable key is reported by the adapter, naming the setting.
        with contextlib.suppress(OSError):
            register_secret(Path(key_path).read_text(encoding="utf-8").strip())
    root = logging.getLogger()
    _attach(root)
    for handler in root.handlers:
        _attach(handler)
    install_on(*GITHUB_LOGGERS)
    return _FILTER
