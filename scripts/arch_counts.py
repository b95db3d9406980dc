"""The architecture counts issue 41 asks for, read from the source tree (AST, no imports).

    python3 scripts/arch_counts.py [--json]

Counts, over ``packages/*/src``:

- ``any_params``: function parameters annotated exactly ``Any`` in spade_train, at the seams
  (the modules of the mypy ``disallow_any_explicit`` ratchet) and in all;
- ``mode_tests``: comparisons that read ``cfg.mode`` (or ``config.mode``) in the cycle, the
  loop and the play step;
- ``import_circles``: strongly connected groups of a package's modules importing each other;
- ``boxed_parsers``: regular expressions compiled over ``\\boxed{`` outside the one owner
  (``spade_envs.actions.boxed_answer``);
- ``http_clients``: modules that send OpenAI-compatible requests (``chat/completions``)
  themselves;
- ``registry_errors``: exception types raised by the registries (``Registry`` classes);
- ``files_over_500`` and ``functions_over_60``: module and function lengths in lines;
- ``undescribed_fields``: config-model fields (``spade_train.config*``, the reference
  renderer left out) without a docstring under them.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = sorted(ROOT.glob("packages/*/src"))
SEAMS = ("spade_train.steps.", "spade_train.cycle", "spade_train.loop", "spade_train.resources",
         "spade_train.sources", "spade_train.backends.base")  # fmt: skip
MODE_FILES = ("spade_train.cycle", "spade_train.loop", "spade_train.steps.play")
BOXED_OWNER = "spade_envs.actions"  # boxed_answer
CONFIG_PREFIX = "spade_train.config"


def modules() -> dict[str, tuple[Path, ast.Module]]:
    """Every source module by dotted name (game files of the corpora package left out)."""
    found = {}
    for src in SRC:
        if "corpora" in src.parent.name:
            continue
        for path in sorted(src.rglob("*.py")):
            parts = path.relative_to(src).with_suffix("").parts
            if "corpora" in parts:  # game files, where the corpora lived inside spade_envs
                continue
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            found[name] = (path, ast.parse(path.read_text(encoding="utf-8")))
    return found


def _is_any(node: ast.expr | None) -> bool:
    return (isinstance(node, ast.Name) and node.id == "Any") or (
        isinstance(node, ast.Attribute) and node.attr == "Any"
    )


def any_params(mods: dict[str, tuple[Path, ast.Module]]) -> dict[str, int]:
    total = seams = 0
    for name, (_, tree) in mods.items():
        if not name.startswith("spade_train"):
            continue
        for fn in ast.walk(tree):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                a = fn.args
                params = [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]
                n = sum(1 for p in params if p is not None and _is_any(p.annotation))
                total += n
                seams += n if name.startswith(SEAMS) else 0
    return {"seams": seams, "all": total}


def mode_tests(mods: dict[str, tuple[Path, ast.Module]]) -> int:
    count = 0
    for name in MODE_FILES:
        for node in ast.walk(mods[name][1]):
            if isinstance(node, ast.Compare):
                sides = [node.left, *node.comparators]
                count += any(isinstance(s, ast.Attribute) and s.attr == "mode" for s in sides)
    return count


def _imports(name: str, tree: ast.Module, names: set[str]) -> set[str]:
    """The package's own modules that ``name`` imports."""
    package = name if name in names and _is_package(name, names) else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = package.split(".")
                base = ".".join(up[: len(up) - node.level + 1] + ([base] if base else []))
            targets = [f"{base}.{a.name}" for a in node.names] + [base]
        for t in targets:
            while t and t not in names:
                t = t.rpartition(".")[0]
            if t and t != name and t.split(".")[0] == name.split(".")[0]:
                out.add(t)
    return out


def _is_package(name: str, names: set[str]) -> bool:
    return any(other.startswith(name + ".") for other in names)


