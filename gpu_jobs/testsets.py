"""Test sets: named pytest targets and the shapes they run on, read from TOML.

The built-in file is ``gpu_jobs/testsets.toml``; a deployment may point at its own. Every error
names the file and the field, e.g. ``stackbot-tests.toml: test_sets.amax-group.shapes[1]``.
"""

from __future__ import annotations

import dataclasses
import re
import sys
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from gpu_jobs._fields import ContractError, FieldReader, parse_version
from gpu_jobs.infra_signatures import InfraSignature, combine, parse_signatures
from gpu_jobs.spec import JobSpec, LauncherOptions, Shape, check_conventions, target_contains

BUILTIN_TEST_SETS = Path(__file__).with_name("testsets.toml")
NODE_CHECK_TARGET = "suites/node_check/test_node_check.py"
_KNOWN_KEYS = {"description", "shapes", "timeout_s", "megatron_targets", "reference_targets"}
_KNOWN_KEYS |= {"env", "container_image", "setup_commands"}
_KNOWN_KEYS |= {"markers", "tolerated_markers", "min_world_size"}
_OWN_KEYS = {"roots", "default_shapes", "rules", "timeout_s", "env", "container_image"}
_OWN_KEYS |= {"setup_commands", "markers", "tolerated_markers", "min_world_size"}
# How users name a PR's own test files: ``own:8035`` (``/stackbot retest own:8035``, the
# PR's rows); jobs stored before own test files were batched carry such a name too.
OWN_PREFIX = "own:"
# The test-set name of the one job per shape that runs the own test files of every PR a tested
# tree holds (see :class:`OwnTests`); each PR's results are split out of it by file.
OWN_TEST_SET = "own"


class TestSetError(ContractError):
    """A test-set file that cannot be used; the message names the file and the field."""

    __test__ = False

    def __init__(self, path: Path, field: str, problem: str) -> None:
        ValueError.__init__(self, f"{path}: {field}: {problem}")
        self.path = path
        self.field = field
        self.problem = problem


@dataclass(frozen=True)
class TestSet:
    __test__ = False  # not a pytest test class

    name: str
    shapes: tuple[Shape, ...]
    megatron_targets: tuple[str, ...]
    reference_targets: tuple[str, ...]
    timeout_s: float = 3600.0
    env: dict[str, str] = field(default_factory=dict)
    container_image: str | None = None
    setup_commands: tuple[str, ...] = ()
    description: str = ""
    # Test conventions (see gpu_jobs.conventions): pytest -m expression, tolerated markers,
    # ranks each target needs.
    markers: str | None = None
    tolerated_markers: tuple[str, ...] = ()
    min_world_size: dict[str, int] = field(default_factory=dict)
    # The file's infrastructure signatures (gpu_jobs.infra_signatures); None: the built-in list.
    infra_signatures: tuple[InfraSignature, ...] | None = None

    def conventions(self) -> dict[str, object]:
        """The conventions that are set (what makes two jobs of this test set differ, beside
        its targets, env and shapes)."""
        found: dict[str, object] = {}
        if self.markers is not None:
            found["markers"] = self.markers
        if self.tolerated_markers:
            found["tolerated_markers"] = list(self.tolerated_markers)
        if self.min_world_size:
            found["min_world_size"] = dict(sorted(self.min_world_size.items()))
        return found

    def targets(self, reference: bool) -> tuple[str, ...]:
        return self.reference_targets if reference else self.megatron_targets

    def job_spec(
        self,
        *,
        job_id: str,
        shape: Shape | str,
        reference: bool = False,
        repo_url: str | None = None,
        commit: str | None = None,
        checkout: str | None = None,
        launcher: LauncherOptions | None = None,
        node_check: bool = True,
        timeout_s: float | None = None,
        exclude_nodes: tuple[str, ...] = (),
    ) -> JobSpec:
        """The job that runs this test set on ``shape`` (which must be one of its shapes)."""
        shape = Shape.parse(shape) if isinstance(shape, str) else shape
        if shape not in self.shapes:
            runs_on = ", ".join(str(s) for s in self.shapes)
            raise ContractError("shape", f"test set {self.name!r} runs on {runs_on}, not {shape}")
        return JobSpec(
            job_id=job_id,
            test_set=self.name,
            targets=self.targets(reference),
            shape=shape,
            repo_url=repo_url,
            commit=commit,
            checkout=checkout,
            reference=reference,
            timeout_s=timeout_s if timeout_s is not None else self.timeout_s,
            env=dict(self.env),
            launcher=launcher or LauncherOptions(),
            node_check=node_check,
            setup_commands=self.setup_commands,
            container_image=self.container_image,
            markers=self.markers,
            tolerated_markers=self.tolerated_markers,
            min_world_size=dict(self.min_world_size),
            exclude_nodes=exclude_nodes,
            infra_signatures=self.infra_signatures,
        )


