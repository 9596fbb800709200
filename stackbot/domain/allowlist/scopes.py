"""The current checker generation: each call's root name resolved through scopes.

The rules (DESIGN.md, "Facts about the target repository") are Python's scoping simplified the
way the checker simplifies it, and stackbot must agree with that checker, not with Python:

- A scope that binds the root name resolves it to the most recent *import* before the call; a
  later import or any non-import binding does not hide it, and a bound name with no earlier
  import is a local value.
- Otherwise the nearest enclosing function or module scope that binds the name decides, with the
  last import of the name anywhere in that scope; class bodies never enclose what is nested in
  them. List, set and dict comprehensions see that scope as of their own position instead.
- A root name no scope binds stands for itself.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from stackbot.domain.allowlist.accessors import is_accessor
from stackbot.domain.allowlist.model import Generation

Position = tuple[int, int]  # (line, column) of a node, compared in source order
# Parameters and comprehension targets are bound before anything in their scope runs.
_BOUND_ON_ENTRY: Position = (0, -1)

ACCESSOR_MODULES = ("megatron.core.parallel_state", "megatron.core.mpu")
SHIM = "megatron.core.process_groups_config.ProcessGroupCollection.use_mpu_process_groups"
# Relative imports of these modules mean megatron.core's, from whatever depth.
_CORE_RELATIVE_MODULES = ("", "parallel_state", "process_groups_config")


@dataclass(frozen=True)
class _Binding:
    position: Position
    target: str  # the dotted name an import binds; "" for any other binding (a local value)


Bindings = dict[str, list[_Binding]]


class _ScopeKind(Enum):
    MODULE = "module"
    FUNCTION = "function"
    CLASS = "class"
    EXPRESSION = "expression"  # lambda or comprehension


@dataclass
class _Scope:
    kind: _ScopeKind
    inherited: Mapping[str, str]  # what names mean here when this scope does not bind them
    bindings: Bindings
    _nested_view: dict[str, str] | None = field(default=None, repr=False)

    def view_for_nested(self, position: Position | None) -> Mapping[str, str]:
        """What a scope nested in this one inherits: this scope's imports (all of them, or those
        before ``position``) over what this scope inherited."""
        if position is not None:
            return self._view(lambda events: _import_before(events, position))
        if self._nested_view is None:
            self._nested_view = self._view(_last_import)
        return self._nested_view

    def _view(self, meaning: Callable[[list[_Binding]], str]) -> dict[str, str]:
        view = dict(self.inherited)
        view.update((name, meaning(events)) for name, events in self.bindings.items())
        return view


def _import_before(events: Iterable[_Binding], position: Position) -> str:
    earlier = [b for b in events if b.target and b.position < position]
    return max(earlier, key=lambda b: b.position).target if earlier else ""


def _last_import(events: Iterable[_Binding]) -> str:
    imports = [b for b in events if b.target]
    return max(imports, key=lambda b: b.position).target if imports else ""


def import_source(node: ast.ImportFrom) -> str:
    module = node.module or ""
    if node.level and module in _CORE_RELATIVE_MODULES:
        return "megatron.core" + (f".{module}" if module else "")
    return module


# Nodes with nothing under them a scan looks at: no call, scope or binding.
_LEAVES = (ast.expr_context, ast.operator, ast.unaryop, ast.cmpop, ast.boolop, ast.Constant)


class _Walker(ast.NodeVisitor):
    """``ast.NodeVisitor`` without most of its cost per node (the scan's largest): methods
    looked up once per node type, fields read directly, leaves never entered."""

    _methods: dict[type[ast.AST], Callable[[Any, Any], None]]

    def __init_subclass__(cls) -> None:
        super().__init_subclass__()
        cls._methods = {}

    def visit(self, node: ast.AST) -> None:
        kind = type(node)
        if kind not in self._methods:
            self._methods[kind] = (
                _skip
                if issubclass(kind, _LEAVES)
                else getattr(type(self), f"visit_{kind.__name__}", type(self).generic_visit)
            )
        self._methods[kind](self, node)

    def generic_visit(self, node: ast.AST) -> None:
        visit = self.visit
        for name in node._fields:
            value = getattr(node, name, None)
            if type(value) is list:
                for item in value:
                    if isinstance(item, ast.AST):
                        visit(item)
            elif isinstance(value, ast.AST):
                visit(value)


def _skip(visitor: Any, node: Any) -> None:
    pass


class _BindingCollector(_Walker):
    """The names one scope binds, without entering the scopes nested in it."""

    def __init__(self) -> None:
        self.bindings: Bindings = {}

    def bind(self, name: str, node: ast.stmt | ast.expr, target: str) -> None:
        self.bindings.setdefault(name, []).append(_Binding((node.lineno, node.col_offset), target))

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            if alias.asname:
                self.bind(alias.asname, node, alias.name)
            else:
                root = alias.name.split(".")[0]
                self.bind(root, node, root)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        module = import_source(node)
        for alias in node.names:
            self.bind(alias.asname or alias.name, node, f"{module}.{alias.name}")

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, ast.Store):
            self.bind(node.id, node, "")

    def _bind_definition(self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> None:
        self.bind(node.name, node, "")

    visit_FunctionDef = _bind_definition
    visit_AsyncFunctionDef = _bind_definition
    visit_ClassDef = _bind_definition

    def _nested_expression_scope(self, node: ast.expr) -> None:
        # Lambda arguments and comprehension targets (and walruses inside them) bind nothing here.
        pass

    visit_Lambda = _nested_expression_scope
    visit_ListComp = _nested_expression_scope
    visit_SetComp = _nested_expression_scope
    visit_DictComp = _nested_expression_scope
    visit_GeneratorExp = _nested_expression_scope


def _parameters(arguments: ast.arguments) -> list[str]:
    every = (*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs)
    optional = (arguments.vararg, arguments.kwarg)
    return [arg.arg for arg in (*every, *optional) if arg is not None]


def _scope_bindings(body: list[ast.stmt], arguments: ast.arguments | None = None) -> Bindings:
    collector = _BindingCollector()
    for name in _parameters(arguments) if arguments else ():
        collector.bindings.setdefault(name, []).append(_Binding(_BOUND_ON_ENTRY, ""))
    for statement in body:
        collector.visit(statement)
    return collector.bindings


def _entry_bindings(names: Iterable[str]) -> Bindings:
    return {name: [_Binding(_BOUND_ON_ENTRY, "")] for name in names}


def dotted_name(node: ast.expr) -> str | None:
    """``a.b.c`` for a chain of attributes on a plain name; None for anything else."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def read_of(resolved: str) -> tuple[str, str] | None:
    """(KIND, DETAIL) when calling the fully resolved dotted name reads global state."""
    module, _, function = resolved.rpartition(".")
    if module in ACCESSOR_MODULES:
        if is_accessor(function, Generation.SCOPE):
            return "accessor", f"parallel_state.{function}"
        return None
    if resolved == SHIM:
        return "shim", "use_mpu_process_groups"
    return None


Comprehension = ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp


class _ReadFinder(_Walker):
    """Walks one module, keeping the scope stack and the KEY (enclosing def/class names)."""

    def __init__(self, module: ast.Module) -> None:
        self.scopes = [_Scope(_ScopeKind.MODULE, {}, _scope_bindings(module.body))]
        self.key_names: list[str] = []
        self.reads: list[tuple[int, str]] = []

    def _enclosing(self) -> _Scope:
        """The scope a nested one inherits from: the innermost that is not a class body."""
        return next(s for s in reversed(self.scopes) if s.kind is not _ScopeKind.CLASS)

    def _resolve(self, root: str, position: Position) -> str:
        scope = self.scopes[-1]
        events = scope.bindings.get(root)
        if events is not None:
            return _import_before(events, position)
        return scope.inherited.get(root, root)

    def _visit_all(self, nodes: Iterable[ast.AST | None]) -> None:
        for node in nodes:
            if node is not None:
                self.visit(node)

    def _visit_in_scope(self, scope: _Scope, body: Iterable[ast.AST]) -> None:
        self.scopes.append(scope)
        try:
            self._visit_all(body)
        finally:
            self.scopes.pop()

    def _visit_definition(
        self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef, scope: _Scope
    ) -> None:
        self.key_names.append(node.name)
        try:
            self._visit_in_scope(scope, node.body)
        finally:
            self.key_names.pop()

    def visit_FunctionDef(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> None:
        # Decorators and defaults run in the enclosing scope; annotations are never scanned.
        self._visit_all((*node.decorator_list, *node.args.defaults, *node.args.kw_defaults))
        inherited = self._enclosing().view_for_nested(None)
        bindings = _scope_bindings(node.body, node.args)
        self._visit_definition(node, _Scope(_ScopeKind.FUNCTION, inherited, bindings))

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        self._visit_all((*node.decorator_list, *node.bases, *node.keywords))
        inherited = self._enclosing().view_for_nested(None)
        bindings = _scope_bindings(node.body)
        self._visit_definition(node, _Scope(_ScopeKind.CLASS, inherited, bindings))

    def visit_Lambda(self, node: ast.Lambda) -> None:
        self._visit_all((*node.args.defaults, *node.args.kw_defaults))
        inherited = self._enclosing().view_for_nested(None)
        bindings = _entry_bindings(_parameters(node.args))
        self._visit_in_scope(_Scope(_ScopeKind.EXPRESSION, inherited, bindings), [node.body])

    def _visit_comprehension(self, node: Comprehension, results: list[ast.expr]) -> None:
        first, *later = node.generators
        self.visit(first.iter)  # evaluated before the comprehension's scope exists
        # A generator expression runs later, when the enclosing scope's imports have all run.
        eager = not isinstance(node, ast.GeneratorExp)
        position = (node.lineno, node.col_offset) if eager else None
        inherited = self._enclosing().view_for_nested(position)
        targets = [
            name.id
            for generator in node.generators
            for name in ast.walk(generator.target)
            if isinstance(name, ast.Name) and isinstance(name.ctx, ast.Store)
        ]
        parts = [*first.ifs]
        for generator in later:
            parts += [generator.iter, *generator.ifs]
        scope = _Scope(_ScopeKind.EXPRESSION, inherited, _entry_bindings(targets))
        self._visit_in_scope(scope, [*parts, *results])

    def visit_ListComp(self, node: ast.ListComp) -> None:
        self._visit_comprehension(node, [node.elt])

    def visit_SetComp(self, node: ast.SetComp) -> None:
        self._visit_comprehension(node, [node.elt])

    def visit_GeneratorExp(self, node: ast.GeneratorExp) -> None:
        self._visit_comprehension(node, [node.elt])

    def visit_DictComp(self, node: ast.DictComp) -> None:
        self._visit_comprehension(node, [node.key, node.value])

    def visit_Call(self, node: ast.Call) -> None:
        called = dotted_name(node.func)
        if called is not None:
            root, dot, rest = called.partition(".")
            target = self._resolve(root, (node.lineno, node.col_offset))
            read = read_of(target + dot + rest) if target else None
            if read is not None:
                key = ".".join(self.key_names) or "<module>"
                self.reads.append((node.lineno, f"{key}:{read[0]}:{read[1]}"))
        self.generic_visit(node)


def current_reads(module: ast.Module) -> list[tuple[int, str]]:
    """(line, ``KEY:KIND:DETAIL``) for every read in ``module``, in no particular order."""
    finder = _ReadFinder(module)
    finder.visit(module)
    return finder.reads
