# ruff: noqa: F821, E501
# ID: units_mixed_mass
# TITLE: Summing masses in unusual units
# SPLIT: train
# HINT: The units are not standard; ask for every unit's factor to grams, convert each quantity separately, add them in grams and round only the final total.


class MixedMassEnv(_ToolTask):
    domain = "units"
    tools = [
        _tool("list_units", "The mass units in use."),
        _tool("grams_per_unit", "How many grams one unit weighs.", ("unit",), unit=_STR),
    ]

    def setup(self, rng):
        self.factors = {u: round(rng.uniform(0.5, 400), 3) for u in rng.sample(["drab", "kell", "mott", "pirn", "quog", "sarn"], 4)}
        self.items = [[round(rng.uniform(1, 50), 1), rng.choice(sorted(self.factors))] for _ in range(rng.randint(3, 5))]
        self.answer = round(sum(q * self.factors[u] for q, u in self.items))
        listing = ", ".join(f"{q} {u}" for q, u in self.items)
        return f"A crate holds {listing}. What is its total mass in grams? Answer as \\boxed{{N}} (nearest gram)."

    def tool_list_units(self):
        return sorted(self.factors)

    def tool_grams_per_unit(self, unit):
        return self.factors[unit.lower()]

    def check(self, answer):
        value = _number(answer)
        return value is not None and abs(value - self.answer) <= 1

    def plan(self):
        return [_act(*[_call("grams_per_unit", unit=u) for u in sorted(self.factors)]), f"\\boxed{{{self.answer}}}"]
