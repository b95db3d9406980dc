"""The structural stage of validation: checks on the source text, without running any of it.

:func:`check_structure` parses the module and raises :class:`StructuralRejection` (a reason
code and a one-line message saying how to fix it) for the first rule it breaks:

* the source fits ``max_source_bytes`` and parses;
* every ``import`` names a module of the sandbox's allow-list, and ``__import__`` is not used;
* module level holds only a docstring, imports, function and class definitions and constant
  assignments (to plain names, of expressions that call nothing but pure builtins, functions
  of imported modules and comprehensions) — importing the module has no side effects; the
  same holds for what a ``def`` or ``class`` statement runs: decorators, default arguments,
  base classes and class bodies (which may also call the module's own functions);
* exactly one top-level class whose name ends in ``Env`` (found with ``spade_envs.find_env_class``);
* that class (or a base class defined in the module) defines ``reset``, ``step``, ``solution``
  and ``close`` with callable signatures, and an ``__init__`` that takes ``max_turns`` and
  ``**kwargs``;
* a literal ``skill`` class attribute names a known skill, and the expected one when given.

These rules are conservative on purpose: a designer that writes a module-level ``print`` or
``if __name__ == "__main__":`` block is told to remove it rather than have it run in the sandbox.
"""

from __future__ import annotations

import ast
from collections.abc import Collection
from typing import Any

import spade_envs as se

__all__ = [
    "STRUCTURAL_REASONS",
    "DEFAULT_MAX_SOURCE_BYTES",
    "StructuralRejection",
    "check_structure",
]

DEFAULT_MAX_SOURCE_BYTES = 64 * 1024
"""Largest accepted environment source, in UTF-8 bytes (the example games are 3-7 KB)."""

#: Reason codes of the structural stage, with what each means.
STRUCTURAL_REASONS: dict[str, str] = {
    "source_too_large": "the source is larger than the size limit",
    "syntax_error": "the source does not parse as Python",
    "too_deep": "the source nests expressions or blocks too deeply for the parser or the checks",
    "no_env_class": "no top-level class whose name ends in 'Env'",
    "multiple_env_classes": "more than one top-level class whose name ends in 'Env'",
    "missing_method": "the environment class lacks reset, step, solution or close",
    "init_signature": "__init__ is missing or does not accept max_turns and **kwargs",
    "method_signature": "reset/step/solution/close cannot be called as the contract calls them",
    "forbidden_import": "the source imports a module outside the sandbox's allow-list",
    "top_level_side_effect": "module level holds a statement other than imports, defs, classes and constants",
    "unknown_skill": "the class attribute 'skill' is not one of the known skills",
    "skill_mismatch": "the class attribute 'skill' differs from the skill the environment was made for",
}

REQUIRED_METHODS = ("reset", "step", "solution", "close")

# Builtins that compute a value and touch nothing else; module-level constants may call them.
PURE_BUILTINS = frozenset(
    {
        "abs", "all", "any", "bool", "bytes", "chr", "complex", "dict", "divmod", "enumerate",
        "filter", "float", "frozenset", "hash", "int", "len", "list", "map", "max", "min",
        "ord", "pow", "range", "repr", "reversed", "round", "set", "slice", "sorted", "str",
        "sum", "tuple", "zip",
    }
)  # fmt: skip


