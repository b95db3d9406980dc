"""spade-envs: the SPADE environment contract, its checker, a Gymnasium adapter, the chat
episode runner and corpus playback. See the package README."""

from importlib.metadata import version as _version

from .actions import boxed, boxed_answer
from .agents import OpenAIChatAgent, RandomAgent, RandomToolAgent, ReplayAgent
from .chat import (
    DEFAULT_SYSTEM_PROMPT,
    FORMAT_REMINDER,
    TOOL_SYSTEM_PROMPT,
    Agent,
    BatchAgent,
    EpisodeError,
    EpisodeResult,
    EpisodeSpec,
    Message,
    ParsedAction,
    Scoring,
    TurnRecord,
    parse_action,
    run_episode,
    run_episodes,
    write_transcript,
)
from .checker import (
    REASON_CODES,
    CheckReport,
    check_env,
    check_step_result,
    play_actions,
    solution_actions,
)
from .compat import (
    COMPAT_IMPORTS,
    COMPAT_NAMES,
    COMPAT_REWARD_BOUNDS,
    MODES,
    CompatEnvironment,
    CompatFactory,
    CompatReport,
    check_env_compat,
    compat_sandbox_config,
    compat_solution,
    compat_source,
    designed_max_turns,
)
from .core import (
    ALLOWED_IMPORTS,
    DEFAULT_MAX_TURNS,
    MAX_OBSERVATION_CHARS,
    RETURN_BOUNDS,
    REWARD_BOUNDS,
    SKILLS,
    TOOL_USE,
    EnvFactory,
    StepResult,
    TextEnvironment,
    contract_text,
    episode_return,
    with_hint,
)
from .corpus import (
    RECORD_SCHEMA,
    Corpus,
    EnvRecord,
    corpus_checksum,
    corpus_manifest,
    example_corpus_path,
    load_corpus,
    record_digest,
    resolve_corpus_path,
    starter_corpus_path,
    tool_use_corpus_path,
)
from .corpus_files import (
    CHUNK_BYTES,
    RESERVED_FILES,
    atomic_output,
    atomic_write_text,
    format_checksums,
    json_line,
    parse_checksums,
    sha256_file,
    sha256_file_size,
    sha256_text,
    unsafe_file_problem,
    write_corpus,
)
from .endpoint import Endpoint, normalise_base_url
from .errors import (
    AgentTimeout,
    ChecksumError,
    ContractError,
    CorpusError,
    EndpointError,
    EndpointUnavailableError,
    Evidence,
    FetchError,
    GemUnavailableError,
    HubUnavailableError,
    RegistryError,
    RlveUnavailableError,
    SandboxUnavailableError,
    SourceError,
    SpadeEnvsError,
)
from .fetch import FetchResult, fetch_corpus, verify_release
from .gem import GemEnvironment, GemFactory, gem_env_ids
from .gym_env import TEXT_CHARSET, SpadeGymEnv, text_space
from .plugins import Registry
from .registry import NAMESPACE, SHIPPED_NAMESPACES, make_corpus_env, register_corpus
from .registry import _register_shipped as _register_shipped
from .rlve import OFFICIAL16 as RLVE_OFFICIAL16
from .rlve import RlveEnvironment, RlveFactory, rlve_env_ids
from .rlve import parameter_for as rlve_parameter_for
from .rlve import resolve_env_set as resolve_rlve_env_set
from .rlve import same_problem as rlve_same_problem
from .seeding import SEED_SPACE, draw_seeds, fresh_root, more_seeds
from .source import PARSE_LOCK, SandboxedFactory, find_env_class, load_env, load_env_class
from .tools import (
    PARSE_OUTCOMES,
    TOOL_CALL_FORMAT_TEXT,
    ToolCall,
    ToolCallParse,
    argument_problems,
    canonical_action,
    openai_tool_specs,
    parse_tool_calls,
    render_tools_text,
    tool_contract_text,
    tool_schema_problems,
)

__version__ = _version("spade-envs")

_register_shipped()

