# ruff: noqa: F821, E501
# ID: database_manager_chain
# TITLE: Up the reporting line
# SPLIT: train
# HINT: Find the employee by name to get a manager id, then fetch each manager by id in turn, counting the levels, until you reach the level asked for.


class ManagerChainEnv(_ToolTask):
    domain = "database"
    tools = [
        _tool("find_employee", "An employee record by exact name.", ("name",), name=_STR),
        _tool("get_employee", "An employee record by id.", ("employee_id",), employee_id=_INT),
    ]

    def setup(self, rng):
        first = ["ari", "bea", "cal", "dee", "eve", "fin", "gus", "ida", "jon", "kai", "liv", "max"]
        names = rng.sample(first, 10)
        ids = rng.sample(range(100, 999), 10)
        self.staff = {ids[0]: {"id": ids[0], "name": names[0], "manager_id": None}}
        for i in range(1, 10):
            self.staff[ids[i]] = {"id": ids[i], "name": names[i], "manager_id": ids[rng.randrange(max(0, i - 3), i)]}
        def depth(e):
            return 0 if e["manager_id"] is None else 1 + depth(self.staff[e["manager_id"]])

        self.start = max(self.staff.values(), key=lambda e: (depth(e), e["id"]))
        self.levels = min(depth(self.start), rng.randint(2, 3))
        chain, e = [], self.start
        for _ in range(self.levels):
            e = self.staff[e["manager_id"]]
            chain.append(e["id"])
        self.chain, self.answer = chain, e["name"]
        return (f"Who is {self.levels} levels above {self.start['name']} in the reporting line (their manager is 1 "
                "level up)? Answer with the name as \\boxed{name}.")

    def tool_find_employee(self, name):
        for e in self.staff.values():
            if e["name"] == name.lower():
                return e
        raise ValueError(f"no employee {name!r}")

    def tool_get_employee(self, employee_id):
        return self.staff[employee_id]

    def check(self, answer):
        return answer.lower() == self.answer

    def plan(self):
        return [_act(_call("find_employee", name=self.start["name"]))] + [
            _act(_call("get_employee", employee_id=i)) for i in self.chain] + [f"\\boxed{{{self.answer}}}"]