def import_circles(mods: dict[str, tuple[Path, ast.Module]]) -> list[list[str]]:
    """Tarjan's strongly connected components of size > 1 (a package ``__init__`` that
    re-exports its modules is left out: importing it runs after its modules)."""
    names = set(mods)
    graph = {n: {t for t in _imports(n, tree, names) if not _is_package(t, names)}
             for n, (_, tree) in mods.items() if not _is_package(n, names)}  # fmt: skip
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    groups: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    sys.setrecursionlimit(10_000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return groups


def boxed_parsers(mods: dict[str, tuple[Path, ast.Module]]) -> list[str]:
    found = []
    for name, (_, tree) in mods.items():
        if name == BOXED_OWNER:
            continue
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in ("compile", "findall", "search", "match", "finditer")
                    and node.args and isinstance(node.args[0], ast.Constant)
                    and "boxed" in str(node.args[0].value)):  # fmt: skip
                found.append(f"{name}:{node.lineno}")
    return found


def http_clients(mods: dict[str, tuple[Path, ast.Module]]) -> list[str]:
    return sorted(
        name
        for name, (path, _) in mods.items()
        if "chat/completions" in path.read_text(encoding="utf-8")
        and any(
            k in path.read_text(encoding="utf-8")
            for k in ("urllib.request", "httpx.", "http.client", "openai.OpenAI", "AsyncOpenAI(")
        )  # fmt: skip
    )


def registry_errors(mods: dict[str, tuple[Path, ast.Module]]) -> list[str]:
    raised = set()
    for _, tree in mods.values():
        for cls in ast.walk(tree):
            if isinstance(cls, ast.ClassDef) and cls.name.endswith("Registry"):
                made = {m.name: {ast.unparse(r.value.func) for r in ast.walk(m)
                                 if isinstance(r, ast.Return) and isinstance(r.value, ast.Call)}
                        for m in cls.body if isinstance(m, ast.FunctionDef)}  # fmt: skip
                for node in ast.walk(cls):
                    if isinstance(node, ast.Raise) and node.exc is not None:
                        target = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
                        text = ast.unparse(target)
                        # ``raise self.unknown(name)``: the type that method returns
                        raised |= made.get(text.removeprefix("self."), {text}) or {text}
    return sorted(raised)


def lengths(mods: dict[str, tuple[Path, ast.Module]]) -> tuple[list[str], list[str]]:
    files, functions = [], []
    for name, (path, tree) in mods.items():
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > 500:
            files.append(f"{name} ({lines})")
        for fn in ast.walk(tree):
            if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = (fn.end_lineno or fn.lineno) - fn.lineno + 1
                if n > 60:
                    functions.append(f"{name}.{fn.name} ({n})")
    return files, functions


def undescribed_fields(mods: dict[str, tuple[Path, ast.Module]]) -> list[str]:
    missing = []
    models = [n for n in mods if n.startswith(CONFIG_PREFIX) and n != CONFIG_PREFIX + "_reference"]
    for name in sorted(models):
        for cls in ast.walk(mods[name][1]):
            if not isinstance(cls, ast.ClassDef):
                continue
            body = cls.body
            for i, node in enumerate(body):
                if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                    if node.target.id.startswith("_") or "ClassVar" in ast.unparse(node.annotation):
                        continue
                    nxt = body[i + 1] if i + 1 < len(body) else None
                    described = (isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant)
                                 and isinstance(nxt.value.value, str))  # fmt: skip
                    if not described:
                        missing.append(f"{cls.name}.{node.target.id}")
    return missing


def counts() -> dict[str, object]:
    mods = modules()
    files, functions = lengths(mods)
    return {
        "any_params": any_params(mods),
        "mode_tests": mode_tests(mods),
        "import_circles": import_circles(mods),
        "boxed_parsers": boxed_parsers(mods),
        "http_clients": http_clients(mods),
        "registry_errors": registry_errors(mods),
        "files_over_500": files,
        "functions_over_60": functions,
        "undescribed_fields": undescribed_fields(mods),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the lists as JSON")
    args = parser.parse_args()
    found = counts()
    if args.json:
        print(json.dumps(found, indent=1))
        return 0
    for key, value in found.items():
        shown = (
            value
            if isinstance(value, (int, dict))
            else f"{len(value)}  {', '.join(map(str, value))}"
        )
        print(f"{key:20s} {shown}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
