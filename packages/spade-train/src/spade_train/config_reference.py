"""The recipe reference, rendered from the typed configuration itself.

Every key of a recipe is a field of :class:`spade_train.config.RunConfig` (sections are nested
models) or of a backend's options model (``backend.options``, one per registered backend).
:func:`config_fields` walks them all; a field's description is its ``Field(description=...)``
or the docstring written under it. :func:`render_markdown` is the documentation's "Recipe
keys" page, headed by how many fields are described and which are not, so a missing
description shows where it is read.
"""

from __future__ import annotations

import ast
import inspect
import json
import textwrap
import types
import typing
from dataclasses import dataclass
from functools import cache
from typing import Any

import annotated_types as at
from pydantic import BaseModel
from pydantic_core import PydanticUndefined

__all__ = ["FieldDoc", "config_fields", "render_markdown", "undescribed"]


@dataclass(frozen=True)
class FieldDoc:
    """One recipe key: where it is (``section`` heading and dotted ``path``), its type, its
    default, its bounds and its description (empty when the field has none)."""

    section: str
    path: str
    type: str
    default: str
    bounds: str
    description: str
    owner: str
    """``Class.field`` that declares it (a model used twice is described once)."""


@cache
def _docstrings(cls: type) -> dict[str, str]:
    """Attribute docstrings (a string right under ``name: type = ...``) of ``cls``'s body."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    except (OSError, TypeError, SyntaxError):
        return {}
    body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
    out = {}
    for node, nxt in zip(body, body[1:], strict=False):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(nxt, ast.Expr)
            and isinstance(nxt.value, ast.Constant)
            and isinstance(nxt.value.value, str)
        ):
            out[node.target.id] = inspect.cleandoc(nxt.value.value)
    return out


def _description(model: type[BaseModel], name: str) -> tuple[str, str]:
    field = model.model_fields[name]
    for cls in model.__mro__:
        if isinstance(cls, type) and issubclass(cls, BaseModel) and name in _docstrings(cls):
            text = field.description or _docstrings(cls)[name]
            return " ".join(text.split()), f"{cls.__name__}.{name}"
    return " ".join((field.description or "").split()), f"{model.__name__}.{name}"


def _type(ann: Any) -> str:
    origin, args = typing.get_origin(ann), typing.get_args(ann)
    if origin is typing.Literal:
        return "one of " + ", ".join(f"`{a}`" for a in args)
    if origin in (typing.Union, types.UnionType):
        parts = [_type(a) for a in args if a is not type(None)]
        return " or ".join(parts) + (" or null" if type(None) in args else "")
    if origin is not None:
        inner = ", ".join(_type(a) for a in args)
        return f"{getattr(origin, '__name__', str(origin))}[{inner}]"
    if ann is Any:
        return "any"
    return getattr(ann, "__name__", str(ann).replace("typing.", ""))


def _model_of(ann: Any) -> type[BaseModel] | None:
    return ann if isinstance(ann, type) and issubclass(ann, BaseModel) else None


def _default(model: type[BaseModel], name: str) -> str:
    field = model.model_fields[name]
    if field.default_factory is not None:
        value = field.default_factory()  # type: ignore[call-arg]
    elif field.default is PydanticUndefined:
        return "required"
    else:
        value = field.default
    if isinstance(value, BaseModel):
        return "(section)"
    try:
        return f"`{json.dumps(value)}`"
    except TypeError:
        return f"`{value!r}`"


def _bounds(model: type[BaseModel], name: str) -> str:
    signs = ((at.Ge, "≥", "ge"), (at.Gt, ">", "gt"), (at.Le, "≤", "le"), (at.Lt, "<", "lt"))
    out = []
    for meta in model.model_fields[name].metadata:
        for kind, sign, attr in signs:
            if isinstance(meta, kind):
                out.append(f"{sign} {getattr(meta, attr)}")
    return ", ".join(out)


def _walk(model: type[BaseModel], prefix: str, section: str) -> list[FieldDoc]:
    out: list[FieldDoc] = []
    nested = []
    for name, field in model.model_fields.items():
        path = f"{prefix}{name}"
        text, owner = _description(model, name)
        sub = _model_of(field.annotation)
        default = _default(model, name)
        out.append(
            FieldDoc(
                section, path, _type(field.annotation), default, _bounds(model, name), text, owner
            )  # fmt: skip
        )
        if sub is not None:
            nested.append((sub, path))
    for sub, path in nested:
        out += _walk(sub, f"{path}.", path)
    return out


def config_fields() -> list[FieldDoc]:
    """Every recipe key: the run configuration's fields, then each backend's options, then
    each designer reward's options (``reward.options``)."""
    from spade_train.backends import available_backends, backend_spec
    from spade_train.config import RunConfig
    from spade_train.core.rewards import DESIGNER_REWARDS

    fields = _walk(RunConfig, "", "run")
    for name in available_backends():
        options = backend_spec(name).options
        fields += _walk(options, "backend.options.", f"backend.options (backend.name: {name})")
    for name in DESIGNER_REWARDS.names():
        model = DESIGNER_REWARDS.get(name).options
        if model.model_fields:
            section = f"reward.options (reward.designer: {name})"
            fields += _walk(model, "reward.options.", section)
    return fields


def undescribed(fields: list[FieldDoc] | None = None) -> list[str]:
    """``Class.field`` of every field without a description (each declaration once)."""
    seen: dict[str, bool] = {}
    for f in fields if fields is not None else config_fields():
        seen[f.owner] = seen.get(f.owner, False) or bool(f.description)
    return sorted(owner for owner, described in seen.items() if not described)


def _cell(text: str) -> str:
    return text.replace("``", "`").replace("|", "\\|")


def render_markdown() -> str:
    """The "Recipe keys" page: coverage first, then one table per section."""
    fields = config_fields()
    missing = undescribed(fields)
    total = len({f.owner for f in fields})
    lines = [
        "# Recipe keys",
        "",
        "Every key a recipe (or a `key.path=value` override) may set, generated from the typed "
        "configuration (`spade_train.config.RunConfig` and the backends' option models) when "
        "this site is built. Unknown keys are refused when the recipe loads, with the nearest "
        "known key named.",
        "",
        f"**Described: {total - len(missing)} of {total} fields "
        f"({100 * (total - len(missing)) / max(1, total):.0f} %).**",
        "",
    ]
    if missing:
        lines += ["Fields without a description yet:", ""]
        lines += [f"- `{m}`" for m in missing] + [""]
    sections: dict[str, list[FieldDoc]] = {}
    for f in fields:
        sections.setdefault(f.section, []).append(f)
    for section, rows in sections.items():
        lines += [f"## `{section}`", ""]
        head = next((f for f in fields if f.path == section), None)
        if head is not None and head.description:
            lines += [_cell(head.description), ""]
        lines += ["| key | type | default | description |", "|---|---|---|---|"]
        for f in rows:
            bounds = f" ({f.bounds})" if f.bounds else ""
            desc = _cell(f.description) or "*(no description yet)*"
            lines.append(f"| `{f.path}` | {_cell(f.type)}{bounds} | {_cell(f.default)} | {desc} |")
        lines.append("")
    return "\n".join(lines)
