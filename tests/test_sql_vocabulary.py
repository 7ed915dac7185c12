"""One SQL vocabulary: outside finops/sql.py no module builds SQL text from a value.

The rule, checked on the syntax tree of every module under ``finops/``:

Every f-string that reads as SQL (it holds SQL keywords or calls), every argument of
``.execute`` / ``.executemany`` / ``.sql`` / ``.query``, and every ``+`` joining SQL text, may only
interpolate *safe* expressions:

* a constant written in the code; an UPPER_CASE name or attribute (``MEASURES_SQL``, ``sql.SERVED``);
* a call of the vocabulary (``sql.*``, ``quote_ident``, ``literal``, ``column``, ``time_bucket``...),
  of a function whose name says it returns SQL (``*_sql``, ``where``, ``*_where``: their own text is
  checked where they build it), or ``str.join`` / ``str.replace`` over safe parts;
* a subscript of a safe container (``TIME_BUCKETS[grain]``); ``a if c else b`` / ``a or b`` of safe
  parts; arithmetic on loop positions (``range`` / ``enumerate`` indices: GROUP BY ordinals);
* a local variable every binding of which is safe: assignments, loop and comprehension targets over
  safe iterables, and every ``.append`` / ``.extend`` / ``.insert`` into it; a function parameter
  only when its name says it carries SQL text (:data:`SQL_PARAMS`) or the function rebinds it
  through a safe call (``field = sql.column(field, ...)``).

``{x!r}``, a format spec (``{x:.6f}``), ``%`` and ``str.format`` on SQL text are never safe: numbers
that cannot be bound go through ``sql.literal``, which checks them.
"""
from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from finops import store

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "finops"
VOCABULARY = PACKAGE / "sql.py"

SINKS = {"execute", "executemany", "sql", "query"}
# parameter names that, by convention, carry SQL text the caller built (and the checker checked there)
SQL_PARAMS = {"where", "sql", "source", "expr", "exprs", "attrs_exprs", "cond", "extra", "extra_cols", "join",
              "x", "raw", "typed", "table", "call", "ordinal", "row"}


def _is_sql_param(name: str) -> bool:
    return name in SQL_PARAMS or name.endswith("_sql")
# fields of objects that carry SQL text (Source.sql, Source.unnumbered_sql): what is assigned to them,
# by a constructor's argument or an assignment, is checked
SQL_FIELDS = {"sql", "unnumbered_sql"}
SAFE_CALLS = {"quote_ident", "literal", "column", "time_bucket", "served", "view_body"}
# the vocabulary's arguments that are SQL text, (position, keyword): checked like any SQL; its other
# arguments are values it checks (a grain, an allow-listed column, a number, an alias) or quotes
SQL_ARGUMENTS = {"time_bucket": (1, "expr"), "view_body": (1, "text")}
UPPER = re.compile(r"^_*[A-Z][A-Z0-9_]*$")
SQL_TEXT = re.compile(
    r"\b(SELECT|FROM|WHERE|INSERT|DELETE|UPDATE|CREATE|DROP|GROUP BY|ORDER BY|CASE WHEN|FILTER|JOIN|UNION|"
    r"DESCRIBE|LIMIT|IS NOT NULL|IS NULL|TABLESAMPLE|SET)\b|"
    r"\b(coalesce|count|sum|avg|min|max|quantile_cont|quantile_disc|date_trunc|time_bucket|nullif|greatest|"
    r"least|CAST|TRY_CAST|read_csv|read_json|read_parquet|struct_pack|to_json|unnest|epoch_us|md5|"
    r"list_position|json_extract_string|regexp_full_match|floor|ln|log10|pow)\(")


def _is_sql_text(node: ast.AST) -> bool:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return bool(SQL_TEXT.search(node.value))
    if isinstance(node, ast.JoinedStr):
        return any(_is_sql_text(v) for v in node.values if isinstance(v, ast.Constant))
    return False


