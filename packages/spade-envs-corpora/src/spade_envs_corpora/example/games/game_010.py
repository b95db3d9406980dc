"""Cheapest route: walk a weighted road map town by town and arrive at the lowest total cost."""

import heapq
import random
import re
import string

_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")


def _last_boxed(text):
    found = _BOXED.findall(str(text))
    return found[-1].strip() if found else None


def _distances(roads, source):
    """Cheapest cost from source to every town (Dijkstra)."""
    best = {source: 0}
    queue = [(0, source)]
    while queue:
        cost, town = heapq.heappop(queue)
        if cost > best[town]:
            continue
        for other, length in roads[town].items():
            if cost + length < best.get(other, cost + length + 1):
                best[other] = cost + length
                heapq.heappush(queue, (cost + length, other))
    return best


def _greedy_cost(roads, start, goal):
    """Cost of always taking the cheapest road to an unvisited town; None if it gets stuck."""
    town, cost, seen = start, 0, {start}
    while town != goal:
        options = [(length, other) for other, length in roads[town].items() if other not in seen]
        if not options:
            return None
        length, town = min(options)
        cost += length
        seen.add(town)
    return cost


def _cheapest_route(roads, to_goal, start, goal):
    """The towns after start on one cheapest route: each road keeps the remaining cost exact."""
    town, route = start, []
    while town != goal:
        town = min(b for b, length in roads[town].items() if length + to_goal[b] == to_goal[town])
        route.append(town)
    return route


class CheapestRouteEnv:
    """Multi-turn: move one road per turn; reaching the goal wins only at the optimal cost."""

    skill = "Optimization"

    def __init__(self, max_turns: int = 10, num_towns: int = 10, extra_roads: int = 7, **kwargs):
        self.max_turns = max_turns
        self.num_towns = max(5, min(num_towns, 26))
        self.extra_roads = extra_roads
        self._done = True
        self._turn = 0

    def reset(self, seed: int | None = None) -> tuple[str, dict]:
        rng = random.Random(seed)
        towns = string.ascii_uppercase[: self.num_towns]
        while True:
            roads = {town: {} for town in towns}
            order = rng.sample(towns, len(towns))
            for i in range(1, len(order)):  # a random spanning tree keeps the map connected
                a, b = order[i], rng.choice(order[:i])
                roads[a][b] = roads[b][a] = rng.randint(1, 9)
            for _ in range(self.extra_roads):
                a, b = rng.sample(towns, 2)
                roads[a][b] = roads[b][a] = rng.randint(1, 9)
            start, goal = rng.sample(towns, 2)
            to_goal = _distances(roads, goal)
            hops = _distances({t: dict.fromkeys(r, 1) for t, r in roads.items()}, start)[goal]
            # Interesting maps only: several roads long, and grabbing the cheapest road fails.
            route = _cheapest_route(roads, to_goal, start, goal)
            if (
                3 <= hops <= 5
                # Fits the turn limit (no map could fit a limit below the hop count).
                and len(route) <= max(self.max_turns, 8)
                and _greedy_cost(roads, start, goal) != to_goal[start]
            ):
                break
        self._roads, self._goal, self._route = roads, goal, route
        self._town, self._cost, self._best = start, 0, to_goal[start]
        self._turn = 0
        self._done = False
        listing = ", ".join(
            f"{a}-{b} {length}" for a in towns for b, length in sorted(roads[a].items()) if a < b
        )
        observation = (
            f"Towns {towns[0]} to {towns[-1]} are linked by two-way roads with these costs:\n"
            f"{listing}\nYou are in {start} and must travel to {goal} at the lowest possible total "
            "cost. Each turn move along one road by answering the next town, for example "
            f"\\boxed{{{towns[0]}}}. Arriving in {goal} ends the game: you win only if your total "
            f"cost is the lowest possible. You have {self.max_turns} turns.\n" + self._where()
        )
        return observation, self._info()

    def _where(self) -> str:
        options = ", ".join(
            f"{b} ({length})" for b, length in sorted(self._roads[self._town].items())
        )
        return f"You are in {self._town}, cost so far {self._cost}. Roads from here: {options}."

    def step(self, action: str) -> tuple[str, float, bool, bool, dict]:
        if self._done:
            return "The episode is over.", 0.0, True, False, self._info()
        self._turn += 1
        town = (_last_boxed(action) or "").strip().upper()
        reward, terminated = 0.0, False
        if town not in self._roads[self._town]:
            observation = (
                f"Answer with one town next to {self._town} inside \\boxed{{...}}. " + self._where()
            )
        else:
            self._cost += self._roads[self._town][town]
            self._town = town
            if town != self._goal:
                observation = self._where()
            elif self._cost == self._best:
                observation, reward, terminated = (
                    f"Arrived at cost {self._cost}, optimal!",
                    1.0,
                    True,
                )
            else:
                observation = f"Arrived at cost {self._cost}; the cheapest was {self._best}."
                terminated = True
        truncated = not terminated and self._turn >= self.max_turns
        if truncated:
            observation += " The turn limit is reached."
        self._done = terminated or truncated
        return observation, reward, terminated, truncated, self._info()

    def _info(self) -> dict:
        return {"turn": self._turn, "town": self._town, "cost": self._cost}

    def solution(self) -> str:
        return "\n".join(f"\\boxed{{{town}}}" for town in self._route)

    def close(self) -> None:
        self._done = True
