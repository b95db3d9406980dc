# ruff: noqa: F821, E501
# ID: filesystem_pointer_chain
# TITLE: Follow the pointer files
# SPLIT: train
# HINT: Read the start file; each file either names the next path to read or holds the access code, so keep reading the path it points to until you reach the code.


class PointerChainEnv(_ToolTask):
    domain = "filesystem"
    tools = [_tool("read_file", "Contents of a file.", ("path",), path=_STR)]

    def setup(self, rng):
        words = ["alpha", "bravo", "delta", "ember", "frost", "gale", "haze", "iris", "jade"]
        chain = [f"/{rng.choice(['home', 'srv', 'opt'])}/{w}{rng.randint(1, 9)}.txt" for w in rng.sample(words, rng.randint(4, 6))]
        self.code = str(rng.randint(100000, 999999))
        self.files = {p: f"next: {chain[i + 1]}" for i, p in enumerate(chain[:-1])}
        self.files[chain[-1]] = f"access code {self.code}"
        for w in words:
            decoy = f"/tmp/{w}.txt"
            self.files.setdefault(decoy, f"access code {rng.randint(100000, 999999)}")
        self.chain = chain
        return f"Start by reading {chain[0]} and follow the pointers to the access code. Answer as \\boxed{{CODE}}."

    def tool_read_file(self, path):
        if path not in self.files:
            raise ValueError(f"no file {path!r}")
        return self.files[path]

    def check(self, answer):
        return answer == self.code

    def plan(self):
        return [_act(_call("read_file", path=p)) for p in self.chain] + [f"\\boxed{{{self.code}}}"]
