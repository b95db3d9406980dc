"""String machine: work out a hidden letter-string transformation from short test inputs."""

import random
import re
import string

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_LETTERS = string.ascii_uppercase
_MAX_QUERY = 6
_TARGET_LENGTH = 10
_PERMUTATIONS = ["none", "reverse", "rotate1", "rotate2", "rotate3", "swap_pairs", "evens_odds"]
_LETTER_OPS = ["none", "shift", "position_shift", "mirror_shift"]


def _last_boxed(text):
    found = _BOXED.findall(str(text))
    return found[-1].strip() if found else None


def _permute(kind, text):
    n = len(text)
    if kind == "reverse":
        return text[::-1]
    if kind.startswith("rotate"):
        k = int(kind[-1]) % n if n else 0
        return text[k:] + text[:k]
    if kind == "swap_pairs":
        out = []
        for i in range(0, n - 1, 2):
            out += [text[i + 1], text[i]]
        if n % 2:
            out.append(text[-1])
        return "".join(out)
    if kind == "evens_odds":
        return text[0::2] + text[1::2]
    return text


def _letter(kind, k, letter, index):
    value = _LETTERS.index(letter)
    if kind == "shift":
        value += k
    elif kind == "position_shift":
        value += k + index
    elif kind == "mirror_shift":
        value = 25 - value + k
    return _LETTERS[value % 26]


class StringMachineEnv:
    """Multi-turn: feed short strings to a hidden transformation, then predict a long one."""

    skill = "Pattern"

    def __init__(self, max_turns: int = 10, max_answers: int = 2, **kwargs):
        self.max_turns = max_turns
        self.max_answers = max_answers
        self._done = True
        self._turn = 0

    def _apply(self, text):
        moved = _permute(self._perm, text)
        return "".join(_letter(self._op, self._k, ch, i) for i, ch in enumerate(moved))

    def reset(self, seed: int | None = None) -> tuple[str, dict]:
        rng = random.Random(seed)
        while True:
            self._perm = rng.choice(_PERMUTATIONS)
            self._op = rng.choice(_LETTER_OPS)
            self._k = rng.randrange(1, 26) if self._op == "shift" else rng.randrange(26)
            if self._perm != "none" or self._op != "none":
                break
        self._target = "".join(rng.choice(_LETTERS) for _ in range(_TARGET_LENGTH))
        self._answer = self._apply(self._target)
        example = "".join(rng.sample(_LETTERS, 4))
        self._turn = 0
        self._wrong = 0
        self._done = False
        observation = (
            "A hidden machine rewrites strings of capital letters by one fixed rule that may move "
            "letters around and may change them; the output always has the same length as the "
            f"input. For example it turns {example} into {self._apply(example)}.\n"
            f"Each turn you may feed it one string of 1 to {_MAX_QUERY} letters by answering "
            "\\boxed{ask WORD} and see the output.\n"
            f"Goal: give the machine's output for the {_TARGET_LENGTH}-letter string "
            f"{self._target} by answering \\boxed{{answer LETTERS}}. You have {self.max_answers} "
            f"answers and {self.max_turns} turns in all."
        )
        return observation, self._info()

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self._done:
            return "The episode is over.", 0.0, True, False, self._info()
        self._turn += 1
        content = (_last_boxed(action) or "").upper()
        match = re.fullmatch(r"(ASK|ANSWER)\s+([A-Z]+)", content)
        reward, terminated = 0.0, False
        if not match:
            observation = (
                f"Answer \\boxed{{ask WORD}} with 1 to {_MAX_QUERY} capital letters to test the "
                "machine, or \\boxed{answer LETTERS} with your prediction."
            )
        elif match.group(1) == "ASK":
            word = match.group(2)
            if len(word) > _MAX_QUERY:
                observation = (
                    f"Test strings may have at most {_MAX_QUERY} letters (\\boxed{{ask WORD}})."
                )
            else:
                observation = f"The machine turns {word} into {self._apply(word)}."
        elif match.group(2) == self._answer:
            observation, reward, terminated = "Correct, that is the machine's output!", 1.0, True
        else:
            self._wrong += 1
            left = self.max_answers - self._wrong
            terminated = left <= 0
            observation = f"{match.group(2)} is not the output. " + (
                "No answers left." if terminated else f"{left} answer(s) left."
            )
        truncated = not terminated and self._turn >= self.max_turns
        if truncated:
            observation += " The turn limit is reached."
        self._done = terminated or truncated
        return observation, reward, terminated, truncated, self._info()

    def _info(self) -> dict:
        return {"turn": self._turn, "wrong_answers": getattr(self, "_wrong", 0)}

    def solution(self) -> str:
        return "\n".join(
            ["\\boxed{ask AAAAAA}", "\\boxed{ask ABCDE}", f"\\boxed{{answer {self._answer}}}"]
        )

    def close(self) -> None:
        self._done = True
