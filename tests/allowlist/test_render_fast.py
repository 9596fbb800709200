"""The hand-written renderer is byte-for-byte json.dumps(..., indent=2, sort_keys=True)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from stackbot.domain.allowlist.model import (
    Allowlist,
    render_allowlist,
    render_allowlist_with_json,
)

texts = st.text(min_size=1, max_size=12)  # any unicode: quotes, backslashes, controls, é, 🚀
entries = st.builds(
    lambda key, kind, detail: f"{key}:{kind}:{detail}",
    texts.filter(lambda t: ":" not in t),
    st.sampled_from(["accessor", "shim"]),
    texts,
)


@settings(max_examples=300, deadline=None)
@given(
    comment=st.text(max_size=40),
    allowed=st.dictionaries(texts, st.lists(entries, max_size=4), max_size=5),
)
def test_same_bytes_as_json(comment: str, allowed: dict[str, list[str]]) -> None:
    allowlist = Allowlist(comment, {path: tuple(items) for path, items in allowed.items()}, 0)
    assert render_allowlist(allowlist) == render_allowlist_with_json(allowlist)


def test_empty_allowlist() -> None:
    allowlist = Allowlist("c", {}, 7)
    assert render_allowlist(allowlist) == render_allowlist_with_json(allowlist)
    assert (
        render_allowlist(allowlist) == b'{\n  "_comment": "c",\n  "allowed": {},\n  "total": 0\n}\n'
    )
