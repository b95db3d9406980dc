# ruff: noqa: F821, E501
# ID: calendar_conflicts
# TITLE: Overlapping bookings
# SPLIT: train
# HINT: Get the room's booking ids for the day, fetch each booking's start and end, sort by start and count every pair whose intervals overlap (touching ends do not overlap).


class ConflictsEnv(_ToolTask):
    domain = "calendar"
    tools = [
        _tool("list_rooms", "Room names."),
        _tool("list_bookings", "Booking ids of a room on a date (YYYY-MM-DD).", ("room", "date"), room=_STR, date=_STR),
        _tool("get_booking", "A booking's start and end as minutes after midnight.", ("booking_id",), booking_id=_STR),
    ]

    def setup(self, rng):
        self.rooms = rng.sample(["atlas", "birch", "cedar", "delta"], 3)
        self.room = rng.choice(self.rooms)
        self.date = f"2025-0{rng.randint(1, 9)}-{rng.randint(10, 28)}"
        self.bookings, self.index = {}, {}
        for room in self.rooms:
            ids = []
            for _ in range(rng.randint(5, 8)):
                start = rng.randrange(480, 1020, 15)
                bid = f"b{rng.randint(1000, 9999)}"
                self.bookings[bid] = {"start": start, "end": start + rng.choice([30, 45, 60, 90, 120])}
                ids.append(bid)
            self.index[room] = sorted(ids)
        spans = [self.bookings[b] for b in self.index[self.room]]
        self.answer = sum(1 for i, a in enumerate(spans) for b in spans[i + 1:]
                          if a["start"] < b["end"] and b["start"] < a["end"])
        return (f"How many pairs of bookings overlap in room {self.room} on {self.date}? "
                "Answer as \\boxed{N}.")

    def tool_list_rooms(self):
        return self.rooms

    def tool_list_bookings(self, room, date):
        if room not in self.index:
            raise ValueError(f"no room {room!r}")
        return self.index[room] if date == self.date else []

    def tool_get_booking(self, booking_id):
        return self.bookings[booking_id]

    def check(self, answer):
        return _number(answer) == self.answer

    def plan(self):
        return [_act(_call("list_bookings", room=self.room, date=self.date)),
                _act(*[_call("get_booking", booking_id=b) for b in self.index[self.room]]),
                f"\\boxed{{{self.answer}}}"]