class _Scope:
    """One function (or the module): its bindings by name, for the "every binding is safe" rule."""

    def __init__(self, node: ast.AST, parent: _Scope | None):
        self.node, self.parent = node, parent
        self.bindings: dict[str, list[tuple[str, ast.AST | None]]] = {}
        self.params: set[str] = set()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            a = node.args
            for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs, *([a.vararg] if a.vararg else []),
                        *([a.kwarg] if a.kwarg else [])]:
                self.params.add(arg.arg)
        for child in _own_nodes(node):
            self._collect(child)

    def _bind(self, target: ast.AST, kind: str, value: ast.AST | None) -> None:
        while (kind == "iter" and isinstance(value, ast.Call) and isinstance(value.func, ast.Name)
               and value.func.id in ("sorted", "reversed", "list", "tuple") and len(value.args) == 1):
            value = value.args[0]           # ``for a, b in sorted(zip(xs, ys))``: the same elements, reordered
        if isinstance(target, ast.Name):
            self.bindings.setdefault(target.id, []).append((kind, value))
        elif (isinstance(target, (ast.Tuple, ast.List)) and kind == "iter" and isinstance(value, ast.Call)
              and isinstance(value.func, ast.Name) and value.func.id in ("enumerate", "zip")):
            # ``for i, x in enumerate(xs)``: i is a position; ``for a, b in zip(xs, ys)``: one element each
            parts = ([None, value.args[0]] if value.func.id == "enumerate" else list(value.args))
            for elt, source in zip(target.elts, parts, strict=False):
                self._bind(elt, "position" if source is None else "iter", source)
        elif isinstance(target, (ast.Tuple, ast.List)):
            for i, elt in enumerate(target.elts):
                if kind != "assign":            # an element of an iterable: judged by the iterable
                    self._bind(elt, kind, value)
                elif isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts):
                    self._bind(elt, "assign", value.elts[i])
                else:                           # ``where, params = f.where()``: element i of the result
                    self.bindings.setdefault(elt.id if isinstance(elt, ast.Name) else "", []).append(
                        ("unpack", (value, i)))
        elif isinstance(target, ast.Starred):
            self._bind(target.value, kind, value)

    def _collect(self, node: ast.AST) -> None:
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name):
                    # ``exprs[key] = value``: the container holds the value
                    self.bindings.setdefault(t.value.id, []).append(("item", node.value))
                else:
                    self._bind(t, "assign", node.value)
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and node.value is not None:
            self._bind(node.target, "assign", node.value)
        elif isinstance(node, ast.NamedExpr):
            self._bind(node.target, "assign", node.value)
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            self._bind(node.target, "iter", node.iter)
        elif isinstance(node, ast.comprehension):
            self._bind(node.target, "iter", node.iter)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                if item.optional_vars is not None:
                    self._bind(item.optional_vars, "opaque", None)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            self.bindings.setdefault(node.name, []).append(("opaque", None))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                self.bindings.setdefault((alias.asname or alias.name).split(".")[0], []).append(("import", None))
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name)
              and node.func.attr in ("append", "extend", "insert")):
            arg = node.args[-1] if node.args else None
            self.bindings.setdefault(node.func.value.id, []).append((node.func.attr, arg))

    def lookup(self, name: str) -> tuple[_Scope | None, list]:
        scope = self
        while scope is not None:
            if name in scope.bindings or name in scope.params:
                return scope, scope.bindings.get(name, [])
            scope = scope.parent
        return None, []


def _own_nodes(node: ast.AST):
    """The nodes of ``node``'s body that belong to it, not to a nested function or class."""
    stack = list(ast.iter_child_nodes(node))
    while stack:
        n = stack.pop()
        yield n
        if not isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(n))


