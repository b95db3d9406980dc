"""The recipe-key reference is rendered from the typed config: every field, and the fields
without a description named, so the documentation shows its own coverage."""

from __future__ import annotations

from spade_train.config import RunConfig
from spade_train.config_reference import config_fields, render_markdown, undescribed


def test_every_field_of_the_config_and_of_each_backends_options_is_rendered():
    fields = config_fields()
    paths = {f.path for f in fields}
    assert {"cycles", "designer.sampling.temperature", "agent.sampling.temperature"} <= paths
    assert "backend.options.inner_options" in paths  # the ray backend's own options
    assert set(RunConfig.model_fields) <= paths
    page = render_markdown()
    for f in fields:
        assert f"| `{f.path}` |" in page
    # a field described by the docstring under it, and one with bounds
    overlap = next(f for f in fields if f.path == "overlap")
    assert overlap.description.startswith("Run each cycle's update on the trainer")
    assert next(f for f in fields if f.path == "cycles").bounds == "≥ 1, ≤ 1000000"


def test_the_page_states_its_coverage_and_names_each_undescribed_field():
    fields = config_fields()
    missing = undescribed(fields)
    total = len({f.owner for f in fields})
    page = render_markdown()
    assert f"Described: {total - len(missing)} of {total} fields" in page
    for owner in missing:
        assert f"- `{owner}`" in page


def test_every_recipe_key_is_described():
    assert undescribed() == []
