"""The App's webhook deliveries, as GitHub documents redelivering failed ones: list the
deliveries (App JWT; newest first, following ``Link: rel="next"``) and ask for a new attempt of
one (``POST /app/hook/deliveries/{id}/attempts``, 202)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime

import httpx

from stackbot.adapters.github.auth import InstallationTokens, read_private_key
from stackbot.adapters.github.retry import RetryPolicy
from stackbot.config import Settings
from stackbot.errors import BadInput

_NEXT = re.compile(r'<([^>]+)>;\s*rel="next"')


@dataclass(frozen=True)
class HookDelivery:
    id: int
    guid: str
    delivered_at: datetime
    status_code: int
    event: str
    action: str | None

    @property
    def failed(self) -> bool:
        return not 200 <= self.status_code < 300


def parse_time(text: str) -> datetime:
    """An ISO 8601 time with its zone (``2026-12-04T15:00:00Z``); BadInput otherwise."""
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise BadInput(f"not an ISO 8601 time: {text!r} (e.g. 2026-12-04T15:00:00Z)") from None
    if when.tzinfo is None:
        raise BadInput(f"the time {text!r} needs its zone (Z or +HH:MM)")
    return when


class AppHooks:
    def __init__(self, api_url: str, tokens: InstallationTokens, *, timeout_s: float = 30) -> None:
        self._api = api_url.rstrip("/")
        self._tokens = tokens
        self._timeout = timeout_s

    @classmethod
    def from_settings(cls, settings: Settings) -> AppHooks:
        if settings.github_app_id is None or settings.github_private_key_path is None:
            raise BadInput(
                "redelivery needs the GitHub App: set STACKBOT_GITHUB_APP_ID and "
                "STACKBOT_GITHUB_PRIVATE_KEY_PATH"
            )
        api = str(settings.github_api_url)
        tokens = InstallationTokens(
            app_id=int(settings.github_app_id),
            private_key=read_private_key(settings.github_private_key_path),
            base_url=api,
            policy=RetryPolicy(),
            installation_id=0,  # not used: these calls are the App's own
        )
        return cls(api, tokens)

    def _headers(self) -> dict[str, str]:
        return {
            "Authorization": f"Bearer {self._tokens.app_jwt()}",
            "Accept": "application/vnd.github+json",
            "X-GitHub-Api-Version": "2022-11-28",
        }

    def deliveries_since(self, since: datetime) -> list[HookDelivery]:
        """Every delivery at or after ``since``, oldest first."""
        found: list[HookDelivery] = []
        url: str | None = f"{self._api}/app/hook/deliveries?per_page=100"
        while url is not None:
            response = httpx.get(url, headers=self._headers(), timeout=self._timeout)
            response.raise_for_status()
            older = False
            for item in response.json():
                delivery = HookDelivery(
                    id=int(item["id"]),
                    guid=str(item["guid"]),
                    delivered_at=parse_time(str(item["delivered_at"])),
                    status_code=int(item.get("status_code") or 0),
                    event=str(item.get("event") or ""),
                    action=item.get("action"),
                )
                if delivery.delivered_at < since:
                    older = True
                    continue
                found.append(delivery)
            link = _NEXT.search(response.headers.get("link", ""))
            url = None if older or link is None else link.group(1)
        return sorted(found, key=lambda d: (d.delivered_at, d.id))

    def redeliver(self, delivery_id: int) -> None:
        response = httpx.post(
            f"{self._api}/app/hook/deliveries/{int(delivery_id)}/attempts",
            headers=self._headers(),
            timeout=self._timeout,
        )
        response.raise_for_status()