class Checker:
    def __init__(self, tree: ast.Module, package: dict | None = None):
        self.tree = tree
        self.scopes: dict[ast.AST, _Scope] = {}
        self.problems: list[tuple[int, str]] = []
        self._build(tree, None)
        # function name -> [(def, its module's checker)] over the package (this module alone by default)
        self.package = package if package is not None else {}
        for node in self.scopes:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.package.setdefault(node.name, []).append((node, self))
            elif isinstance(node, ast.ClassDef):
                self.package.setdefault(("class", node.name), []).append(node)

    def _build(self, node: ast.AST, parent: _Scope | None) -> None:
        scope = _Scope(node, parent)
        self.scopes[node] = scope
        for child in _own_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                self._build(child, scope)
            elif isinstance(child, ast.ClassDef):
                self._build(child, scope)

    # ------------------------------------------------------------ safety of one expression

    def safe(self, e: ast.AST, scope: _Scope, seen: frozenset = frozenset()) -> bool:
        if isinstance(e, ast.Constant):
            return True
        if isinstance(e, ast.JoinedStr):
            return all(self._safe_value(v, scope, seen) for v in e.values if isinstance(v, ast.FormattedValue))
        if isinstance(e, ast.Name):
            return self._safe_name(e.id, scope, seen)
        if isinstance(e, ast.Attribute):
            # a constant, the vocabulary, or a field holding SQL (``source.sql``: checked where it is set)
            # or a field of a safe object (``c.name`` for ``c`` in a constant table)
            return (bool(UPPER.match(e.attr)) or (isinstance(e.value, ast.Name) and e.value.id == "sql")
                    or e.attr in SQL_FIELDS or (isinstance(e.value, ast.Name) and self.safe(e.value, scope, seen)))
        if isinstance(e, ast.Subscript):
            return self.safe(e.value, scope, seen)
        if isinstance(e, ast.IfExp):
            return self.safe(e.body, scope, seen) and self.safe(e.orelse, scope, seen)
        if isinstance(e, ast.BoolOp):
            return all(self.safe(v, scope, seen) for v in e.values)
        if isinstance(e, ast.BinOp):
            if isinstance(e.op, ast.Mod) and _is_sql_text(e.left):
                return False
            if isinstance(e.op, ast.Add):
                return self.safe(e.left, scope, seen) and self.safe(e.right, scope, seen)
            return self._position(e, scope, seen)
        if isinstance(e, ast.UnaryOp):
            return self._position(e, scope, seen)
        if isinstance(e, (ast.Tuple, ast.List, ast.Set)):
            return all(self.safe(v, scope, seen) for v in e.elts)
        if isinstance(e, ast.Dict):
            return all(v is None or self.safe(v, scope, seen) for v in [*e.keys, *e.values])
        if isinstance(e, (ast.ListComp, ast.GeneratorExp, ast.SetComp)):
            return self.safe(e.elt, self.scopes_for(e, scope), seen)
        if isinstance(e, ast.DictComp):
            inner = self.scopes_for(e, scope)
            return self.safe(e.key, inner, seen) and self.safe(e.value, inner, seen)
        if isinstance(e, ast.Call):
            return self._safe_call(e, scope, seen)
        if isinstance(e, ast.Starred):
            return self.safe(e.value, scope, seen)
        return False

    def scopes_for(self, comp: ast.AST, scope: _Scope) -> _Scope:
        """A scope for a comprehension: its targets bound to its iterables, inside ``scope``."""
        inner = self.scopes.get(comp)
        if inner is None:
            inner = _Scope(ast.Module(body=[], type_ignores=[]), scope)
            for gen in comp.generators:
                inner._bind(gen.target, "iter", gen.iter)
            self.scopes[comp] = inner
        return inner

    def _safe_value(self, v: ast.FormattedValue, scope: _Scope, seen) -> bool:
        return v.conversion == -1 and v.format_spec is None and self.safe(v.value, scope, seen)

    def _position(self, e: ast.AST, scope: _Scope, seen) -> bool:
        """Arithmetic on constants and loop positions (range / enumerate indices)."""
        if isinstance(e, ast.BinOp):
            return self._position(e.left, scope, seen) and self._position(e.right, scope, seen)
        if isinstance(e, ast.UnaryOp):
            return self._position(e.operand, scope, seen)
        if isinstance(e, ast.Constant):
            return isinstance(e.value, (int, float)) and not isinstance(e.value, bool)
        if isinstance(e, ast.Name):
            return self._safe_name(e.id, scope, seen, position=True)
        if isinstance(e, ast.Attribute):
            return bool(UPPER.match(e.attr))
        return False

    def _safe_name(self, name: str, scope: _Scope, seen, position: bool = False) -> bool:
        if UPPER.match(name):
            return True
        owner, bindings = scope.lookup(name)
        if owner is None:
            return False
        key = (id(owner), name)
        if ("value", key) in seen:
            return False            # a parameter's own value, inside its rebinding
        if key in seen:
            return True             # a binding that refers to itself (sql = f"... {sql} ..."): judged by the rest
        seen = seen | {key}
        if name in owner.params and (position or not _is_sql_param(name)):
            # a parameter: only as a name that carries SQL, or rebound to a safe value that does not
            # take the parameter's own (``field = sql.column(field, ...)``, ``keys = [sql.column(k) ...]``)
            if not any(kind == "assign" and self.safe(v, owner, seen | {("value", key)}) for kind, v in bindings):
                return False
        if not bindings and name not in owner.params:
            return False
        for kind, value in bindings:
            if kind == "position":
                continue
            if kind in ("opaque", "import") or value is None:
                return False
            if kind == "iter":
                if not self._safe_iter(value, owner, seen, position):
                    return False
            elif kind == "item":
                if not self.safe(value, owner, seen):
                    return False
            elif kind == "extend":
                if not self._safe_iter(value, owner, seen, position):
                    return False
            elif kind == "unpack":
                if not self._safe_element(*value, owner, seen):
                    return False
            elif not (self._position(value, owner, seen) if position else self.safe(value, owner, seen)):
                return False
        return True

    def _safe_element(self, value: ast.AST, index: int, scope: _Scope, seen) -> bool:
        """Whether element ``index`` of what ``value`` gives (a tuple, a choice of tuples, a call) is safe."""
        if isinstance(value, (ast.Tuple, ast.List)):
            return len(value.elts) > index and self.safe(value.elts[index], scope, seen)
        if isinstance(value, ast.IfExp):
            return self._safe_element(value.body, index, scope, seen) and self._safe_element(value.orelse, index,
                                                                                              scope, seen)
        if isinstance(value, ast.Call):
            return self._safe_call(value, scope, seen, index)
        return self.safe(value, scope, seen)

    def _safe_iter(self, it: ast.AST, scope: _Scope, seen, position: bool = False) -> bool:
        """Whether every element of iterable ``it`` is safe (loop positions count as safe)."""
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Name):
            if it.func.id == "range":
                return True
            if it.func.id in ("enumerate", "sorted", "reversed", "list", "tuple", "set") and it.args:
                return self._safe_iter(it.args[0], scope, seen, position)
            if it.func.id == "zip":
                return all(self._safe_iter(a, scope, seen, position) for a in it.args)
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and it.func.attr in ("items", "keys", "values"):
            return self.safe(it.func.value, scope, seen)
        return self.safe(it, scope, seen)

    def _safe_call(self, c: ast.Call, scope: _Scope, seen, index: int | None = None) -> bool:
        f = c.func
        name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
        if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id == "sql" or name in SAFE_CALLS:
            # the vocabulary: what takes a value checks it; what takes SQL (time_bucket's expression,
            # view_body's text) must be given safe SQL
            at, key = SQL_ARGUMENTS.get(name, (None, None))
            sql_args = [*(c.args[at:at + 1] if at is not None else []), *(k.value for k in c.keywords if k.arg == key)]
            return all(self.safe(a, scope, seen) for a in sql_args)
        if name == "where":
            return True
        if name == "join" and isinstance(f, ast.Attribute):
            return self.safe(f.value, scope, seen) and all(self._safe_iter(a, scope, seen) for a in c.args)
        if name == "replace" and isinstance(f, ast.Attribute):
            return self.safe(f.value, scope, seen) and all(self.safe(a, scope, seen) for a in c.args)
        if name == "str" and isinstance(f, ast.Name) and len(c.args) == 1:
            return self._position(c.args[0], scope, seen)
        if name in ("dict", "list", "tuple") and isinstance(f, ast.Name):
            return all(self.safe(a, scope, seen) for a in c.args)
        if name in ("lower", "upper", "strip") and isinstance(f, ast.Attribute):
            return self.safe(f.value, scope, seen)
        if name == "get" and isinstance(f, ast.Attribute):
            return self.safe(f.value, scope, seen) and all(self.safe(a, scope, seen) for a in c.args[1:])
        # a function of the package: safe when every value it returns (element ``index`` of a returned
        # tuple) is safe in its own body; what it is given for an SQL parameter is checked at each call
        defs = self._resolve(f, name)
        if not defs:
            return False
        key = ("call", name, index)
        if key in seen:
            return True
        seen = seen | {key}
        for fn, checker in defs:
            fscope = checker.scopes[fn]
            for ret in _returns(fn):
                value = ret.value
                if value is None:
                    return False
                if index is not None and isinstance(value, ast.Tuple) and len(value.elts) > index:
                    value = value.elts[index]
                if not checker.safe(value, checker._enclosing_comp_scope(value, fscope), seen):
                    return False
        return True

    # ------------------------------------------------------------ where SQL is built

    def check(self) -> list[tuple[int, str]]:
        for node, scope in list(self.scopes.items()):
            if not isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                continue
            for n in _own_nodes(node):
                self._check_node(n, scope)
        return sorted(set(self.problems))

    def _in_comp_scope(self, n: ast.AST, scope: _Scope) -> _Scope:
        return scope

    def _check_node(self, n: ast.AST, scope: _Scope) -> None:
        if isinstance(n, ast.JoinedStr) and _is_sql_text(n):
            sc = self._enclosing_comp_scope(n, scope)
            for v in n.values:
                if isinstance(v, ast.FormattedValue) and not self._safe_value(v, sc, frozenset()):
                    self.problems.append((n.lineno, f"SQL text built from a value: {{{ast.unparse(v.value)}}}"))
        elif isinstance(n, ast.BinOp) and isinstance(n.op, ast.Mod) and _is_sql_text(n.left):
            self.problems.append((n.lineno, "SQL text formatted with %"))
        elif isinstance(n, ast.BinOp) and isinstance(n.op, ast.Add) and (_is_sql_text(n.left) or _is_sql_text(n.right)):
            sc = self._enclosing_comp_scope(n, scope)
            for side in (n.left, n.right):
                if not self.safe(side, sc, frozenset()):
                    self.problems.append((n.lineno, f"SQL text joined to a value: {ast.unparse(side)}"))
        if isinstance(n, ast.Assign):
            for t in n.targets:
                if isinstance(t, ast.Attribute) and t.attr in SQL_FIELDS and not self.safe(
                        n.value, self._enclosing_comp_scope(n, scope), frozenset()):
                    self.problems.append((n.lineno, f"SQL field {t.attr} set to a value: {ast.unparse(n.value)[:80]}"))
        if isinstance(n, ast.Call):
            self._check_sql_arguments(n, scope)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute):
            if n.func.attr == "format" and _is_sql_text(n.func.value):
                self.problems.append((n.lineno, "SQL text built with str.format"))
            elif n.func.attr in SINKS and n.args:
                sc = self._enclosing_comp_scope(n, scope)
                if not self.safe(n.args[0], sc, frozenset()):
                    self.problems.append((n.lineno, f".{n.func.attr}() of SQL built from a value: "
                                                    f"{ast.unparse(n.args[0])[:80]}"))

    def _check_sql_arguments(self, n: ast.Call, scope: _Scope) -> None:
        """What a call passes for a parameter named as carrying SQL (:data:`SQL_PARAMS`) must be safe."""
        f = n.func
        name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
        sc = self._enclosing_comp_scope(n, scope)
        for cls in self.package.get(("class", name), []):
            fields = [x.target.id for x in cls.body if isinstance(x, ast.AnnAssign) and isinstance(x.target, ast.Name)]
            given = list(zip(fields, n.args, strict=False)) + [(k.arg, k.value) for k in n.keywords if k.arg]
            for field_name, arg in given:
                if field_name in SQL_FIELDS and not self.safe(arg, sc, frozenset()):
                    self.problems.append((n.lineno, f"{name}() given a value for SQL field {field_name}: "
                                                    f"{ast.unparse(arg)[:80]}"))
        for fn, checker in self._resolve(f, name):
            used = checker.sql_params(fn)
            if not used:
                continue
            params = [a.arg for a in [*fn.args.posonlyargs, *fn.args.args]]
            if params and params[0] == "self" and isinstance(f, ast.Attribute):
                params = params[1:]
            given = list(zip(params, n.args, strict=False)) + [(k.arg, k.value) for k in n.keywords if k.arg]
            for param, arg in given:
                if param in used and not isinstance(arg, ast.Starred) and not self.safe(arg, sc, frozenset()):
                    self.problems.append((n.lineno, f"{name}() given a value for SQL parameter {param}: "
                                                    f"{ast.unparse(arg)[:80]}"))

    def _resolve(self, func: ast.AST, name: str) -> list:
        """The package's functions a call may reach: a bare name is this module's own where it has one."""
        defs = self.package.get(name, [])
        if isinstance(func, ast.Name):
            own = [(fn, c) for fn, c in defs if c is self]
            return own or defs
        return defs

    def sql_params(self, fn: ast.AST) -> set[str]:
        """The parameters of ``fn`` named as SQL (:data:`SQL_PARAMS`) that reach SQL text in it: inside an
        SQL f-string, an argument of a sink or an SQL concatenation."""
        cache = self.__dict__.setdefault("_sql_params", {})
        if fn not in cache:
            names = {a.arg for a in [*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs]
                     if _is_sql_param(a.arg)}
            used: set[str] = set()
            for n in ast.walk(fn):
                holders = []
                if isinstance(n, ast.JoinedStr) and _is_sql_text(n):
                    holders.append(n)
                elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in SINKS and n.args:
                    holders.append(n.args[0])
                elif isinstance(n, ast.BinOp) and (_is_sql_text(n.left) or _is_sql_text(n.right)):
                    holders.append(n)
                for h in holders:
                    used |= {x.id for x in ast.walk(h) if isinstance(x, ast.Name)} & names
            cache[fn] = used
        return cache[fn]

    def _enclosing_comp_scope(self, n: ast.AST, scope: _Scope) -> _Scope:
        """The comprehension scopes around ``n`` inside ``scope`` (their targets are in view)."""
        chain = self._parents.get(n) if hasattr(self, "_parents") else None
        if chain is None:
            self._parents = {}
            for parent in ast.walk(self.tree):
                for child in ast.iter_child_nodes(parent):
                    self._parents[child] = parent
        comps = []
        p = self._parents.get(n)
        while p is not None and p is not scope.node:
            if isinstance(p, (ast.ListComp, ast.GeneratorExp, ast.SetComp, ast.DictComp)):
                comps.append(p)
            p = self._parents.get(p)
        for comp in reversed(comps):
            scope = self.scopes_for(comp, scope)
        return scope


