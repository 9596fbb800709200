"""``stackbot series graph --from-json FILE [--json] [--repo owner/name]``.

Reads a JSON list of PR records, prints their series graph (JSON with ``--json``, else text)
and exits 0 when it found no problem, 1 when it found problems, 2 on bad input.

Record fields: ``number`` (required), ``title``, ``author``, ``state`` (``open``/``closed``;
``closed`` by default when ``merged`` is true), ``merged``, ``draft``, ``head_ref``,
``head_sha``, ``head_repo``, ``base_ref`` (default ``main``), ``base_sha``, ``body``, ``stack``
(GitHub's stack object or null), ``commits`` (``[{sha, message, parents}]``; a parent may also
be ``{"sha": ...}`` as GitHub lists them) and ``comments`` (``[{author, body, id, kind}]``,
``kind`` ``comment`` by default or ``review`` for a review's body, ``author_association`` as
GitHub gives it: ``OWNER``, ``MEMBER`` and ``COLLABORATOR`` are maintainers). Missing
or null fields take their defaults; other fields are ignored.

Dependencies are read from the title, the body and the author's own comments (``author`` must
be given for those to count) and from maintainers' comments; other people's dependency sentences
are listed as suggestions; ``/stackbot depends-on #N`` and ``/stackbot no-dependency #N`` in the author's
comments are applied as overrides (offline nobody is known to be a vetter).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from stackbot.domain.commands import DependsOn, NoDependency, parse_command
from stackbot.domain.records import CommentRecord, CommitRecord, NativeStack, PrRecord
from stackbot.domain.series import DependencyOverride, SeriesGraph, build_series_graph
from stackbot.domain.types import PrNumber
from stackbot.errors import BadInput

EXIT_CLEAN = 0
EXIT_PROBLEMS = 1

T = TypeVar("T")


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("series", help="series of dependent PRs")
    series_sub = parser.add_subparsers(dest="series_command", metavar="ACTION", required=True)
    graph = series_sub.add_parser(
        "graph",
        help="the dependency graph of a list of PR records",
        description="Print the dependency graph, stacks and series order of PR records; exit "
        "status 0 when no problem is found, 1 when problems are, 2 on bad input.",
    )
    graph.add_argument(
        "--from-json", required=True, metavar="FILE", help="JSON list of PR records ('-': stdin)"
    )
    graph.add_argument("--json", action="store_true", help="print the graph as JSON")
    graph.add_argument(
        "--repo",
        metavar="OWNER/NAME",
        help="the repository the PRs belong to (default: STACKBOT_REPO); references to other "
        "repositories are listed as external",
    )
    graph.set_defaults(handler=_graph)


def _graph(args: argparse.Namespace) -> int:
    repo = _repository(args.repo)
    source = "stdin" if args.from_json == "-" else args.from_json
    records = pr_records_from_json(_read_json(args.from_json), source=source)
    graph = build_series_graph(records, repo=repo, overrides=overrides_in_comments(records))
    if args.json:
        print(json.dumps(graph.to_json(), indent=2))
    else:
        print(render_text(graph, records, repo=repo))
    return EXIT_PROBLEMS if graph.problems else EXIT_CLEAN


def _repository(option: str | None) -> str | None:
    if option is None:
        from stackbot.config import load_settings

        try:
            return load_settings().repo
        except (ValueError, OSError) as error:  # pydantic's ValidationError is a ValueError
            raise BadInput(f"the settings are invalid: {error}") from None
    owner, slash, name = option.partition("/")
    if not slash or not owner or not name or "/" in name:
        raise BadInput(f"--repo must be 'owner/name', got {option!r}")
    return option


def _read_json(path: str) -> object:
    try:
        text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise BadInput(f"cannot read {path}: {error}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise BadInput(f"{path} is not valid JSON: {error}") from None
    except RecursionError:
        raise BadInput(f"{path} is nested too deeply to read") from None


def overrides_in_comments(records: list[PrRecord]) -> list[DependencyOverride]:
    """``/stackbot depends-on #N`` / ``no-dependency #N`` in each PR's author's own comments, in
    order (offline there is no telling who is a vetter: only the author's count)."""
    found: list[DependencyOverride] = []
    for record in records:
        me = record.author.lower()
        for comment in record.comments:
            if not me or comment.author.lower() != me:
                continue
            command = parse_command(comment.body)
            if isinstance(command, DependsOn | NoDependency) and command.parent != record.number:
                found.append(
                    DependencyOverride(
                        child=record.number,
                        parent=PrNumber(command.parent),
                        kind="depends_on" if isinstance(command, DependsOn) else "no_dependency",
                        by=comment.author,
                        comment_id=comment.id,
                        text=command.line,
                    )
                )
    return found


# -- records from JSON ------------------------------------------------------------------------


def pr_records_from_json(data: object, *, source: str = "input") -> list[PrRecord]:
    """PR records from decoded JSON; :class:`BadInput` names the record and field at fault."""
    if not isinstance(data, list):
        raise BadInput(f"{source} must hold a JSON list of PR records, not {_kind(data)}")
    records: list[PrRecord] = []
    seen: dict[int, int] = {}
    for index, item in enumerate(data):
        record = _record(item, f"{source}: record {index}")
        if record.number in seen:
            raise BadInput(
                f"{source}: records {seen[record.number]} and {index} are both PR "
                f"#{record.number}; give each PR one record"
            )
        seen[record.number] = index
        records.append(record)
    return records


def _record(item: object, where: str) -> PrRecord:
    fields = _object(item, where)
    if fields.get("number") is None:
        raise BadInput(f"{where}: 'number' is missing; every record needs the PR number")
    number = _positive(fields["number"], f"{where}: 'number'")
    where = f"{where} (#{number})"
    merged = _field(fields, "merged", bool, False, where)
    state = _field(fields, "state", str, "closed" if merged else "open", where)
    if state not in ("open", "closed"):
        raise BadInput(f'{where}: \'state\' must be "open" or "closed", not {state!r}')
    if merged and state == "open":
        raise BadInput(f"{where}: 'merged' is true but 'state' is \"open\"; a merged PR is closed")
    return PrRecord(
        number=PrNumber(number),
        title=_field(fields, "title", str, "", where),
        author=_field(fields, "author", str, "", where),
        state=state,
        merged=merged,
        draft=_field(fields, "draft", bool, False, where),
        head_ref=_field(fields, "head_ref", str, "", where),
        head_sha=_field(fields, "head_sha", str, "", where),
        head_repo=_field(fields, "head_repo", str, None, where),
        base_ref=_field(fields, "base_ref", str, "main", where),
        base_sha=_field(fields, "base_sha", str, "", where),
        body=_field(fields, "body", str, "", where),
        stack=_stack(fields.get("stack"), f"{where}: 'stack'"),
        commits=tuple(_items(fields, "commits", _commit, where)),
        comments=tuple(_items(fields, "comments", _comment, where)),
    )


def _stack(value: object, where: str) -> NativeStack | None:
    if value is None:
        return None
    fields = _object(value, where)
    base = _object(fields.get("base") or {}, f"{where}.base")
    return NativeStack(
        id=_field(fields, "id", int, None, where),
        number=_field(fields, "number", int, None, where),
        size=_field(fields, "size", int, None, where),
        position=_field(fields, "position", int, None, where),
        base_ref=_field(base, "ref", str, "", f"{where}.base"),
        base_sha=_field(base, "sha", str, "", f"{where}.base"),
    )


def _commit(value: object, where: str) -> CommitRecord:
    fields = _object(value, where)
    message = fields.get("message")
    nested = fields.get("commit")
    if message is None and isinstance(nested, Mapping):
        message = nested.get("message")  # GitHub's list-commits shape
    parents = _list(fields.get("parents"), f"{where}: 'parents'")
    return CommitRecord(
        sha=_field(fields, "sha", str, "", where),
        message=_field({"message": message}, "message", str, "", where),
        parents=tuple(
            _parent_sha(parent, f"{where}: parent {i}") for i, parent in enumerate(parents)
        ),
    )


def _parent_sha(value: object, where: str) -> str:
    if isinstance(value, Mapping):
        return _field(value, "sha", str, "", where)
    if not isinstance(value, str):
        raise BadInput(f'{where} must be a SHA string or {{"sha": ...}}, not {_kind(value)}')
    return value


def _comment(value: object, where: str) -> CommentRecord:
    fields = _object(value, where)
    return CommentRecord(
        author=_field(fields, "author", str, "", where),
        body=_field(fields, "body", str, "", where),
        id=_field(fields, "id", int, None, where),
        kind=_comment_kind(fields, where),
        author_association=_field(fields, "author_association", str, "NONE", where),
    )


def _comment_kind(fields: Mapping[str, object], where: str) -> str:
    kind = _field(fields, "kind", str, "comment", where)
    if kind not in ("comment", "review"):
        raise BadInput(f'{where}: \'kind\' must be "comment" or "review", not {kind!r}')
    return kind


def _items(
    fields: Mapping[str, object], name: str, parse: Callable[[object, str], T], where: str
) -> list[T]:
    values = _list(fields.get(name), f"{where}: '{name}'")
    return [parse(value, f"{where}: {name}[{index}]") for index, value in enumerate(values)]


def _field(fields: Mapping[str, object], name: str, kind: type[T], default: T, where: str) -> T:
    value = fields.get(name)
    if value is None:
        return default
    # bool is an int in Python, never in JSON: true is not a PR number.
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise BadInput(f"{where}: '{name}' must be {_JSON_KIND[kind]}, not {_kind(value)}")
    return value


def _positive(value: object, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise BadInput(f"{where} must be a positive integer, not {_kind(value)}")
    return value


def _object(value: object, where: str) -> Mapping[str, object]:
    if not isinstance(value, dict):
        raise BadInput(f"{where} must be a JSON object, not {_kind(value)}")
    return value


def _list(value: object, where: str) -> list[object]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise BadInput(f"{where} must be a JSON list, not {_kind(value)}")
    return value


_JSON_KIND: dict[type, str] = {str: "a string", bool: "true or false", int: "an integer"}


def _kind(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"{str(value).lower()} (a boolean)"
    if isinstance(value, int | float):
        return f"{value} (a number)"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return f"{json.dumps(shown)} (a string)"
    if isinstance(value, list):
        return "a list"
    return "an object"


# -- text rendering ---------------------------------------------------------------------------


def render_text(graph: SeriesGraph, records: list[PrRecord], *, repo: str | None) -> str:
    """The graph for a reader: series and their order, stacks, edges, problems, external refs."""
    arrow = _arrow()
    states: dict[int, str] = {record.number: _state_note(record, graph) for record in records}
    lines = [_summary(graph, records)]
    for info in graph.series:
        lines += ["", f"series {info.key}: {' '.join(f'#{pr}' for pr in info.prs)}"]
        lines.append(f"  order: {_chain(info.order, arrow) or '(nothing open)'}")
    lines += ["", "parents:"]
    for pr, parents in graph.live_parents():
        shown = ", ".join(f"#{parent}" for parent in parents) or "(none)"
        lines.append(f"  #{pr}{states[pr]}: {shown}")
    lines += ["", "stacks (each once: those of the PRs no other PR depends on):"]
    for pr in graph.stack_tips():
        lines.append(f"  #{pr}{states[pr]}: {_chain(graph.stacks[pr], arrow)}")
    if graph.edges:
        lines += ["", "edges:"]
        for e in graph.edges:
            lines.append(f"  #{e.child} depends on #{e.parent} ({e.source})")
            if e.text:
                where = f"{e.origin}: " if e.origin else ""
                lines.append(f"    {where}{_one_line(e.text)}")
    if graph.problems:
        lines += ["", f"problems ({len(graph.problems)}):"]
        for problem in graph.problems:
            detail = problem.detail.replace("→", arrow)
            lines.append(f"  {problem.kind} [{' '.join(f'#{pr}' for pr in problem.prs)}]: {detail}")
    if graph.suggestions:
        lines += ["", "suggested by others (not acted on):"]
        lines += [
            f"  #{s.child} after #{s.parent} ({s.origin}): {_one_line(s.text)}"
            for s in graph.suggestions
        ]
    if graph.supersessions:
        lines += ["", "superseded:"]
        lines += [f"  #{s.pr} by #{s.by} ({s.origin})" for s in graph.supersessions]
    if graph.external:
        lines += ["", "references to other repositories (not followed):"]
        lines += [f"  #{ref.child} names {ref.ref}" for ref in graph.external]
        if repo is None:
            lines.append(
                "  (no repository configured: pass --repo owner/name or set STACKBOT_REPO)"
            )
    return "\n".join(lines)


def _one_line(text: str) -> str:
    flat = " / ".join(line.strip() for line in text.splitlines() if line.strip())
    return flat if len(flat) <= 100 else flat[:99] + "…"


def _summary(graph: SeriesGraph, records: list[PrRecord]) -> str:
    counts = [
        _count(len(graph.series), "series", "series"),
        _count(len(records), "PR", "PRs"),
        _count(len(graph.edges), "edge", "edges"),
        _count(len(graph.problems), "problem", "problems") if graph.problems else "no problems",
    ]
    return ", ".join(counts)


def _count(value: int, one: str, many: str) -> str:
    return f"{value} {one if value == 1 else many}"


def _state_note(record: PrRecord, graph: SeriesGraph) -> str:
    if record.merged:
        return " (merged)"
    if record.number in graph.superseded:
        return f" (superseded by #{graph.superseded[record.number]})"
    if not record.is_open:
        return " (closed)"
    return " (draft)" if record.draft else ""


def _chain(prs: tuple[PrNumber, ...] | list[PrNumber], arrow: str) -> str:
    return f" {arrow} ".join(f"#{pr}" for pr in prs)


def _arrow() -> str:
    """→ where the terminal can show it, else ->; a narrow locale must not crash the command."""
    try:
        "→".encode(sys.stdout.encoding or "ascii")
    except (UnicodeEncodeError, LookupError):
        return "->"
    return "→"
