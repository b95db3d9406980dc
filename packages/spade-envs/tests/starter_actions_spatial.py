"""Random but well-formed actions for the staged Spatial games (tools/staging_spatial)."""


def _boxed(text):
    return f"\\boxed{{{text}}}"


def _tiles(rng):
    return _boxed(" ".join(str(rng.randint(1, 8)) for _ in range(rng.randint(1, 8))))


def _cells(rng, low, high, columns="ABCDE", rows=5):
    names = [f"{c}{r}" for c in columns for r in range(1, rows + 1)]
    return _boxed(" ".join(rng.sample(names, rng.randint(low, high))))


def _letters(rng, alphabet, low, high):
    return _boxed("".join(rng.choice(alphabet) for _ in range(rng.randint(low, high))))


def _peg_moves(rng):
    pairs = ["AB", "AC", "BA", "BC", "CA", "CB"]
    return _boxed(" ".join(rng.choice(pairs) for _ in range(rng.randint(1, 8))))


RANDOM_ACTIONS = {
    "spatial_sliding_tiles": lambda rng, _: _tiles(rng),
    "spatial_lights_out": lambda rng, _: _cells(rng, 1, 3),
    "spatial_battleship": lambda rng, _: _cells(rng, 3, 3, "ABCDEFGH", 8),
    "spatial_heading_robot": lambda rng, _: _letters(rng, "FFLR", 1, 6),
    "spatial_tower_shuffle": lambda rng, _: _peg_moves(rng),
    "spatial_knight_errand": lambda rng, _: _cells(rng, 1, 4, "ABCDEFGH", 8),
    "spatial_box_pusher": lambda rng, _: _letters(rng, "UDLR", 1, 8),
    "spatial_piece_fitting": lambda rng, _: _letters(rng, "UDLRUDLRCAF", 1, 8),
}

# Win rates of these drawers over 2,000 seeded episodes (seeds 10000-11999).
MEASURED_RANDOM_WIN_RATE = {
    "spatial_sliding_tiles": 0.0,
    "spatial_lights_out": 0.0,
    "spatial_battleship": 0.001,
    "spatial_heading_robot": 0.001,
    "spatial_tower_shuffle": 0.0,
    "spatial_knight_errand": 0.0,
    "spatial_box_pusher": 0.0,
    "spatial_piece_fitting": 0.002,
}