def _returns(fn: ast.AST):
    return [n for n in _own_nodes(fn) if isinstance(n, ast.Return)]


def problems_in(source: str) -> list[tuple[int, str]]:
    return Checker(ast.parse(source)).check()


# Being split into several modules by another change right now; they take finops.sql after that merge.
# test_pending_modules_still_need_the_vocabulary fails once one of them passes: then drop it here.
PENDING: tuple[str, ...] = ()


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if p != VOCABULARY)


def package_problems() -> dict[str, list[tuple[int, str]]]:
    """Problems per module, with calls resolved across the whole package."""
    index: dict = {}
    checkers = {str(p.relative_to(ROOT)): Checker(ast.parse(p.read_text(encoding="utf-8")), index)
                for p in _modules()}
    return {name: c.check() for name, c in checkers.items()}


# ---------------------------------------------------------------- the tree


# SQL text that is passed through, never built: the holder of a store runs the statements another process's
# finops built (finops.remote; the text was checked here as that process's code, its values are bound)
PASSED_THROUGH: set[tuple[str, str]] = {
    ("finops/ingest/service.py", "_served_statement() given a value for SQL parameter sql: asked['sql']")}


def test_no_module_outside_the_vocabulary_builds_sql_from_a_value():  # PENDING aside
    found = [f"{name}:{line}: {what}" for name, problems in package_problems().items() if name not in PENDING
             for line, what in problems if (name, what) not in PASSED_THROUGH]
    assert found == [], "\n".join(found)


