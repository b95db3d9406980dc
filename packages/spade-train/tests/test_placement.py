"""Placement arithmetic without a cluster: bundles, the fit check's one-line errors, node order."""

from __future__ import annotations

import pytest
from spade_train.backends.placement import (
    BundleSite,
    NodeResources,
    PlacementSpec,
    assign,
    check_fits,
    order_sites,
)
from spade_train.errors import PlacementError


def test_per_gpu_bundles_and_spans():
    colocated = PlacementSpec(8, 8, engine_tp=2, colocate=True, cpus_per_gpu=2)
    assert colocated.bundles() == [{"GPU": 1.0, "CPU": 2}] * 8 and colocated.n_engines == 4
    assert colocated.engine_spans() == [[0, 1], [2, 3], [4, 5], [6, 7]]
    apart = PlacementSpec(4, 4, engine_tp=4, colocate=False)
    assert apart.n_bundles == 8 and apart.engine_spans() == [[4, 5, 6, 7]]
    assert (
        apart.trainer_share() == 1.0 and colocated.engine_share() + colocated.trainer_share() <= 1
    )
    with pytest.raises(PlacementError, match="multiple of"):
        PlacementSpec(8, 6, engine_tp=4)
    with pytest.raises(PlacementError, match="colocate"):
        PlacementSpec(4, 8, colocate=True)


def test_a_cluster_too_small_is_one_line():
    eight = [NodeResources("a", 8, 64)]
    check_fits(PlacementSpec(8, 8), eight)
    with pytest.raises(PlacementError) as info:
        check_fits(PlacementSpec(16, 16), eight)  # the old 30B layout: one node never holds it
    msg = str(info.value)
    assert "\n" not in msg and "needs 16 bundles" in msg and "a: 8 GPU 64 CPU" in msg
    check_fits(PlacementSpec(16, 16), eight + [NodeResources("b", 8, 64)])  # two nodes do
    with pytest.raises(PlacementError, match="largest node holds 4"):
        check_fits(PlacementSpec(8, 8, engine_tp=8), [NodeResources(n, 4, 8) for n in "abcd"])
    with pytest.raises(PlacementError, match="hold 2"):  # CPUs count too
        check_fits(PlacementSpec(4, 4, cpus_per_gpu=4), [NodeResources("a", 8, 8)])


def test_ranks_follow_nodes_and_engines_stay_on_one_node():
    # bundles landed interleaved over two nodes, GPUs out of order
    sites = [
        BundleSite(0, "n1", 1),
        BundleSite(1, "n2", 0),
        BundleSite(2, "n1", 0),
        BundleSite(3, "n2", 1),
    ]
    assert [(s.node, s.gpu) for s in order_sites(sites)] == [
        ("n1", 0),
        ("n1", 1),
        ("n2", 0),
        ("n2", 1),
    ]
    layout = assign(PlacementSpec(4, 4, engine_tp=2), sites)
    assert [s.bundle for s in layout.trainer] == [2, 0, 1, 3]
    assert [[s.bundle for s in span] for span in layout.engines] == [[2, 0], [1, 3]]
    with pytest.raises(PlacementError, match="span nodes"):
        assign(PlacementSpec(3, 3, engine_tp=3), sites[:3])
    gappy = [BundleSite(0, "n1", 0), BundleSite(1, "n1", 2)]
    with pytest.raises(PlacementError, match="not consecutive"):
        assign(PlacementSpec(2, 2, engine_tp=2), gappy)
