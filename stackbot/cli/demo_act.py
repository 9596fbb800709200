"""``stackbot demo comment`` / ``stackbot demo push``: act on a running demo as its people would,
through its GitHub stand-in (which listens on the demo's port + 1), and watch stackbot answer.

    stackbot demo comment 8050 "/ok to test 6be650e" --as maintainer-p
    stackbot demo push 8050 --as contributor-z

A comment is posted as ``--as`` (one of the demo's people, or anyone: an unknown login is a
user without access); a push commits one file on the PR's head branch as ``--as`` (default: the
PR's author), so the head moves and an approval of the old head no longer holds.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from typing import Any

import httpx

from stackbot.cli.serve import _port

REPO = "NVIDIA/Megatron-LM"  # stackbot.demo.scenario.REPO (cli imports no demo at parse time)
READER = "maintainer-p"  # stackbot.demo.scenario.VETTER


def register_actions(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", metavar="{comment,push}")
    comment = actions.add_parser(
        "comment",
        help="post a comment on a PR of the running demo (a slash command as a user would)",
        description="Posts TEXT on PR NUMBER of the running demo as --as; stackbot receives "
        "the issue_comment webhook as from GitHub.",
    )
    comment.add_argument("number", type=_pr_number, help="the PR, e.g. 8050")
    comment.add_argument("text", help='the comment, e.g. "/ok to test 6be650e"')
    comment.add_argument(
        "--as", dest="login", required=True, help="who comments, e.g. maintainer-p"
    )
    push = actions.add_parser(
        "push",
        help="push a commit to a PR's branch in the running demo",
        description="Commits one file (--path, --content) on PR NUMBER's head branch; stackbot "
        "receives the push as from GitHub.",
    )
    push.add_argument("number", type=_pr_number, help="the PR, e.g. 8748")
    push.add_argument("--as", dest="login", default=None, help="who pushes (default: its author)")
    push.add_argument("--path", default=None, help="the file to write (default: a notes file)")
    push.add_argument("--content", default=None, help="its new content")
    for sub in (comment, push):
        sub.add_argument(
            "--port",
            type=_port,
            default=8000,
            help="the running demo's --port (default 8000); its stand-in is on the next port",
        )
        sub.set_defaults(handler=act)


def _pr_number(text: str) -> int:
    number = text.removeprefix("#")
    if not (number.isascii() and number.isdigit()) or not 0 < int(number) < 2**31:
        raise argparse.ArgumentTypeError(f"{text!r} is not a PR number (e.g. 8050)")
    return int(number)


class Refused(Exception):
    """One line for the user: what went wrong and what to do."""


def act(args: argparse.Namespace) -> int:
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line of ours, not its requests
    standin = f"http://127.0.0.1:{args.port + 1}"
    try:
        with httpx.Client(base_url=standin, timeout=30) as client:
            if args.action == "comment":
                said = _post(
                    client,
                    f"/_standin/repos/{REPO}/issues/{args.number}/comments",
                    {"author": args.login, "body": args.text},
                )
                print(f"{args.login} commented on #{args.number} (comment {said.get('id')}).")
            else:
                sha = _push(client, args)
                print(f"pushed {sha[:7]} to #{args.number}'s branch.")
    except Refused as refusal:
        print(f"stackbot demo {args.action}: {refusal}", file=sys.stderr)
        return 2
    print(
        f"stackbot answers on the PR and on the dashboard: http://127.0.0.1:{args.port}/pulls/{args.number}"
    )
    return 0


def _push(client: httpx.Client, args: argparse.Namespace) -> str:
    # GitHub's REST API wants a token to read the PR: one of the demo's vetter's.
    token = _post(client, "/_standin/tokens", {"login": READER})["token"]
    client.headers["Authorization"] = f"token {token}"
    pull = _get(client, f"/repos/{REPO}/pulls/{args.number}")
    if pull.get("state") != "open":
        raise Refused(f"#{args.number} is {pull.get('state')}: push to an open PR")
    branch = pull["head"]["ref"]
    login = args.login or pull["user"]["login"]
    path = args.path or f"docs/notes/{login}.md"
    content = args.content
    if content is None:
        content = f"Pushed by {login} at {time.strftime('%H:%M:%S')} with `stackbot demo push`.\n"
    answer = _post(
        client,
        f"/_standin/repos/{REPO}/commits",
        {
            "branch": branch,
            "files": {path: content},
            "message": f"Update {path}",
            "author": login,
        },
    )
    return str(answer["sha"])


def _get(client: httpx.Client, path: str) -> dict[str, Any]:
    return _answer(client, "GET", path, None)


def _post(client: httpx.Client, path: str, body: dict[str, Any]) -> dict[str, Any]:
    return _answer(client, "POST", path, body)


def _answer(client: httpx.Client, method: str, path: str, body: Any) -> dict[str, Any]:
    try:
        response = client.request(method, path, json=body)
    except httpx.HTTPError:
        raise Refused(
            f"no demo's GitHub stand-in answers on {client.base_url}: start `stackbot demo` "
            "first, or pass the --port it runs on"
        ) from None
    if response.status_code >= 400:
        try:
            message = response.json().get("message") or response.text
        except ValueError:
            message = response.text
        raise Refused(f"the stand-in refused it ({response.status_code}): {message}")
    data = response.json()
    return data if isinstance(data, dict) else {}
