import json

import pytest
from spade_corpus.memory import EnvironmentMemory, MemoryEntry, code_excerpt


def entry(i, skill="Math", win_rate=0.5, regret=0.1, cycle=0):
    return MemoryEntry(f"env{i}", skill, f"class E{i}Env: ...", win_rate, regret, cycle, hint="h")


def test_frontier_is_highest_regret_inside_the_band_across_skills():
    memory = EnvironmentMemory()
    memory.add(entry(1, "Math", 0.5, 0.9))
    memory.add(entry(2, "Math", 0.5, 0.8))
    memory.add(entry(3, "Logic", 0.3, 0.4))
    memory.add(entry(4, "Math", 0.95, 1.0))  # too easy despite its regret
    memory.add(entry(5, "Causal", 0.05, 1.0))  # too hard
    memory.add(entry(6, "Pattern", 0.86, 0.99))  # just outside the band
    sample = memory.sample(n_frontier=3, n_easy=1, n_hard=1)
    assert [e.env_id for e in sample.frontier] == ["env1", "env3", "env2"]  # skills alternate
    assert [e.env_id for e in sample.too_easy] == ["env4"]
    assert [e.env_id for e in sample.too_hard] == ["env5"]
    assert [e.env_id for e in memory.sample(n_frontier=5, skill="Math").frontier] == [
        "env1",
        "env2",
    ]


def test_negative_samples_are_seeded_by_index():
    memory = EnvironmentMemory(seed=2)
    for i in range(20):
        memory.add(entry(i, win_rate=0.95 if i % 2 else 0.02))
    a = memory.sample(0, 3, 3, index=1)
    assert a == memory.sample(0, 3, 3, index=1)
    assert any(memory.sample(0, 3, 3, index=k) != a for k in range(2, 6))
    assert all(e.win_rate > 0.9 for e in a.too_easy) and all(e.win_rate < 0.1 for e in a.too_hard)


def test_capacity_evicts_the_oldest_of_the_most_crowded_skill():
    memory = EnvironmentMemory(capacity=4)
    memory.add(entry(1, "Math", cycle=0))
    memory.add(entry(2, "Math", cycle=1))
    memory.add(entry(3, "Math", cycle=2))
    memory.add(entry(4, "Logic", cycle=0))
    evicted = memory.add(entry(5, "Logic", cycle=3))
    assert evicted.env_id == "env1" and len(memory) == 4
    assert memory.add(entry(5, "Logic", win_rate=0.2, cycle=4)) is None  # replacing is not growing
    assert {e.env_id for e in memory.entries()} == {"env2", "env3", "env4", "env5"}


def test_save_and_load_resume_exactly(tmp_path):
    memory = EnvironmentMemory(capacity=10, band=(0.2, 0.8), seed=5)
    for i in range(6):
        memory.add(entry(i, ["Math", "Logic"][i % 2], win_rate=i / 6, regret=i / 10, cycle=i))
    memory.update("env3", win_rate=0.6, regret=0.7, cycle=9)
    path = memory.save(tmp_path / "run" / "memory.json")
    again = EnvironmentMemory.load(path)
    assert again.entries() == memory.entries()
    assert again.sample(2, 1, 1, index=3) == memory.sample(2, 1, 1, index=3)
    assert [p.name for p in path.parent.iterdir()] == ["memory.json"]


def test_bad_input():
    with pytest.raises(ValueError, match="win_rate 1.5"):
        entry(1, win_rate=1.5)
    with pytest.raises(ValueError, match="band"):
        EnvironmentMemory(band=(0.9, 0.1))
    with pytest.raises(KeyError, match="not in the memory"):
        EnvironmentMemory().update("nope", win_rate=0.5, regret=0.0, cycle=1)


def test_load_errors_are_clear(tmp_path):
    with pytest.raises(FileNotFoundError, match="no environment memory"):
        EnvironmentMemory.load(tmp_path / "missing.json")
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(ValueError, match="not a valid memory file"):
        EnvironmentMemory.load(bad)
    bad.write_text(json.dumps({"format_version": 99}))
    with pytest.raises(ValueError, match="memory format 99"):
        EnvironmentMemory.load(bad)


def test_code_excerpt_keeps_whole_lines():
    source = "\n".join(f"line {i}" for i in range(100))
    excerpt = code_excerpt(source, max_lines=10)
    assert excerpt.splitlines()[:10] == [f"line {i}" for i in range(10)] and excerpt.endswith("# …")
    assert code_excerpt("x = 1\n") == "x = 1"