# The shared fragments, spelled out: outside finops/sql.py they are a second definition.
FRAGMENTS = re.compile(
    r"coalesce\(\w*\.?cache_hit|FILTER \(WHERE \w*\.?cache_hit\)|coalesce\(status|status IS NULL OR|status <> 'ok'|"
    r"date_trunc\(|time_bucket\(|total_ms - ttft_ms|prefill_ms \+ decode_ms|total_ms - coalesce\(queue_ms|"
    r"output_tokens - 1|requests - \w*\.?cache_hits")


def fragment_copies(source: str) -> list[tuple[int, str]]:
    """String constants (docstrings aside) that spell out a fragment of the vocabulary."""
    tree = ast.parse(source)
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.body
            and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    return [(n.lineno, FRAGMENTS.search(n.value).group(0)) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs
            and FRAGMENTS.search(n.value)]


def test_no_module_outside_the_vocabulary_spells_out_its_fragments():
    found = [f"{p.relative_to(ROOT)}:{line}: {what}" for p in _modules() if str(p.relative_to(ROOT)) not in PENDING
             for line, what in fragment_copies(p.read_text(encoding="utf-8"))]
    assert found == [], "\n".join(found)


def test_fragment_copies_are_found():
    assert fragment_copies('SERVED = "NOT coalesce(cache_hit, false)"\n') == [(1, "coalesce(cache_hit")]


