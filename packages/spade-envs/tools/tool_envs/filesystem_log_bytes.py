# ruff: noqa: F821, E501
# ID: filesystem_log_bytes
# TITLE: Total size of log files
# SPLIT: train
# HINT: Walk the tree from the given directory: list each directory, descend into every subdirectory, and add the sizes reported by stat for files with the asked extension only.


class LogBytesEnv(_ToolTask):
    domain = "filesystem"
    tools = [
        _tool("list_dir", "Entries of a directory; directories end with '/'.", ("path",), path=_STR),
        _tool("stat", "Size in bytes of a file.", ("path",), path=_STR),
    ]

    def setup(self, rng):
        self.ext = rng.choice([".log", ".tmp", ".bak"])
        self.files = {}
        dirs = ["/data", "/data/app", "/data/app/old", "/data/web", "/data/db"]
        for d in dirs:
            for i in range(rng.randint(1, 4)):
                ext = rng.choice([".log", ".tmp", ".bak", ".txt"])
                self.files[f"{d}/f{rng.randint(10, 99)}{i}{ext}"] = rng.randint(100, 50000)
        self.dirs = dirs
        self.answer = sum(s for p, s in self.files.items() if p.endswith(self.ext))
        return f"What is the total size in bytes of all {self.ext} files under /data (recursively)? Answer as \\boxed{{N}}."

    def tool_list_dir(self, path):
        path = path.rstrip("/")
        if path not in self.dirs:
            raise ValueError(f"no directory {path!r}")
        subs = [d.rsplit("/", 1)[1] + "/" for d in self.dirs if d.rsplit("/", 1)[0] == path]
        return sorted(subs + [p.rsplit("/", 1)[1] for p in self.files if p.rsplit("/", 1)[0] == path])

    def tool_stat(self, path):
        if path not in self.files:
            raise ValueError(f"no file {path!r}")
        return self.files[path]

    def check(self, answer):
        return _number(answer) == self.answer

    def plan(self):
        lists = [_call("list_dir", path=d) for d in self.dirs]
        stats = [_call("stat", path=p) for p in sorted(self.files) if p.endswith(self.ext)]
        return [_act(lists[0]), _act(*lists[1:]), _act(*stats) if stats else _act(lists[0]), f"\\boxed{{{self.answer}}}"]
