# ruff: noqa: F821, E501
# ID: calendar_timezones
# TITLE: A meeting across time zones
# SPLIT: heldout
# HINT: Read the meeting's time in its organiser's city, look up the UTC offsets of both cities, convert through UTC and wrap around midnight before writing the local time.


class TimezonesEnv(_ToolTask):
    domain = "calendar"
    tools = [
        _tool("get_meeting", "A meeting's city and local start time (HH:MM).", ("meeting_id",), meeting_id=_STR),
        _tool("utc_offset", "A city's UTC offset in minutes.", ("city",), city=_STR),
    ]

    def setup(self, rng):
        cities = ["aldora", "brevik", "cantos", "dunmore", "elbrun", "fennick", "gorse"]
        self.offsets = {c: rng.randrange(-600, 721, 30) for c in cities}
        self.mid = f"m{rng.randint(100, 999)}"
        self.city, self.other = rng.sample(cities, 2)
        self.start = rng.randrange(0, 1440, 15)
        local = (self.start - self.offsets[self.city] + self.offsets[self.other]) % 1440
        self.answer = f"{local // 60:02d}:{local % 60:02d}"
        return (f"Meeting {self.mid} is set in its organiser's city. What is its start time in {self.other}? "
                "Answer as \\boxed{HH:MM} (24-hour clock).")

    def tool_get_meeting(self, meeting_id):
        if meeting_id != self.mid:
            raise ValueError(f"no meeting {meeting_id!r}")
        return {"city": self.city, "start": f"{self.start // 60:02d}:{self.start % 60:02d}"}

    def tool_utc_offset(self, city):
        if city.lower() not in self.offsets:
            raise ValueError(f"unknown city {city!r}")
        return self.offsets[city.lower()]

    def check(self, answer):
        return answer.strip() == self.answer

    def plan(self):
        return [_act(_call("get_meeting", meeting_id=self.mid)),
                _act(_call("utc_offset", city=self.city), _call("utc_offset", city=self.other)),
                f"\\boxed{{{self.answer}}}"]