def test_pending_modules_still_need_the_vocabulary():
    problems = package_problems()
    pending = [name for name in PENDING
               if not problems[name] and not fragment_copies((ROOT / name).read_text(encoding="utf-8"))]
    assert pending == [], "these modules use the vocabulary now: remove them from PENDING"


# ---------------------------------------------------------------- the checker itself

FLAGGED = {
    "a value in quotes": """
def by_model(con, model):
    return con.execute(f"SELECT count(*) FROM requests WHERE model = '{model}'").fetchall()
""",
    "an option's attribute": """
def reader(options):
    return f"SELECT coalesce(model, '{options.model}') AS model FROM t"
""",
    "a repr": """
def q(con, qs):
    return con.execute(f"SELECT quantile_cont(x, {qs!r}) FROM t")
""",
    "a format spec": """
def sample(pct):
    return f"SELECT * FROM requests TABLESAMPLE {pct:.2f}%"
""",
    "a hand-made literal": """
def lit(v):
    return "'" + v.replace("'", "''") + "'"
def q(con, v):
    return con.execute(f"SELECT * FROM t WHERE a = {lit(v)}")
""",
    "a concatenated value": """
def q(con, tenant):
    return con.execute("SELECT * FROM t WHERE tenant = '" + tenant + "'")
""",
    "a list that takes a value": """
def q(con, rows):
    parts = ["TRUE"]
    for r in rows:
        parts.append(f"model = '{r}'")
    return con.execute(f"SELECT * FROM t WHERE {' OR '.join(parts)}")
""",
    "a column not checked": """
def q(con, field):
    return con.execute(f"SELECT max({field}) FROM requests")
""",
    "a number given as a parameter": """
def q(con, n):
    return con.execute(f"SELECT * FROM t LIMIT {n + 1} OFFSET {str(n)}")
""",
    "percent formatting": """
def q(con, n):
    return con.execute("SELECT * FROM t LIMIT %d" % n)
""",
    "a variable holding a value": """
def q(con, model):
    cond = "model = '" + model + "'"
    return con.execute(f"SELECT * FROM t WHERE {cond}")
""",
}


