# ruff: noqa: F821, E501
# ID: filesystem_archive_move
# TITLE: Archive stale files
# SPLIT: train
# HINT: List the directory and check each file's modification day with stat; move exactly the files older than the cutoff into the archive directory, keep the name, then answer done.


class ArchiveMoveEnv(_ToolTask):
    domain = "filesystem"
    tools = [
        _tool("list_dir", "File names in a directory.", ("path",), path=_STR),
        _tool("stat", "Last-modified day number of a file.", ("path",), path=_STR),
        _tool("move", "Move a file to a new path.", ("src", "dst"), src=_STR, dst=_STR),
    ]

    def setup(self, rng):
        self.cutoff = rng.randint(100, 200)
        names = rng.sample(["a.csv", "b.csv", "c.json", "d.txt", "e.log", "f.md", "g.csv", "h.txt"], rng.randint(5, 7))
        self.days = {f"/inbox/{n}": rng.randint(50, 250) for n in names}
        self.files = dict(self.days)
        self.stale = sorted(p for p, d in self.days.items() if d < self.cutoff)
        return (f"Move every file in /inbox last modified before day {self.cutoff} to /archive (same file name); "
                "leave the others. When finished, put the word done inside \\boxed{}.")

    def tool_list_dir(self, path):
        path = path.rstrip("/")
        return sorted(p.rsplit("/", 1)[1] for p in self.files if p.rsplit("/", 1)[0] == path)

    def tool_stat(self, path):
        if path not in self.files:
            raise ValueError(f"no file {path!r}")
        return self.files[path]

    def tool_move(self, src, dst):
        if src not in self.files or not dst.startswith("/") or dst in self.files:
            raise ValueError("source missing, destination exists, or destination not absolute")
        self.files[dst] = self.files.pop(src)
        return "moved"

    def check(self, answer):
        want = {(("/archive/" + p.rsplit("/", 1)[1]) if p in self.stale else p) for p in self.days}
        return answer.lower() == "done" and set(self.files) == want

    def plan(self):
        stats = [_call("stat", path=p) for p in sorted(self.days)]
        moves = [_call("move", src=p, dst="/archive/" + p.rsplit("/", 1)[1]) for p in self.stale]
        return [_act(_call("list_dir", path="/inbox")), _act(*stats)] + ([_act(*moves)] if moves else []) + ["\\boxed{done}"]
