"""The six steps of a cycle (see :mod:`spade_train.cycle`)."""