@pytest.mark.parametrize("case", sorted(FLAGGED))
def test_the_checker_flags_sql_built_from_a_value(case):
    assert problems_in(FLAGGED[case]), case


def test_the_checker_flags_the_model_in_quotes_on_its_line():
    found = problems_in(FLAGGED["a value in quotes"])
    assert (3, "SQL text built from a value: {model}") in found


ACCEPTED = """
from finops import sql
GROUPS = ("model", "tenant")
def q(con, f, by, field, n):
    field = sql.column(field, sql.LATENCY_COLUMNS)
    where, params = f.where()
    keys = ", ".join(f"coalesce({k}, '') AS {k}" for k in GROUPS)
    group = ", ".join(str(i + 1) for i in range(len(GROUPS)))
    cond = f"{where} AND {sql.SERVED}"
    return con.execute(f"SELECT {keys}, max({field}), {sql.time_bucket('day')} FROM requests WHERE {cond} "
                       f"GROUP BY {group} LIMIT ?", params + [n])
"""


def test_the_checker_accepts_identifiers_fragments_and_bound_values():
    assert problems_in(ACCEPTED) == []


# ---------------------------------------------------------------- values with quotes, end to end

TENANT = "o'brien; drop table requests"
MODEL = "o'neil \"7b\"; --"
AZURE_MAP = "ts=TIMESTAMP,input_tokens=ContextTokens,output_tokens=GeneratedTokens"


