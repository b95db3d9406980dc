"""How many environments the validator judges right: the adversarial suite (each file's
``# expect:`` reason family) or shipped corpora (all valid), on 5 seeds drawn from a root.

    uv run --package spade-corpus python packages/spade-corpus/benchmarks/suite_score.py ROOT suite
    uv run --package spade-corpus python packages/spade-corpus/benchmarks/suite_score.py ROOT example,starter,tool_use

Prints one ``MISS`` line per wrong verdict and a summary line (right / total, envs/s).
"""

import re, sys, time
from pathlib import Path
import spade_envs as se
from spade_corpus import ValidationItem, validate_many
from spade_corpus.validate import corpus_items
root = int(sys.argv[1]) if len(sys.argv) > 1 else 1234
which = sys.argv[2] if len(sys.argv) > 2 else "suite"
seeds = se.draw_seeds(root, 5)
H = re.compile(r"^# (expect|family|hint): (.*)$", re.M)
if which == "suite":
    D = Path("packages/spade-corpus/tests/adversarial")
    files = sorted(D.glob("*/*.py"))
    items, exp = [], {}
    for p in files:
        h = dict(H.findall(p.read_text()[:600]))
        cid = f"{p.parent.name}/{p.stem}"
        items.append(ValidationItem(p.read_text(), h["hint"], cid)); exp[cid] = h["expect"]
else:
    items = []
    for name in which.split(","):
        items += corpus_items(se.load_corpus(name))
    exp = {i.env_id: "valid" for i in items}
t = time.perf_counter()
reps = validate_many(items, workers=2, progress=False, seeds=seeds)
dt = time.perf_counter() - t
ok = 0
for r in reps:
    e = exp[r.env_id]
    got = "valid" if r.valid else (r.reason or "").split(":")[0]
    right = got == e
    ok += right
    if not right:
        print(f"MISS {r.env_id}: expect {e} got {r.reason}: {(r.message or '')[:150]}")
print(f"root {root} seeds {seeds}: {ok}/{len(reps)} right, {len(reps)/dt:.2f} envs/s, {dt:.0f} s")
