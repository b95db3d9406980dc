"""spade-corpus: corpus tools for SPADE (see the package README).

Checksums and manifests, verification naming every bad record, exact and near-duplicate
detection, the validation pipeline, lossless directory/JSONL/Parquet packing, statistics with a chart, the grounding
sampler and the environment memory.
"""

from importlib.metadata import version as _version

from .checksum import (
    CHUNK_BYTES,
    Problem,
    VerifyReport,
    corpus_checksum,
    corpus_manifest,
    record_digest,
    sha256_file,
    verify,
)
from .dedup import (
    DEFAULT_THRESHOLD,
    DedupReport,
    DuplicateCluster,
    drop_duplicates,
    exact_key,
    find_duplicates,
    normalize_source,
    structure_tokens,
)
from .grounding import GroundingError, GroundingSampler, Snippet, sample_corpus_path, truncate_words
from .memory import EnvironmentMemory, MemoryEntry, MemorySample, code_excerpt
from .pack import (
    FORMATS,
    PACK_FORMAT,
    PARQUET_METADATA_KEY,
    PackFormat,
    atomic_output,
    convert,
    format_of,
    meta_path,
    read_corpus,
    write_packed,
)
from .stats import corpus_stats, write_stats_chart
from .structural import (
    DEFAULT_MAX_SOURCE_BYTES,
    STRUCTURAL_REASONS,
    StructuralRejection,
    check_structure,
)
from .tools_validation import TOOL_REASONS, check_tool_env, read_tools, tool_probes
from .validate import (
    DEFAULT_SEEDS,
    INFRASTRUCTURE_REASONS,
    VALIDATION_REASONS,
    ValidationItem,
    ValidationReport,
    validate_corpus,
    validate_many,
    validate_source,
    validation_summary,
)

__version__ = _version("spade-corpus")

__all__ = [
    "__version__",
    # validation
    "validate_source",
    "validate_many",
    "validate_corpus",
    "validation_summary",
    "ValidationReport",
    "ValidationItem",
    "VALIDATION_REASONS",
    "INFRASTRUCTURE_REASONS",
    "DEFAULT_SEEDS",
    "check_structure",
    "StructuralRejection",
    "STRUCTURAL_REASONS",
    "DEFAULT_MAX_SOURCE_BYTES",
    # tool-use checks
    "TOOL_REASONS",
    "check_tool_env",
    "read_tools",
    "tool_probes",
    # checksums and verification
    "CHUNK_BYTES",
    "Problem",
    "VerifyReport",
    "corpus_checksum",
    "corpus_manifest",
    "record_digest",
    "sha256_file",
    "verify",
    # deduplication
    "DEFAULT_THRESHOLD",
    "DedupReport",
    "DuplicateCluster",
    "drop_duplicates",
    "exact_key",
    "find_duplicates",
    "normalize_source",
    "structure_tokens",
    # packing
    "FORMATS",
    "PACK_FORMAT",
    "PARQUET_METADATA_KEY",
    "PackFormat",
    "atomic_output",
    "convert",
    "format_of",
    "meta_path",
    "read_corpus",
    "write_packed",
    # stats
    "corpus_stats",
    "write_stats_chart",
    # grounding
    "GroundingError",
    "GroundingSampler",
    "Snippet",
    "sample_corpus_path",
    "truncate_words",
    # memory
    "EnvironmentMemory",
    "MemoryEntry",
    "MemorySample",
    "code_excerpt",
]