def _run(capsys, *args):
    from finops.cli import main

    code = main(list(args))
    out = capsys.readouterr().out
    assert code in (0, None), out
    return json.loads(out)


@pytest.mark.parametrize("kind", ["csv", "parquet"])
def test_model_and_tenant_constants_with_quotes_load_and_filter(tmp_path, capsys, kind):
    """--model / --tenant constants are bound parameters: in a CSV read (staged as a table) and a Parquet
    read (staged as a view, whose body reads them from session variables)."""
    import duckdb

    src = ROOT / "tests" / "data" / "azure_code_excerpt.csv"
    if kind == "parquet":
        path = tmp_path / "azure's excerpt.parquet"
        duckdb.execute("COPY (SELECT * FROM read_csv(?)) TO '" + str(path).replace("'", "''") + "' (FORMAT parquet)",
                       [str(src)])
    else:
        path = src
    db = str(tmp_path / "s.duckdb")
    args = ["ingest", str(path), "--map", AZURE_MAP, "--model", MODEL, "--tenant", TENANT, "--json", "--db", db]
    loaded = _run(capsys, *args)
    assert (loaded["rows_read"], loaded["rows_ingested"], loaded["rows_rejected"]) == (500, 500, 0)
    again = _run(capsys, *args)          # the same file and constants: nothing new
    assert again["rows_ingested"] == 0
    rows = _run(capsys, "report", "--by", "model,tenant", "--tenant", TENANT, "--model", MODEL, "--json", "--db", db)
    assert [(r["model"], r["tenant"], r["requests"]) for r in rows] == [(MODEL, TENANT, 500)]
    con = store.connect(db, read_only=True)
    try:
        assert store.row_count(con) == 500
        assert store.distinct_values(con, "tenant") == [TENANT]
    finally:
        con.close()
