"""Switch wiring: flip switches one at a time, watch the bulbs, then state the hidden wiring."""

import random
import re
import string

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")


def _last_boxed(text):
    found = _BOXED.findall(str(text))
    return found[-1].strip() if found else None


class SwitchWiringEnv:
    """Multi-turn: interventions on switches reveal OR-wired bulbs; one final wiring answer.

    A bulb is lit when at least one switch wired to it is on, so a lit bulb hides whether
    further switches reach it: each switch has to be tested alone.
    """

    skill = "Causal"

    def __init__(self, max_turns: int = 10, num_switches: int = 4, num_bulbs: int = 5, **kwargs):
        self.max_turns = max_turns
        self.num_switches = max(2, min(num_switches, 9))
        self.num_bulbs = max(2, min(num_bulbs, 8))
        self._done = True
        self._turn = 0

    def reset(self, seed: int | None = None) -> tuple[str, dict]:
        rng = random.Random(seed)
        # Bulbs carry random letters so that episodes look different from the very start.
        self._bulbs = "".join(sorted(rng.sample(string.ascii_uppercase, self.num_bulbs)))
        switches = range(1, self.num_switches + 1)
        self._wiring = {}  # bulb -> frozenset of the switches wired to it, never empty
        for bulb in self._bulbs:
            wired = {s for s in switches if rng.random() < 0.4}
            self._wiring[bulb] = frozenset(wired or {rng.choice(switches)})
        self._initially_on = {rng.choice(switches)}
        self._on = set(self._initially_on)
        self._turn = 0
        self._done = False
        observation = (
            f"A panel has {self.num_switches} switches (1 to {self.num_switches}) and "
            f"{self.num_bulbs} bulbs ({', '.join(self._bulbs)}). Each bulb is wired to "
            "one or more switches and is lit exactly when at least one of its switches is on. "
            "Each turn flip one switch with \\boxed{flip k} (for example \\boxed{flip 2}) and see "
            "which bulbs are lit. When you know the wiring, answer with each bulb and all of its "
            f"switches, for example \\boxed{{{self._bulbs[0]}=13 {self._bulbs[1]}=2 ...}} listing "
            "every bulb. That answer "
            "ends the game: the full wiring right wins, anything else loses. You have "
            f"{self.max_turns} turns, the answer included.\n" + self._panel()
        )
        return observation, self._info()

    def _lit(self) -> list[str]:
        return [bulb for bulb in self._bulbs if self._wiring[bulb] & self._on]

    def _panel(self) -> str:
        on = ", ".join(str(s) for s in sorted(self._on)) or "none"
        lit = ", ".join(self._lit()) or "none"
        return f"Switches on: {on}. Bulbs lit: {lit}."

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self._done:
            return "The episode is over.", 0.0, True, False, self._info()
        self._turn += 1
        content = _last_boxed(action) or ""
        flip = re.fullmatch(r"flip\s*(\d+)", content, re.IGNORECASE)
        claimed = self._parse_wiring(content)
        reward, terminated = 0.0, False
        if flip and 1 <= int(flip.group(1)) <= self.num_switches:
            self._on ^= {int(flip.group(1))}
            observation = f"Flipped switch {flip.group(1)}. " + self._panel()
        elif claimed is not None:
            terminated = True
            wrong = [bulb for bulb in self._bulbs if claimed[bulb] != self._wiring[bulb]]
            if not wrong:
                observation, reward = "That is the wiring exactly!", 1.0
            else:
                observation = f"Wrong wiring for bulb(s) {', '.join(wrong)}; the game is lost."
        else:
            observation = (
                f"Answer \\boxed{{flip k}} with 1 <= k <= {self.num_switches}, or the full wiring "
                f"like \\boxed{{{self._bulbs[0]}=13 {self._bulbs[1]}=2 ...}} naming every bulb once."
            )
        truncated = not terminated and self._turn >= self.max_turns
        if truncated:
            observation += " The turn limit is reached."
        self._done = terminated or truncated
        return observation, reward, terminated, truncated, self._info()

    def _parse_wiring(self, content: str):
        """{bulb: switches} when content names every bulb exactly once, else None."""
        pairs = re.findall(r"([A-Za-z])\s*[=:]\s*([0-9]+)", content)
        leftover = re.sub(r"([A-Za-z])\s*[=:]\s*([0-9]+)", "", content)
        if not pairs or re.sub(r"[\s,;]", "", leftover):
            return None
        claimed = {bulb.upper(): frozenset(int(d) for d in digits) for bulb, digits in pairs}
        if len(pairs) != len(claimed) or set(claimed) != set(self._bulbs):
            return None
        return claimed

    def _info(self) -> dict:
        return {"turn": self._turn, "switches_on": sorted(self._on)}

    def solution(self) -> str:
        # Test each switch alone: the one that starts on is read at once and turned off, then
        # every other goes on, is read, and goes off again (the last one may stay on).
        (first,) = self._initially_on
        others = [s for s in range(1, self.num_switches + 1) if s != first]
        flips = [first]
        for switch in others:
            flips += [switch] if switch == others[-1] else [switch, switch]
        wiring = " ".join(
            f"{bulb}={''.join(str(s) for s in sorted(self._wiring[bulb]))}" for bulb in self._bulbs
        )
        return "\n".join([f"\\boxed{{flip {s}}}" for s in flips] + [f"\\boxed{{{wiring}}}"])

    def close(self) -> None:
        self._done = True
