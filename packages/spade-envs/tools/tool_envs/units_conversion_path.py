# ruff: noqa: F821, E501
# ID: units_conversion_path
# TITLE: Converting through a chain of units
# SPLIT: train
# HINT: Only direct conversions between neighbouring units are listed; search outward from the source unit, record each factor along the path, and multiply them all to reach the target unit.


class ConversionPathEnv(_ToolTask):
    domain = "units"
    tools = [_tool("neighbours", "Units directly convertible from a unit: {unit: factor}.", ("unit",), unit=_STR)]

    def setup(self, rng):
        units = rng.sample(["arn", "bix", "cor", "dun", "elk", "fap", "gim", "hox"], 6)
        self.edges = {u: {} for u in units}
        for a, b in zip(units, units[1:], strict=False):
            f = rng.choice([2, 3, 4, 5, 6, 8, 10, 12])
            self.edges[a][b], self.edges[b][a] = f, 1 / f
        self.path = units
        self.value = rng.randint(1, 9)
        self.src, self.dst = units[0], units[-1]
        total = self.value
        for a, b in zip(units, units[1:], strict=False):
            total *= self.edges[a][b]
        self.answer = total
        return f"How many {self.dst} are {self.value} {self.src}? Answer as \\boxed{{N}}."

    def tool_neighbours(self, unit):
        return {k: round(v, 6) for k, v in self.edges[unit.lower()].items()}

    def check(self, answer):
        value = _number(answer)
        return value is not None and abs(value - self.answer) <= 1e-6 * self.answer + 0.01

    def plan(self):
        return [_act(_call("neighbours", unit=u)) for u in self.path[:-1]] + [f"\\boxed{{{self.answer:g}}}"]
