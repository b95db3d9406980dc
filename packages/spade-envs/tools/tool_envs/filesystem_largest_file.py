# ruff: noqa: F821, E501
# ID: filesystem_largest_file
# TITLE: The largest file in a project
# SPLIT: train
# HINT: Use find to get every file path under the root at once, then stat them all in one reply and pick the largest; the answer is the full path.


class LargestFileEnv(_ToolTask):
    domain = "filesystem"
    tools = [
        _tool("find", "All file paths under a directory whose names contain a substring ('' for all).",
              ("root", "contains"), root=_STR, contains=_STR),
        _tool("stat", "Size in bytes of a file.", ("path",), path=_STR),
    ]

    def setup(self, rng):
        self.root = f"/proj{rng.randint(1, 9)}"
        self.files = {}
        for d in ["src", "docs", "assets", "build"]:
            for i in range(rng.randint(2, 4)):
                self.files[f"{self.root}/{d}/{rng.choice(['main', 'util', 'img', 'notes'])}{i}{rng.randint(0, 99)}.dat"] = 0
        sizes = rng.sample(range(1000, 900000), len(self.files))
        self.files = {p: s for p, s in zip(sorted(self.files), sizes, strict=True)}
        self.answer = max(self.files, key=self.files.get)
        return f"Which file under {self.root} is the largest? Answer with its full path as \\boxed{{/path}}."

    def tool_find(self, root, contains):
        root = root.rstrip("/")
        return sorted(p for p in self.files if p.startswith(root + "/") and contains in p.rsplit("/", 1)[1])

    def tool_stat(self, path):
        if path not in self.files:
            raise ValueError(f"no file {path!r}")
        return self.files[path]

    def check(self, answer):
        return answer == self.answer

    def plan(self):
        return [_act(_call("find", root=self.root, contains="")),
                _act(*[_call("stat", path=p) for p in sorted(self.files)][:10]),
                _act(*[_call("stat", path=p) for p in sorted(self.files)][10:] or [_call("stat", path=self.answer)]),
                f"\\boxed{{{self.answer}}}"]
