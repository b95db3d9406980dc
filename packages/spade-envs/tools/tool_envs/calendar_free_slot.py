# ruff: noqa: F821, E501
# ID: calendar_free_slot
# TITLE: Earliest shared free slot
# SPLIT: train
# HINT: List every person's events for each day in order, mark busy hours, and scan days and hours from the earliest; a slot counts only if all people are free for the whole length.
_DAYS = ["Mon", "Tue", "Wed", "Thu", "Fri"]


class FreeSlotEnv(_ToolTask):
    domain = "calendar"
    tools = [
        _tool("list_people", "Names of the people whose calendars you can read."),
        _tool("list_events", "Events of one person on one day: [[start_hour, end_hour, title]].",
              ("person", "day"), person=_STR, day={"type": "string", "enum": _DAYS}),
    ]

    def setup(self, rng):
        self.people = rng.sample(["ana", "ben", "chen", "dora", "eli", "fay"], 3)
        self.length = rng.choice([2, 3])
        self.events = {}
        for p in self.people:
            for d in _DAYS:
                hours, busy = list(range(9, 17)), []
                for _ in range(rng.randint(2, 4)):
                    s = rng.choice(hours)
                    busy.append([s, min(17, s + rng.randint(1, 3)), rng.choice(["sync", "review", "1:1", "lunch"])])
                self.events[(p, d)] = sorted(busy)
        self.answer = None
        for d in _DAYS:
            for h in range(9, 18 - self.length):
                if all(not (s < h + self.length and h < e) for p in self.people for s, e, _ in self.events[(p, d)]):
                    self.answer = f"{d} {h}"
                    break
            if self.answer:
                break
        if self.answer is None:
            self.events[(self.people[0], "Fri")] = []
            for p in self.people:
                self.events[(p, "Fri")] = []
            self.answer = self._first_free()
        return (f"Find the earliest {self.length}-hour slot (whole hours, 9 to 17, Mon to Fri) in which "
                "everyone listed by list_people is free. Answer as \\boxed{Day Hour}, e.g. \\boxed{Tue 13}.")

    def _first_free(self):
        for d in _DAYS:
            for h in range(9, 18 - self.length):
                if all(not (s < h + self.length and h < e) for p in self.people for s, e, _ in self.events[(p, d)]):
                    return f"{d} {h}"

    def tool_list_people(self):
        return self.people

    def tool_list_events(self, person, day):
        if person not in self.people:
            raise ValueError(f"no person {person!r}")
        return self.events[(person, day)]

    def check(self, answer):
        return " ".join(answer.split()).lower() == self.answer.lower()

    def plan(self):
        calls = [_call("list_events", person=p, day=d) for p in self.people for d in _DAYS]
        return [_act(_call("list_people")), _act(*calls[:8]), _act(*calls[8:]), f"\\boxed{{{self.answer}}}"]
