"""The plots draw what was measured: gaps stay gaps, no panel is constant by construction, the
counts behind each point are shown, and several seeds give a mean with a band."""

from __future__ import annotations

import math

import matplotlib.pyplot as plt
import pytest
from matplotlib.collections import PolyCollection
from spade_train import plots
from spade_train.core.advantages import normalize_per_role
from spade_train.spread import reward_spread
from spade_train.steps.records import Scored


def _row(cycle, **values):
    return {"cycle": cycle, **values}


def _lines(runs, series):
    fig, ax = plt.subplots()
    plots._draw(ax, runs, series, "t", "y")
    data = {line.get_label(): (list(line.get_xdata()), list(line.get_ydata())) for line in ax.lines}
    bands = [c for c in ax.collections if isinstance(c, PolyCollection)]
    plt.close(fig)
    return data, bands


def test_a_missing_cycle_or_a_missing_value_is_a_gap_and_an_unmeasured_cycle_no_point():
    rows = [
        _row(1, **{"reward/regret_mean": 0.1, "heldout/return_hint": 0.5}),
        _row(2, **{"reward/regret_mean": None}),  # no valid design: no regret
        # cycle 3 never written (a resumed run, a torn line)
        _row(4, **{"reward/regret_mean": 0.3, "heldout/return_hint": 0.7}),
    ]
    data, _ = _lines([rows], [("reward/regret_mean", "regret"), ("heldout/return_hint", "h")])
    xs, ys = data["regret"]
    assert xs == [1, 2, 3, 4]
    assert ys[0] == 0.1 and math.isnan(ys[1]) and math.isnan(ys[2]) and ys[3] == 0.3
    # the held-out games were played at cycles 1 and 4: cycle 2 did not play them (no point),
    # and cycle 3's row is missing (a gap)
    xs, ys = data["h"]
    assert xs == [1, 3, 4] and ys[0] == 0.5 and math.isnan(ys[1]) and ys[2] == 0.7
    every_other = [
        _row(c, **({"heldout/return_hint": c / 10} if c % 2 else {})) for c in range(1, 6)
    ]
    data, _ = _lines([every_other], [("heldout/return_hint", "h")])
    assert data["h"] == ([1, 3, 5], [0.1, 0.3, 0.5])  # measured every other cycle: joined


def test_no_panel_plots_the_normalized_advantages_whose_spread_is_one_by_construction():
    # per-role normalization makes any non-constant role's spread exactly 1 ...
    values = normalize_per_role([0.1, 0.9, -0.3, 2.0, 5.0, 5.5], ["agent"] * 3 + ["designer"] * 3)
    for role in (values[:3], values[3:]):
        m = sum(role) / 3
        assert abs((sum((v - m) ** 2 for v in role) / 3) ** 0.5 - 1.0) < 1e-9
    # ... so the plots read the raw rewards' spread and the share of flat groups instead
    keys = {key for panel in plots._panels([[]]) for key, _ in panel[1]}
    assert not keys & {"adv/agent_std", "adv/designer_std"}
    assert {"adv/agent_reward_std", "adv/designer_flat_groups", "design/completions"} <= keys


def test_reward_spread_measures_the_raw_rewards_and_the_groups_without_signal():
    items = [
        Scored("designer", ("p1",), -1.0, []),
        Scored("designer", ("p1",), -1.0, []),  # both rejected alike: no signal
        Scored("designer", ("p2",), 0.5, []),
        Scored("designer", ("p2",), -0.8, []),
        Scored("agent", ("g1",), 1.0, []),
        Scored("agent", ("g2",), 0.0, []),  # a game played once: no group to compare with
    ]
    out = reward_spread(items)
    assert out["adv/designer_groups"] == 2 and out["adv/designer_flat_groups"] == 0.5
    assert out["adv/agent_groups"] == 2 and out["adv/agent_flat_groups"] == 1.0
    assert abs(out["adv/agent_reward_std"] - 0.5) < 1e-12
    empty = reward_spread([])
    assert empty["adv/agent_reward_std"] is None and empty["adv/designer_flat_groups"] is None


def test_several_seeds_draw_the_mean_and_a_min_to_max_band():
    runs = [[_row(c, **{"play/return_nohint": base + c / 10}) for c in (1, 2)] for base in (0, 1)]
    data, bands = _lines(runs, [("play/return_nohint", "no hint")])
    (label,) = data
    assert label == "no hint (mean of 2 runs)"
    assert data[label][0] == [1, 2] and data[label][1] == pytest.approx([0.6, 0.7])
    (band,) = bands
    ys = sorted({round(float(y), 6) for y in band.get_paths()[0].vertices[:, 1]})
    assert ys == [0.1, 0.2, 1.1, 1.2]


def test_write_plots_makes_the_summary_and_its_parts(tmp_path):
    rows = [
        _row(c, **{"design/completions": 4, "design/validity_rate": 0.25, "play/episodes": 48})
        for c in (1, 2, 3)
    ]
    paths = plots.write_plots(rows, tmp_path)
    assert [p.name for p in paths] == [f"{n}.png" for n in plots.PLOTS]
    assert all(p.stat().st_size > 10_000 for p in paths)
    assert not list(tmp_path.glob(".*"))  # no temp files left
