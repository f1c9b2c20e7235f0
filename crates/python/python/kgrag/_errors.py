"""The exceptions kgrag raises. Every one is a :class:`KgragError`; the ones about an argument's value are
also :class:`ValueError` (an unknown strategy, a configuration key, a document), about its type a
:class:`TypeError`, a missing index folder a :class:`FileNotFoundError`. Messages are the Rust library's.
"""

from __future__ import annotations

__all__ = [
    "KgragError",
    "ConfigError",
    "UnknownStrategyError",
    "InputError",
    "DocumentTypeError",
    "IndexStateError",
    "IndexNotFoundError",
    "StorageError",
    "ModelError",
    "MethodError",
    "BenchError",
]


class KgragError(Exception):
    """Any error of kgrag."""


class ConfigError(KgragError, ValueError):
    """The configuration asks for something impossible: an unknown key or a bad value (the message names
    it)."""


class UnknownStrategyError(ConfigError):
    """A strategy the index does not answer with; the message names the ones it does."""


class InputError(KgragError, ValueError):
    """A document, a question or an argument with a bad value (the message names which)."""


class DocumentTypeError(InputError, TypeError):
    """A document or an id of the wrong type (the message names its position)."""


class IndexStateError(KgragError):
    """The index is missing, damaged, not committed yet, built with other settings, or another process
    holds its writer."""


class IndexNotFoundError(IndexStateError, FileNotFoundError):
    """No index folder at the path."""


class StorageError(KgragError, OSError):
    """A file, the graph store or the database failed."""


class ModelError(KgragError):
    """A model (embedder, chat model) could not be built or failed."""


class MethodError(KgragError):
    """A retrieval method (HippoRAG 2, HiRAG, LeanRAG) or the extraction failed."""


class BenchError(KgragError):
    """Loading a dataset or writing the bench's report failed."""
