"""What ``stackbot port`` and ``stackbot restack`` share: both take one PR's change onto another
branch in stackbot's mirror and write one ref there, so both read ``--repo``, ``--pr N=REF``,
where the change starts, ``--onto`` and ``--json``, and print the same way."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol, TypeVar

from stackbot.adapters.git import GitMirror
from stackbot.cli.integrate import (
    _pr_ref,
    exit_on_failure,
    mirror_and_allowlist,
    settings_or_bad_input,
)
from stackbot.domain.types import PrNumber
from stackbot.services.tree_allowlist import TreeAllowlist


class OntoResult(Protocol):
    """A port's or a restack's result, as the command prints it."""

    @property
    def ref_name(self) -> str | None: ...

    @property
    def exit_code(self) -> int: ...

    def to_json(self) -> dict[str, Any]: ...


R = TypeVar("R", bound=OntoResult)


@dataclass(frozen=True)
class OntoRequest:
    """The command line's request: PR ``pr`` at ``head_ref``, its change starting at
    ``start_ref``, to go onto ``onto_ref``."""

    pr: PrNumber
    head_ref: str
    start_ref: str
    onto_ref: str
    generated_files: Sequence[str]


Work = Callable[[GitMirror, OntoRequest, TreeAllowlist], R]


def register_onto_command(
    subparsers: Any,
    name: str,
    *,
    doc: str | None,
    help: str,
    pr_help: str,
    start: tuple[str, str],
    onto_help: str,
    work: Work[R],
    render: Callable[[R], str],
) -> None:
    """Add command ``name``: ``--repo``, ``--pr``, ``start`` (the flag that says where the PR's
    change starts, and its help), ``--onto`` and ``--json``. It runs ``work`` in the mirror and
    prints its result with ``render``; failures are exit 2 (:func:`exit_on_failure`). Its
    description is ``doc`` past the usage line."""
    parser = subparsers.add_parser(
        name,
        help=help,
        description=doc.split("\n\n", 1)[1].replace("``", "") if doc else None,
    )
    parser.add_argument("--repo", required=True, metavar="PATH_OR_URL", help="the repository")
    parser.add_argument("--pr", required=True, type=_pr_ref, metavar="N=REF", help=pr_help)
    flag, flag_help = start
    parser.add_argument(flag, dest="start_ref", required=True, metavar="REF", help=flag_help)
    parser.add_argument("--onto", required=True, metavar="REF", help=onto_help)
    parser.add_argument("--json", action="store_true", help="print the result as JSON")
    parser.set_defaults(
        handler=lambda args: exit_on_failure(name, partial(_run, work=work, render=render), args)
    )


def _run(args: argparse.Namespace, *, work: Work[R], render: Callable[[R], str]) -> int:
    """Fetch what the request names into the mirror of ``--repo``, do ``work`` there (under
    the mirror's shared lock), print its result (``--json`` or ``render``; in text, how to
    fetch the ref it wrote) and return its exit status."""
    settings = settings_or_bad_input()
    number, head_ref = args.pr
    request = OntoRequest(number, head_ref, args.start_ref, args.onto, settings.generated_files)
    refs = [head_ref, request.start_ref, request.onto_ref]
    with mirror_and_allowlist(args.repo, settings, refs) as (mirror, allowlist):
        result = work(mirror, request, allowlist)
    print(json.dumps(result.to_json(), indent=2) if args.json else render(result))
    if not args.json and result.ref_name:
        # The commit is in stackbot's mirror, not in --repo: say how to bring it over.
        print(f"to fetch it: git fetch {shlex.quote(str(mirror.git_dir))} {result.ref_name}")
    return result.exit_code


def say(line: str) -> None:
    """Progress, on stderr (stdout is the result)."""
    print(line, file=sys.stderr, flush=True)
