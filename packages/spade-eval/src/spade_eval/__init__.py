"""spade-eval: offline benchmark runner and result tables (see the package README)."""

from importlib.metadata import version as _version

from .errors import EvalConfigError, EvalDataError, ModelError, SpadeEvalError, SuiteSkipped
from .metrics import mean_stderr, pass_at_k
from .models import CallableClient, HFClient, ModelClient, OpenAIClient
from .policy import PolicyClient, PolicyLike, PolicySampling, evaluate_policy, scalar_metrics
from .render import read_results
from .render import render as render_results
from .runner import evaluate, load_config, summarize
from .store import RecordStore
from .suites import (
    SUITE_NAMES,
    DataNeed,
    Item,
    Score,
    Suite,
    get_suite,
    register_suite,
    suite_names,
)

__version__ = _version("spade-eval")

__all__ = [
    "__version__",
    "evaluate",
    "evaluate_policy",
    "PolicyLike",
    "PolicyClient",
    "PolicySampling",
    "scalar_metrics",
    "load_config",
    "summarize",
    "OpenAIClient",
    "HFClient",
    "CallableClient",
    "ModelClient",
    "Item",
    "Score",
    "SUITE_NAMES",
    "get_suite",
    "register_suite",
    "suite_names",
    "Suite",
    "DataNeed",
    "RecordStore",
    "pass_at_k",
    "mean_stderr",
    "render_results",
    "read_results",
    "SpadeEvalError",
    "EvalDataError",
    "EvalConfigError",
    "ModelError",
    "SuiteSkipped",
]
