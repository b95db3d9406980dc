"""The self-play loop's parts that need no model: designer prompts and parsing, rewards,
advantages, the environment pool and the procedural generators of the baseline."""
