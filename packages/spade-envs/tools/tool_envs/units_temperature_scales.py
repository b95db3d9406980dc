# ruff: noqa: F821, E501
# ID: units_temperature_scales
# TITLE: Converting between invented temperature scales
# SPLIT: heldout
# HINT: Each scale is linear in kelvin with its own factor and offset; convert the reading to kelvin with the first scale's definition, then from kelvin with the second's, and do not skip the offsets.


class TemperatureScalesEnv(_ToolTask):
    domain = "units"
    tools = [_tool("scale_definition", "A scale's definition: degrees = factor * kelvin + offset.", ("scale",), scale=_STR)]

    def setup(self, rng):
        names = ["vorn", "quill", "sable", "tarrow", "umber"]
        self.defs = {n: {"factor": round(rng.uniform(0.5, 3), 3), "offset": round(rng.uniform(-500, 200), 1)} for n in names}
        self.a, self.b = rng.sample(names, 2)
        self.reading = round(rng.uniform(-50, 400), 1)
        kelvin = (self.reading - self.defs[self.a]["offset"]) / self.defs[self.a]["factor"]
        self.answer = round(self.defs[self.b]["factor"] * kelvin + self.defs[self.b]["offset"], 1)
        return (f"A thermometer reads {self.reading} degrees {self.a}. What is that in degrees {self.b}? "
                "Answer rounded to one decimal as \\boxed{N.N}.")

    def tool_scale_definition(self, scale):
        return self.defs[scale.lower()]

    def check(self, answer):
        value = _number(answer)
        return value is not None and abs(value - self.answer) <= 0.11

    def plan(self):
        return [_act(_call("scale_definition", scale=self.a)), _act(_call("scale_definition", scale=self.b)),
                f"\\boxed{{{self.answer:.1f}}}"]
