"""Delayed lamps: press buttons whose hidden lamps flash some turns later, then map every button."""

import random
import re
import string

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_BUTTONS = 4
_LAMPS = 6
_MAX_DELAY = 2


def _last_boxed(text):
    found = _BOXED.findall(str(text))
    return found[-1].strip() if found else None


class DelayedLampsEnv:
    """Multi-turn: each press flashes one lamp after a hidden delay; one final mapping answer.

    Effects arrive late, so a flash may come from a press made this turn or up to two turns
    earlier; presses close together make the causes ambiguous unless they are spaced out or
    untangled by reasoning.
    """

    skill = "Causal"

    def __init__(self, max_turns: int = 10, **kwargs):
        self.max_turns = max_turns
        self._done = True
        self._turn = 0

    def reset(self, seed: int | None = None) -> tuple[str, dict]:
        rng = random.Random(seed)
        # Re-seed from the first draw so the game's stream differs from an agent's Random(seed).
        rng = random.Random(rng.getrandbits(64))
        self._lamps = "".join(sorted(rng.sample(string.ascii_uppercase, _LAMPS)))
        chosen = rng.sample(self._lamps, _BUTTONS)  # distinct lamps, two lamps stay idle
        self._map = {b: (chosen[b - 1], rng.randint(0, _MAX_DELAY)) for b in range(1, _BUTTONS + 1)}
        self._pending = []  # (turn it flashes, lamp)
        self._turn = 0
        self._done = False
        observation = (
            f"A board has {_BUTTONS} buttons (1 to {_BUTTONS}) and {_LAMPS} lamps "
            f"({', '.join(self._lamps)}). Each button is wired to one lamp (different buttons, "
            "different lamps; some lamps belong to no button) with a fixed hidden delay of 0, "
            "1 or 2 turns: pressing it on some turn makes its lamp flash on that turn (delay 0) "
            "or 1 or 2 turns later. Each turn press one button with \\boxed{press 3} or do "
            "nothing with \\boxed{wait}; you then see the lamps that flash on that turn.\n"
            "When you know the wiring, answer every button with its lamp and delay, for example "
            f"\\boxed{{1={self._lamps[0]}2 2={self._lamps[1]}0 3=... 4=...}}. That answer ends "
            f"the game: all right wins, anything else loses. You have {self.max_turns} turns, "
            "the answer included."
        )
        return observation, self._info()

    def _parse_answer(self, content):
        parts = [p for p in re.split(r"[\s,;]+", content.strip().upper()) if p]
        claimed = {}
        for part in parts:
            match = re.fullmatch(r"(\d)\s*[=:]\s*([A-Z])\s*(\d)", part)
            if not match:
                return None
            claimed[int(match.group(1))] = (match.group(2), int(match.group(3)))
        if set(claimed) != set(range(1, _BUTTONS + 1)) or len(parts) != _BUTTONS:
            return None
        return claimed

    def _flashes(self) -> str:
        now = sorted({lamp for when, lamp in self._pending if when == self._turn})
        self._pending = [(w, lamp) for w, lamp in self._pending if w > self._turn]
        return ("Lamps flashing: " + ", ".join(now) + ".") if now else "No lamp flashes."

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self._done:
            return "The episode is over.", 0.0, True, False, self._info()
        self._turn += 1
        content = _last_boxed(action) or ""
        press = re.fullmatch(r"press\s*(\d+)", content, re.IGNORECASE)
        claimed = self._parse_answer(content)
        reward, terminated = 0.0, False
        if press and 1 <= int(press.group(1)) <= _BUTTONS:
            button = int(press.group(1))
            lamp, delay = self._map[button]
            self._pending.append((self._turn + delay, lamp))
            observation = f"Turn {self._turn}: pressed {button}. " + self._flashes()
        elif re.fullmatch(r"wait", content, re.IGNORECASE):
            observation = f"Turn {self._turn}: waited. " + self._flashes()
        elif claimed is not None:
            terminated = True
            if claimed == self._map:
                observation, reward = "That is the wiring exactly!", 1.0
            else:
                observation = "That is not the wiring. The game is lost."
        else:
            observation = (
                f"Turn {self._turn}: no button pressed. {self._flashes()} Answer \\boxed{{press k}} "
                f"(k from 1 to {_BUTTONS}), \\boxed{{wait}}, or the full wiring such as "
                "\\boxed{1=A2 2=B0 3=C1 4=D0}."
            )
        truncated = not terminated and self._turn >= self.max_turns
        if truncated:
            observation += " The turn limit is reached."
        self._done = terminated or truncated
        return observation, reward, terminated, truncated, self._info()

    def _info(self) -> dict:
        return {"turn": self._turn}

    def solution(self) -> str:
        lines = []
        for button in range(1, _BUTTONS + 1):
            lines.append(f"\\boxed{{press {button}}}")
            lines.extend(["\\boxed{wait}"] * self._map[button][1])
        answer = " ".join(f"{b}={lamp}{delay}" for b, (lamp, delay) in self._map.items())
        lines.append(f"\\boxed{{{answer}}}")
        return "\n".join(lines)

    def close(self) -> None:
        self._done = True