class StructuralRejection(Exception):
    """The source breaks a structural rule: ``code`` from :data:`STRUCTURAL_REASONS`, ``message``."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(code, message)
        self.code = code
        self.message = message

    def __str__(self) -> str:
        return f"[{self.code}] {self.message}"


def _reject(code: str, message: str) -> StructuralRejection:
    return StructuralRejection(code, message)


def _check_imports(tree: ast.Module, allowed: Collection[str]) -> list[str]:
    imported: set[str] = set()
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                raise _reject(
                    "forbidden_import",
                    f"line {node.lineno}: relative import; use only standard-library modules",
                )
            names = [node.module or ""]
        elif isinstance(node, ast.Name) and node.id == "__import__":
            raise _reject(
                "forbidden_import",
                f"line {node.lineno}: __import__ is not allowed; use an import statement",
            )
        for name in names:
            top = name.partition(".")[0]
            if top not in allowed:
                raise _reject(
                    "forbidden_import",
                    f"line {getattr(node, 'lineno', '?')}: module {name!r} is not allowed; use only {', '.join(sorted(allowed))}",
                )
            imported.add(top)
    return sorted(imported)


def _module_names(tree: ast.Module) -> set[str]:
    """Names bound at module level by imports (the modules whose functions constants may call)."""
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                names.add(alias.asname or alias.name.partition(".")[0])
    return names


def _constant_expression_problem(
    value: ast.expr, modules: set[str], helpers: Collection[str] = ()
) -> str | None:
    """Why ``value`` is not a side-effect-free constant expression, or None when it is.

    ``helpers``: names of functions defined at module level that may be called too (class
    bodies and default arguments may call them: the tool-use corpus builds schemas so)."""
    for node in ast.walk(value):
        if isinstance(node, (ast.Await, ast.Yield, ast.YieldFrom, ast.NamedExpr)):
            return f"a {type(node).__name__} expression"
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and (func.id in PURE_BUILTINS or func.id in helpers):
                continue
            root = func
            while isinstance(root, ast.Attribute):
                root = root.value
            if (
                isinstance(func, ast.Attribute)
                and isinstance(root, ast.Name)
                and root.id in modules
            ):
                continue
            return f"a call to {ast.unparse(func)}()"
    return None


_DECORATORS = frozenset({"staticmethod", "classmethod", "property"})


def _decorator_problem(decorator: ast.expr, modules: set[str], helpers: set[str]) -> str | None:
    """A decorator is called when its ``def`` runs: only the method kinds, functions of
    imported modules, the module's own functions and a property's ``.setter``/``.deleter``."""
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    root = target
    while isinstance(root, ast.Attribute):
        root = root.value
    if isinstance(target, ast.Name) and target.id in _DECORATORS | helpers:
        pass
    elif (
        isinstance(target, ast.Attribute)
        and isinstance(root, ast.Name)
        and (root.id in modules or target.attr in ("setter", "getter", "deleter"))
    ):
        pass
    else:
        return f"a call to {ast.unparse(target)}()"
    if isinstance(decorator, ast.Call):
        return _constant_expression_problem(decorator, modules, helpers)
    return None


def _definition_problem(node: ast.stmt, modules: set[str], helpers: set[str]) -> str | None:
    """What runs when a ``def`` or ``class`` statement itself runs: decorators, default
    arguments, base classes and, for a class, its body. None when all of it is constant
    (calls of functions the module defines are allowed here, see ``helpers``)."""
    for decorator in node.decorator_list:  # type: ignore[attr-defined]
        problem = _decorator_problem(decorator, modules, helpers)
        if problem is not None:
            return f"{problem} as a decorator of {node.name}"  # type: ignore[attr-defined]
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        args = node.args
        parts = [*args.defaults, *(d for d in args.kw_defaults if d)]
        for part in parts:
            problem = _constant_expression_problem(part, modules, helpers)
            if problem is not None:
                return f"{problem} in a decorator or default argument of {node.name}()"
        return None
    if isinstance(node, ast.ClassDef):
        parts = [*node.bases, *(k.value for k in node.keywords)]
        for part in parts:
            problem = _constant_expression_problem(part, modules, helpers)
            if problem is not None:
                return f"{problem} in a decorator or base of class {node.name}"
        for index, stmt in enumerate(node.body):
            problem = _statement_problem(stmt, index, modules, helpers, in_class=True)
            if problem is not None:
                return f"{problem} in the body of class {node.name}"
    return None


def _statement_problem(
    node: ast.stmt, index: int, modules: set[str], helpers: set[str], in_class: bool = False
) -> str | None:
    """Why running ``node`` at import time could have a side effect, or None."""
    if isinstance(node, (ast.Import, ast.ImportFrom, ast.Pass)):
        return None
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return _definition_problem(node, modules, helpers)
    if (
        index == 0
        and isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    ):
        return None  # a docstring
    if isinstance(node, (ast.Assign, ast.AnnAssign)):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        for target in targets:
            for part in ast.walk(target):
                if isinstance(part, (ast.Attribute, ast.Subscript, ast.Starred)):
                    return f"an assignment to {ast.unparse(part)}"
        if node.value is not None:
            # Module-level constants may not call the module's own functions (the stricter,
            # original rule); class attributes may, as the tool-use corpus's schemas do.
            return _constant_expression_problem(node.value, modules, helpers if in_class else ())
        return None
    return "the statement " + repr(ast.unparse(node).splitlines()[0][:60])


def _check_module_level(tree: ast.Module) -> None:
    modules = _module_names(tree)
    helpers = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    for index, node in enumerate(tree.body):
        problem = _statement_problem(node, index, modules, helpers)
        if problem is not None:
            raise _reject(
                "top_level_side_effect",
                f"line {node.lineno}: module level has {problem}; keep module level to imports, "
                "defs, classes and constants, and move the rest into a method",
            )


def _class_methods(
    tree: ast.Module, cls: ast.ClassDef
) -> dict[str, ast.FunctionDef | ast.AsyncFunctionDef]:
    """Methods of ``cls`` including those of base classes defined in the same module."""
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    methods: dict[str, ast.FunctionDef | ast.AsyncFunctionDef] = {}
    order, seen = [cls], set()
    while order:
        current = order.pop(0)
        if current.name in seen:
            continue
        seen.add(current.name)
        for item in current.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                methods.setdefault(item.name, item)
        order += [
            classes[b.id] for b in current.bases if isinstance(b, ast.Name) and b.id in classes
        ]
    return methods


def _required_positional(args: ast.arguments) -> int:
    """Positional parameters without a default, not counting ``self``."""
    positional = args.posonlyargs + args.args
    return max(0, len(positional) - len(args.defaults) - 1)


def _check_signatures(methods: dict[str, Any], class_name: str) -> None:
    missing = [m for m in REQUIRED_METHODS if m not in methods]
    if missing:
        raise _reject(
            "missing_method",
            f"class {class_name} has no {', '.join(missing)}; define every contract method",
        )
    init = methods.get("__init__")
    if init is None:
        raise _reject(
            "init_signature",
            f"class {class_name} has no __init__; define __init__(self, max_turns=10, **kwargs)",
        )
    args = init.args
    takes_max_turns = any(a.arg == "max_turns" for a in args.args + args.kwonlyargs)
    required_kwonly = [
        a.arg for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is None
    ]
    if not takes_max_turns or args.kwarg is None or _required_positional(args) or required_kwonly:
        raise _reject(
            "init_signature",
            f"{class_name}.__init__ must be callable as __init__(max_turns=10, **kwargs); "
            "give every other parameter a default and accept **kwargs",
        )
    for name, wanted in (("reset", 0), ("step", 1), ("solution", 0), ("close", 0)):
        args = methods[name].args
        positional = len(args.posonlyargs + args.args) - 1
        if _required_positional(args) > wanted or (positional < wanted and args.vararg is None):
            raise _reject(
                "method_signature",
                f"{class_name}.{name} must take {wanted or 'no'} argument(s) besides self",
            )
    reset = methods["reset"].args
    if not any(a.arg == "seed" for a in reset.args + reset.kwonlyargs) and reset.kwarg is None:
        raise _reject(
            "method_signature", f"{class_name}.reset must accept seed: def reset(self, seed=None)"
        )


def _check_skill(cls: ast.ClassDef, class_name: str, expected: str | None) -> str | None:
    declared = None
    for item in cls.body:
        if isinstance(item, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "skill" for t in item.targets
        ):
            declared = item.value
        elif (
            isinstance(item, ast.AnnAssign)
            and isinstance(item.target, ast.Name)
            and item.target.id == "skill"
        ):
            declared = item.value
    if not (isinstance(declared, ast.Constant) and isinstance(declared.value, str)):
        return None  # absent or computed: the record's skill stands
    skill = declared.value
    known = (*se.SKILLS, se.TOOL_USE)
    if skill not in known:
        raise _reject(
            "unknown_skill", f"{class_name}.skill is {skill!r}; use one of {', '.join(known)}"
        )
    if expected is not None and skill != expected:
        raise _reject(
            "skill_mismatch",
            f"{class_name}.skill is {skill!r} but the environment was made for {expected!r}; make them agree",
        )
    return skill


def check_structure(
    source: str,
    *,
    allowed_imports: Collection[str],
    skill: str | None = None,
    max_source_bytes: int = DEFAULT_MAX_SOURCE_BYTES,
) -> dict[str, Any]:
    """Check ``source`` without running it; return what was found (class, imports, sizes).

    Raises :class:`StructuralRejection` for the first broken rule (see the module docstring).
    Thread-safe: CPython 3.11 before 3.11.8 can fail ``ast.parse`` running in several threads
    at once ("SystemError: AST constructor recursion depth mismatch", gh-106905), and
    ``validate_many`` calls this from threads, so all of its parsing is serialized.
    """
    with se.PARSE_LOCK:
        try:
            return _check_structure(source, allowed_imports, skill, max_source_bytes)
        except (RecursionError, MemoryError):
            # Hostile structure (an expression nested thousands deep) exhausts the parser's or
            # a recursive check's stack: a verdict on the source, never a crash of the caller.
            raise _reject(
                "too_deep",
                "the source nests an expression or block too deeply to check; flatten it "
                "(use loops or lists instead of deeply nested expressions)",
            ) from None


def _check_structure(
    source: str, allowed_imports: Collection[str], skill: str | None, max_source_bytes: int
) -> dict[str, Any]:
    size = len(source.encode("utf-8", errors="surrogatepass"))
    if size > max_source_bytes:
        raise _reject(
            "source_too_large", f"the source is {size} bytes (limit {max_source_bytes}); shorten it"
        )
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise _reject("syntax_error", f"line {exc.lineno}: {exc.msg}; fix the syntax") from None
    except ValueError as exc:  # e.g. null bytes
        raise _reject("syntax_error", f"{exc}; fix the source text") from None
    try:  # the compiler's own limits (statically nested blocks, ...) without running anything
        compile(source, "<environment>", "exec", dont_inherit=True)  # not the tree: deeper
    except SyntaxError as exc:
        raise _reject("syntax_error", f"line {exc.lineno}: {exc.msg}; fix the syntax") from None
    imports = _check_imports(tree, allowed_imports)
    _check_module_level(tree)
    env_classes = [
        n.name for n in tree.body if isinstance(n, ast.ClassDef) and n.name.endswith("Env")
    ]
    if len(env_classes) != 1:
        code = "no_env_class" if not env_classes else "multiple_env_classes"
        try:
            se.find_env_class(source, origin="source")
        except se.SourceError as exc:
            raise _reject(code, str(exc)) from None
    class_name = se.find_env_class(source, origin="source")
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name)
    _check_signatures(_class_methods(tree, cls), class_name)
    declared_skill = _check_skill(cls, class_name, skill)
    return {
        "class_name": class_name,
        "source_bytes": size,
        "imports": imports,
        "declared_skill": declared_skill,
    }
