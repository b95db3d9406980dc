# ruff: noqa: F821, E501
# ID: calendar_reschedule
# TITLE: Reschedule into a free hour
# SPLIT: train
# HINT: First look up the event to move and read the target day's events, pick an hour where the whole meeting fits without touching another event inside working hours, move it, then confirm with the answer done.


class RescheduleEnv(_ToolTask):
    domain = "calendar"
    tools = [
        _tool("find_event", "Event id and length in hours for a title.", ("title",), title=_STR),
        _tool("list_day", "Events on a day (1-28): [[event_id, start_hour, end_hour]].", ("day",), day=_INT),
        _tool("move_event", "Move an event to a day and start hour.", ("event_id", "day", "hour"),
              event_id=_STR, day=_INT, hour=_INT),
    ]

    def setup(self, rng):
        self.day = rng.randint(2, 27)
        self.title = rng.choice(["budget review", "offsite prep", "hiring sync", "vendor call"])
        self.length = rng.randint(2, 3)
        self.eid = f"e{rng.randint(100, 999)}"
        self.where = {self.eid: [rng.randint(1, 28), 10, 10 + self.length]}
        hours = list(range(9, 17))
        rng.shuffle(hours)
        free = rng.randint(9, 17 - self.length)
        for i, h in enumerate(hours[:5]):
            if free - 1 < h < free + self.length:
                continue
            self.where[f"x{i}{rng.randint(10, 99)}"] = [self.day, h, h + 1]
        return (f"Move the event titled '{self.title}' to day {self.day} at a start hour where it does not "
                "overlap any other event and ends by 17 (working hours 9 to 17). When finished, put the word done inside \\boxed{}.")

    def tool_find_event(self, title):
        if title.lower() != self.title:
            raise ValueError(f"no event titled {title!r}")
        return {"event_id": self.eid, "hours": self.length}

    def tool_list_day(self, day):
        return sorted([k, s, e] for k, (d, s, e) in self.where.items() if d == day)

    def tool_move_event(self, event_id, day, hour):
        if event_id not in self.where:
            raise ValueError(f"no event {event_id!r}")
        if not 1 <= day <= 28 or not 0 <= hour <= 23:
            raise ValueError("day must be 1-28 and hour 0-23")
        length = self.where[event_id][2] - self.where[event_id][1]
        self.where[event_id] = [day, hour, hour + length]
        return "moved"

    def _ok(self, hour):
        return 9 <= hour and hour + self.length <= 17 and all(
            not (s < hour + self.length and hour < e)
            for k, (d, s, e) in self.where.items() if d == self.day and k != self.eid)

    def check(self, answer):
        d, s, _ = self.where[self.eid]
        return answer.lower() == "done" and d == self.day and self._ok(s)

    def plan(self):
        hour = next(h for h in range(9, 18 - self.length) if self._ok(h))
        return [_act(_call("find_event", title=self.title), _call("list_day", day=self.day)),
                _act(_call("move_event", event_id=self.eid, day=self.day, hour=hour)), "\\boxed{done}"]