@dataclass(frozen=True)
class OwnRule:
    """Test files whose path matches ``glob`` run on ``shapes``."""

    glob: str
    shapes: tuple[Shape, ...]

    def matches(self, path: str) -> bool:
        return glob_match(self.glob, path)


@dataclass(frozen=True)
class OwnTests:
    """How a PR's own test files run: the test files it adds or modifies under ``roots`` run
    beside the configured test sets, on the shapes of the first rule whose glob matches the
    file (else ``default_shapes``), and are compared with main file by file."""

    __test__ = False

    roots: tuple[str, ...] = ("tests/unit_tests",)
    default_shapes: tuple[Shape, ...] = (Shape(1, 4),)
    rules: tuple[OwnRule, ...] = ()
    timeout_s: float = 3600.0  # per own test file: a batched job gets this times its files
    env: dict[str, str] = field(default_factory=dict)
    container_image: str | None = None
    setup_commands: tuple[str, ...] = ()
    markers: str | None = None
    tolerated_markers: tuple[str, ...] = ()
    # { "TARGET" = RANKS }: files under a target written for that many ranks (Megatron's unit
    # tests: 8). Such a file runs only on shapes with at least that many ranks (see shapes_for).
    min_world_size: dict[str, int] = field(default_factory=dict)
    infra_signatures: tuple[InfraSignature, ...] | None = None

    def is_test_file(self, path: str) -> bool:
        """A pytest file (``test_*.py`` or ``*_test.py``) under one of the roots."""
        name = path.rsplit("/", 1)[-1]
        if not name.endswith(".py") or not (name.startswith("test_") or name.endswith("_test.py")):
            return False
        return any(path.startswith(root.rstrip("/") + "/") for root in self.roots)

    def shapes_for(self, path: str) -> tuple[Shape, ...]:
        """The shapes ``path`` runs on: its rule's (else the default ones) that have the ranks
        its tests need; when none has, the smallest shape of that many ranks on the widest
        nodes those shapes use (8 ranks on 4-GPU nodes: 2x4; on 8-GPU nodes: 1x8). A file is
        never run on fewer ranks than it needs."""
        shapes = next((rule.shapes for rule in self.rules if rule.matches(path)), None)
        shapes = shapes or self.default_shapes
        needs = self.ranks_needed(path)
        if needs is None:
            return shapes
        enough = tuple(shape for shape in shapes if shape.world_size >= needs)
        if enough:
            return enough
        gpus = max(shape.gpus_per_node for shape in shapes)
        return (Shape(-(-needs // gpus), gpus),)

    def ranks_needed(self, path: str) -> int | None:
        """The ranks the tests of ``path`` need (the largest of the targets holding it)."""
        found = [n for target, n in self.min_world_size.items() if target_contains(target, path)]
        return max(found) if found else None

    def test_set(self, targets: tuple[str, ...], shape: Shape | str) -> TestSet:
        """The batched test set ``own`` of the own files ``targets`` (of every PR a tree holds
        whose files run on ``shape``) on ``shape``."""
        shape = Shape.parse(shape) if isinstance(shape, str) else shape
        return TestSet(
            name=OWN_TEST_SET,
            shapes=(shape,),
            megatron_targets=tuple(targets),
            reference_targets=(),
            timeout_s=self.timeout_s,
            env=dict(self.env),
            container_image=self.container_image,
            setup_commands=self.setup_commands,
            description="the test files the tree's PRs add or modify",
            markers=self.markers,
            tolerated_markers=self.tolerated_markers,
            min_world_size=dict(self.min_world_size),
            infra_signatures=self.infra_signatures,
        )


def own_test_set_name(pr: int) -> str:
    return f"{OWN_PREFIX}{pr}"


def is_own_test_set(name: str) -> bool:
    """Whether the test set ``name`` runs PRs' own test files: the batched ``own`` job, or
    ``own:N`` (PR N's, as users name them and as jobs stored before batching were named)."""
    return name == OWN_TEST_SET or own_test_set_pr(name) is not None


def own_test_set_pr(name: str) -> int | None:
    """The PR that ``own:N`` names (None: another name; the batched ``own`` job has files of
    several PRs: :func:`is_own_test_set` says it runs own test files)."""
    number = name[len(OWN_PREFIX) :]
    # ASCII digits only: str.isdigit() also takes "²" (which int() refuses) and "٣" (which it
    # reads as 3), and these names come from PR comments too.
    if not name.startswith(OWN_PREFIX) or not (number.isascii() and number.isdigit()):
        return None
    return int(number)


def glob_match(pattern: str, path: str) -> bool:
    """``pattern`` matches the whole ``path``: ``*`` and ``?`` stay inside one directory,
    ``**/`` stands for any number of directories (none included)."""
    return _glob_regex(pattern).fullmatch(path) is not None


def _glob_regex(pattern: str) -> re.Pattern[str]:
    out, i = [], 0
    while i < len(pattern):
        if pattern.startswith("**/", i):
            out.append("(?:[^/]*/)*")
            i += 3
        elif pattern.startswith("**", i):
            out.append(".*")
            i += 2
        elif pattern[i] == "*":
            out.append("[^/]*")
            i += 1
        elif pattern[i] == "?":
            out.append("[^/]")
            i += 1
        else:
            out.append(re.escape(pattern[i]))
            i += 1
    return re.compile("".join(out))


def load_own_tests(path: Path | str | None = None) -> OwnTests | None:
    """The ``[own_tests]`` table of ``path`` (None: the built-in file); None when the file has
    none (a PR's own test files are then not run)."""
    path = Path(path) if path is not None else BUILTIN_TEST_SETS
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise TestSetError(path, "<file>", f"cannot be read: {exc.strerror or exc}") from None
    return parse_own_tests(text, path)


def parse_own_tests(text: str, path: Path) -> OwnTests | None:
    data = _parse_toml(text, path)
    if data.get("own_tests") is None:
        return None
    try:
        own = _own_tests(data["own_tests"])
        return dataclasses.replace(own, infra_signatures=_file_signatures(data, path))
    except TestSetError:
        raise
    except ContractError as exc:
        raise TestSetError(path, exc.field, exc.problem) from None


def _own_tests(body: Any) -> OwnTests:
    r = FieldReader(body, "own_tests")
    unknown = sorted(set(body) - _OWN_KEYS)
    if unknown:
        raise ContractError(r.name(unknown[0]), "is not a known own_tests field (misspelt?)")
    roots = r.texts("roots", ("tests/unit_tests",))
    if not roots:
        raise ContractError(r.name("roots"), "must list at least one directory")
    for i, root in enumerate(roots):
        if not root.strip("/") or root.startswith("/") or ".." in root.split("/"):
            raise ContractError(f"{r.name('roots')}[{i}]", f"{root!r} is not a relative directory")
    defaults = _shapes(r, "default_shapes", ("1x4",))
    rules = []
    for rule in r.objects("rules"):
        glob = rule.text("glob")
        if not glob.strip():
            raise ContractError(rule.name("glob"), "must not be empty")
        rules.append(OwnRule(glob, _shapes(rule, "shapes", ())))
        rule.refuse_unknown()
    timeout_s = r.number("timeout_s", 3600.0)
    if timeout_s <= 0:
        raise ContractError(r.name("timeout_s"), "must be positive")
    markers, tolerated = r.opt_text("markers"), r.texts("tolerated_markers")
    min_world_size = r.count_map("min_world_size")
    check_conventions(markers, tolerated, min_world_size, "own_tests.")
    return OwnTests(
        roots=tuple(root.strip("/") for root in roots),
        default_shapes=defaults,
        rules=tuple(rules),
        timeout_s=timeout_s,
        env=r.text_map("env"),
        container_image=r.opt_text("container_image") or None,
        setup_commands=r.texts("setup_commands"),
        markers=markers,
        tolerated_markers=tolerated,
        min_world_size=min_world_size,
    )


def _shapes(r: FieldReader, key: str, default: tuple[str, ...]) -> tuple[Shape, ...]:
    texts = r.texts(key, default)
    if not texts:
        raise ContractError(r.name(key), "must list at least one shape such as '1x4'")
    return tuple(Shape.parse(s, f"{r.name(key)}[{i}]") for i, s in enumerate(texts))


def load_test_sets(path: Path | str | None = None) -> dict[str, TestSet]:
    """Test sets by name from ``path`` (None: the built-in file)."""
    path = Path(path) if path is not None else BUILTIN_TEST_SETS
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise TestSetError(path, "<file>", f"cannot be read: {exc.strerror or exc}") from None
    return parse_test_sets(text, path)


def get_test_set(name: str, path: Path | str | None = None) -> TestSet:
    sets = load_test_sets(path)
    if name not in sets:
        known = ", ".join(sorted(sets)) or "none"
        raise ContractError("test_set", f"unknown test set {name!r} (known: {known})")
    return sets[name]


def parse_test_sets(text: str, path: Path) -> dict[str, TestSet]:
    data = _parse_toml(text, path)
    try:
        root = FieldReader(data)
        parse_version(root.text("schema_version", "1.0"), "schema_version", 1)
        sets_table = root.raw("test_sets")
        root.raw("own_tests")  # read by parse_own_tests
        root.raw("infra_signatures")  # read by _file_signatures
        root.raw("disabled_infra_signatures")
        if not isinstance(sets_table, dict) or not sets_table:
            raise ContractError("test_sets", "needs at least one [test_sets.NAME] table")
        signatures = _file_signatures(data, path)
        root.refuse_unknown()
        return {
            name: dataclasses.replace(_test_set(name, body), infra_signatures=signatures)
            for name, body in sets_table.items()
        }
    except TestSetError:
        raise
    except ContractError as exc:
        raise TestSetError(path, exc.field, exc.problem) from None


def _test_set(name: str, body: Any) -> TestSet:
    r = FieldReader(body, f"test_sets.{name}")
    if name == OWN_TEST_SET or name.startswith(OWN_PREFIX):
        raise ContractError(
            f"test_sets.{name}", "is reserved for PRs' own test files ([own_tests]): rename it"
        )
    unknown = sorted(set(body) - _KNOWN_KEYS) if isinstance(body, dict) else []
    if unknown:
        raise ContractError(r.name(unknown[0]), "is not a known test-set field (misspelt?)")
    shape_texts = r.texts("shapes")
    if not shape_texts:
        raise ContractError(r.name("shapes"), "must list at least one shape such as '1x4'")
    shapes = tuple(Shape.parse(s, f"{r.name('shapes')}[{i}]") for i, s in enumerate(shape_texts))
    megatron, reference = r.texts("megatron_targets"), r.texts("reference_targets")
    if not megatron and not reference:
        raise ContractError(r.name("megatron_targets"), "a test set needs targets")
    timeout_s = r.number("timeout_s", 3600.0)
    if timeout_s <= 0:
        raise ContractError(r.name("timeout_s"), "must be positive")
    markers, tolerated = r.opt_text("markers"), r.texts("tolerated_markers")
    min_world_size = r.count_map("min_world_size")
    check_conventions(markers, tolerated, min_world_size, f"test_sets.{name}.")
    for target in min_world_size:
        if not any(target_contains(t, target) for t in (*megatron, *reference)):
            raise ContractError(
                f"{r.name('min_world_size')}.{target}",
                "is not one of the test set's targets (nor inside one)",
            )
    return TestSet(
        name=name,
        shapes=shapes,
        megatron_targets=megatron,
        reference_targets=reference,
        timeout_s=timeout_s,
        env=r.text_map("env"),
        container_image=r.opt_text("container_image") or None,
        setup_commands=r.texts("setup_commands"),
        description=r.text("description", ""),
        markers=markers,
        tolerated_markers=tolerated,
        min_world_size=min_world_size,
    )


def _file_signatures(data: dict[str, Any], path: Path) -> tuple[InfraSignature, ...]:
    """The built-in infrastructure signatures extended by this file's ``[[infra_signatures]]``,
    less its ``disabled_infra_signatures``."""
    root = FieldReader(data)
    own = parse_signatures(root.objects("infra_signatures"))
    disabled = root.texts("disabled_infra_signatures")
    builtin = () if _is_builtin(path) else builtin_infra_signatures()
    return combine(builtin, own, disabled)


def _is_builtin(path: Path) -> bool:
    try:
        return path.resolve() == BUILTIN_TEST_SETS.resolve()
    except OSError:
        return False


@cache
def builtin_infra_signatures() -> tuple[InfraSignature, ...]:
    """The built-in file's infrastructure signatures (Megatron-LM's, and the rest)."""
    path = BUILTIN_TEST_SETS
    data = _parse_toml(path.read_text(encoding="utf-8"), path)
    try:
        return _file_signatures(data, path)
    except ContractError as exc:
        raise TestSetError(path, exc.field, exc.problem) from None


def _parse_toml(text: str, path: Path) -> dict[str, Any]:
    if sys.version_info >= (3, 11):  # noqa: UP036 - GPU nodes may run Python 3.10
        import tomllib
    else:  # pragma: no cover - nodes on Python 3.10
        try:
            import tomli as tomllib
        except ImportError:
            raise TestSetError(
                path, "<file>", "reading TOML on Python 3.10 needs `pip install tomli`"
            ) from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TestSetError(path, "<toml>", f"is not valid TOML: {exc}") from None
