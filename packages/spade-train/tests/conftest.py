import os
import tempfile

import pytest

# One model cache per test session (tiny models build in about a second; the embedded
# SmolLM2 conversion is reused from the user's cache when SPADE_CACHE is set outside).
# torch's thread count fixed (not re-judged from the machine's load: float sums depend on it)
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("SPADE_CACHE", os.path.join(tempfile.gettempdir(), "spade-test-cache"))


@pytest.fixture(autouse=True)
def _one_thread():
    import torch

    torch.set_num_threads(1)
    yield
