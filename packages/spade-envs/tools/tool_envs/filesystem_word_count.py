# ruff: noqa: F821, E501
# ID: filesystem_word_count
# TITLE: Count a word across documents
# SPLIT: heldout
# HINT: List the documents directory, read every file, and count whole-word, case-insensitive occurrences of the word in each before adding them up.


class WordCountEnv(_ToolTask):
    domain = "filesystem"
    tools = [
        _tool("list_dir", "File names in a directory.", ("path",), path=_STR),
        _tool("read_file", "Contents of a file.", ("path",), path=_STR),
    ]

    def setup(self, rng):
        vocab = ["river", "stone", "lamp", "cloud", "paper", "bridge", "garden", "engine", "rivers", "lamps"]
        self.word = rng.choice(["river", "stone", "lamp", "cloud", "bridge"])
        self.files = {}
        for i in range(rng.randint(3, 5)):
            words = [rng.choice(vocab) for _ in range(rng.randint(15, 30))]
            words = [w.capitalize() if rng.random() < 0.2 else w for w in words]
            self.files[f"/docs/note{i}{rng.randint(10, 99)}.txt"] = " ".join(words)
        self.answer = sum(text.lower().split().count(self.word) for text in self.files.values())
        return (f"How many times does the word '{self.word}' appear (whole word, any case) in the files in /docs? "
                "Answer as \\boxed{N}.")

    def tool_list_dir(self, path):
        return sorted(p.rsplit("/", 1)[1] for p in self.files if p.rsplit("/", 1)[0] == path.rstrip("/"))

    def tool_read_file(self, path):
        if path not in self.files:
            raise ValueError(f"no file {path!r}")
        return self.files[path]

    def check(self, answer):
        return _number(answer) == self.answer

    def plan(self):
        return [_act(_call("list_dir", path="/docs")),
                _act(*[_call("read_file", path=p) for p in sorted(self.files)]), f"\\boxed{{{self.answer}}}"]
