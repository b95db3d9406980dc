# ruff: noqa: F821, E501
# ID: calendar_meeting_minutes
# TITLE: Minutes met with a colleague
# SPLIT: train
# HINT: Search returns only event ids; fetch every matching event and add up its duration, keeping only events where the colleague is really an attendee and that are not cancelled.


class MeetingMinutesEnv(_ToolTask):
    domain = "calendar"
    tools = [
        _tool("search_events", "Ids of events whose title or attendees mention the query.", ("query",), query=_STR),
        _tool("get_event", "One event: title, attendees, minutes, status.", ("event_id",), event_id=_STR),
    ]

    def setup(self, rng):
        names = ["ivo", "jana", "kemal", "lea", "milo", "nora"]
        self.target = rng.choice(names)
        self.events = {}
        for i in range(rng.randint(9, 13)):
            attendees = rng.sample(names, rng.randint(1, 3))
            title = rng.choice(["planning", "retro", "design", f"{self.target} intro"])
            self.events[f"ev{rng.randint(100, 999)}{i}"] = {
                "title": title, "attendees": attendees, "minutes": rng.choice([15, 25, 30, 45, 50, 60, 90]),
                "status": rng.choice(["confirmed", "confirmed", "confirmed", "cancelled"]),
            }
        self.answer = sum(e["minutes"] for e in self.events.values()
                          if self.target in e["attendees"] and e["status"] == "confirmed")
        return (f"How many minutes in total does the user spend in confirmed meetings that {self.target} "
                "attends? Answer as \\boxed{N}.")

    def _matches(self, query):
        return sorted(k for k, e in self.events.items() if query in e["title"] or query in e["attendees"])

    def tool_search_events(self, query):
        return self._matches(query.lower())

    def tool_get_event(self, event_id):
        if event_id not in self.events:
            raise ValueError(f"no event {event_id!r}")
        return self.events[event_id]

    def check(self, answer):
        return _number(answer) == self.answer

    def plan(self):
        ids = self._matches(self.target)
        return [_act(_call("search_events", query=self.target)),
                _act(*[_call("get_event", event_id=i) for i in ids]), f"\\boxed{{{self.answer}}}"]
