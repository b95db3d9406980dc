# ruff: noqa: F821, E501
# ID: units_route_speed
# TITLE: Average speed of a multi-leg route
# SPLIT: train
# HINT: Average speed is total distance over total time, not the mean of leg speeds; convert every leg's distance and time into the asked units first, then divide the sums.


class RouteSpeedEnv(_ToolTask):
    domain = "units"
    tools = [
        _tool("get_route", "Legs of a route: [[distance, distance_unit, time, time_unit]].", ("route_id",), route_id=_STR),
        _tool("convert", "Convert a value between two units of the same kind.", ("value", "from_unit", "to_unit"),
              value=_NUM, from_unit=_STR, to_unit=_STR),
    ]

    def setup(self, rng):
        self.scale = {"km": 1000.0, "mi": 1609.344, "lea": round(rng.uniform(3000, 6000), 1), "m": 1.0,
                      "h": 3600.0, "min": 60.0, "s": 1.0, "watch": round(rng.uniform(5000, 15000), 1)}
        self.rid = f"r{rng.randint(100, 999)}"
        self.legs = [[rng.randint(2, 40), rng.choice(["km", "mi", "lea"]), rng.randint(10, 120), rng.choice(["min", "watch"])]
                     for _ in range(rng.randint(2, 4))]
        metres = sum(d * self.scale[du] for d, du, _, _ in self.legs)
        seconds = sum(t * self.scale[tu] for _, _, t, tu in self.legs)
        self.answer = round(metres / 1000 / (seconds / 3600), 2)
        return f"What is the average speed over route {self.rid} in km/h? Answer rounded to 2 decimals as \\boxed{{N.NN}}."

    def tool_get_route(self, route_id):
        if route_id != self.rid:
            raise ValueError(f"no route {route_id!r}")
        return self.legs

    def tool_convert(self, value, from_unit, to_unit):
        dist = {"km", "mi", "lea", "m"}
        if from_unit not in self.scale or to_unit not in self.scale or ((from_unit in dist) != (to_unit in dist)):
            raise ValueError("unknown units or units of different kinds")
        return round(value * self.scale[from_unit] / self.scale[to_unit], 6)

    def check(self, answer):
        value = _number(answer)
        return value is not None and abs(value - self.answer) <= 0.02

    def plan(self):
        calls = [_call("convert", value=d, from_unit=du, to_unit="km") for d, du, _, _ in self.legs]
        calls += [_call("convert", value=t, from_unit=tu, to_unit="h") for _, _, t, tu in self.legs]
        return [_act(_call("get_route", route_id=self.rid)), _act(*calls), f"\\boxed{{{self.answer:.2f}}}"]