__all__ = [
    "AgentTimeout",
    "__version__",
    # contract
    "SKILLS",
    "TOOL_USE",
    "REWARD_BOUNDS",
    "RETURN_BOUNDS",
    "DEFAULT_MAX_TURNS",
    "ALLOWED_IMPORTS",
    "MAX_OBSERVATION_CHARS",
    "StepResult",
    "TextEnvironment",
    "EnvFactory",
    "episode_return",
    "with_hint",
    "contract_text",
    # checker
    "check_env",
    "check_step_result",
    "play_actions",
    "solution_actions",
    "CheckReport",
    "REASON_CODES",
    # loading
    "load_env",
    "load_env_class",
    "find_env_class",
    "SandboxedFactory",
    "PARSE_LOCK",
    # gymnasium
    "SpadeGymEnv",
    "TEXT_CHARSET",
    "text_space",
    "register_corpus",
    "make_corpus_env",
    "NAMESPACE",
    "SHIPPED_NAMESPACES",
    # chat runner
    "Message",
    "Agent",
    "BatchAgent",
    "ParsedAction",
    "parse_action",
    "boxed",
    "boxed_answer",
    "TurnRecord",
    "EpisodeError",
    "EpisodeResult",
    "EpisodeSpec",
    "Scoring",
    "run_episode",
    "run_episodes",
    # validation seeds
    "SEED_SPACE",
    "draw_seeds",
    "fresh_root",
    "more_seeds",
    "write_transcript",
    "RandomAgent",
    "ReplayAgent",
    "OpenAIChatAgent",
    # OpenAI-compatible endpoints
    "Endpoint",
    "EndpointError",
    "EndpointUnavailableError",
    "normalise_base_url",
    "DEFAULT_SYSTEM_PROMPT",
    "FORMAT_REMINDER",
    "RandomToolAgent",
    "TOOL_SYSTEM_PROMPT",
    # tool use
    "PARSE_OUTCOMES",
    "TOOL_CALL_FORMAT_TEXT",
    "ToolCall",
    "ToolCallParse",
    "parse_tool_calls",
    "canonical_action",
    "render_tools_text",
    "openai_tool_specs",
    "tool_schema_problems",
    "argument_problems",
    "tool_contract_text",
    "starter_corpus_path",
    "tool_use_corpus_path",
    # corpus
    "EnvRecord",
    "Corpus",
    "load_corpus",
    "write_corpus",
    "resolve_corpus_path",
    "example_corpus_path",
    "sha256_text",
    "RECORD_SCHEMA",
    "record_digest",
    "corpus_checksum",
    "corpus_manifest",
    # corpus files and atomic writes
    "CHUNK_BYTES",
    "RESERVED_FILES",
    "sha256_file",
    "sha256_file_size",
    "parse_checksums",
    "format_checksums",
    "json_line",
    "unsafe_file_problem",
    "atomic_output",
    "atomic_write_text",
    # errors
    "SpadeEnvsError",
    "ContractError",
    "Evidence",
    "SourceError",
    "CorpusError",
    "ChecksumError",
    "SandboxUnavailableError",
    "GemUnavailableError",
    "RlveUnavailableError",
    "HubUnavailableError",
    "FetchError",
    "RegistryError",
    # the one registry of every SPADE package
    "Registry",
    # compat mode (games written for the released code)
    "MODES",
    "COMPAT_IMPORTS",
    "COMPAT_NAMES",
    "COMPAT_REWARD_BOUNDS",
    "CompatEnvironment",
    "CompatFactory",
    "CompatReport",
    "check_env_compat",
    "compat_sandbox_config",
    "compat_solution",
    "compat_source",
    "designed_max_turns",
    # released corpora (optional extra fetch)
    "fetch_corpus",
    "verify_release",
    "FetchResult",
    # GEM adapter (optional extra)
    "GemFactory",
    "GemEnvironment",
    "gem_env_ids",
    # RLVE adapter (optional extra)
    "RlveFactory",
    "RlveEnvironment",
    "RlveUnavailableError",
    "RLVE_OFFICIAL16",
    "rlve_env_ids",
    "resolve_rlve_env_set",
    "rlve_same_problem",
    "rlve_parameter_for",
]
