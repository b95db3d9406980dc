"""mkdocs hooks of the documentation site (mkdocs.yml ``hooks:``).

* ``reference/config.md`` is generated from the typed configuration
  (:func:`spade_train.config_reference.render_markdown`): every recipe key with its type,
  default and description, headed by how many fields are described.
* ``recipes.md``'s ``<!-- recipes -->`` marker becomes the table of shipped recipes (purpose
  and upstream counterpart from each recipe's opening comment, launcher from ``cmd/``), and
  ``<!-- quickstart-reward -->`` the quickstart's designer penalties as ``spade train
  --dry-run`` prints them (one function writes both).
* ``results/index.md``'s ``<!-- results -->`` marker becomes the list of dated result pages
  (``docs/results/YYYY-MM-DD-topic.md``), newest first: a new page needs no nav entry.

The build runs in an environment with spade-train installed (``scripts/test.sh``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parents[1]
_DATED = re.compile(r"^(\d{4}-\d{2}-\d{2})-.+\.md$")


def on_files(files: Files, config: Any) -> Files:
    from spade_train.config_reference import render_markdown

    files.append(File.generated(config, "reference/config.md", content=render_markdown()))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    if page.file.src_uri == "recipes.md":
        markdown = markdown.replace("<!-- recipes -->", _recipes_table())
        markdown = markdown.replace("<!-- quickstart-reward -->", _quickstart_reward())
    if page.file.src_uri == "results/index.md":
        markdown = markdown.replace("<!-- results -->", _results_list(files))
    return markdown


def _launchers() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for script in sorted((ROOT / "cmd").rglob("*.sh")):
        found = re.search(r"--recipe\s+([\w.-]+)", script.read_text(encoding="utf-8"))
        if found:
            out.setdefault(found.group(1), []).append(str(script.relative_to(ROOT)))
    return out


def _recipes_table() -> str:
    from spade_train.recipe_notes import recipe_notes

    launchers = _launchers()
    rows = ["| recipe | what it is | upstream counterpart | launcher |", "|---|---|---|---|"]
    for note in recipe_notes():
        upstream = f"`{note.upstream}`" if note.upstream else "none (this project's)"
        here = ", ".join(f"`{x}`" for x in launchers.get(note.name, [])) or "—"
        rows.append(f"| `{note.name}` | {note.purpose} | {upstream} | {here} |")
    return "\n".join(rows)


def _quickstart_reward() -> str:
    from spade_train.cli import designer_reward_summary
    from spade_train.config import load_recipe

    return f"`{designer_reward_summary(load_recipe('quickstart').reward)}`"


def _results_list(files: Files) -> str:
    pages = []
    for file in files:
        name = Path(file.src_uri).name
        found = _DATED.match(name)
        if file.src_uri.startswith("results/") and found:
            text = Path(file.abs_src_path or "").read_text(encoding="utf-8")
            title = next((x[2:].strip() for x in text.splitlines() if x.startswith("# ")), name)
            pages.append((found.group(1), name, title))
    lines = [f"- [{title}]({name})" for _, name, title in sorted(pages, reverse=True)]
    return "\n".join(lines) or "No dated result pages yet."
