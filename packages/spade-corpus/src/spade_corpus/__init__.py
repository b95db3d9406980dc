"""spade-corpus: see the package README."""

from importlib.metadata import version as _version

__version__ = _version("spade-corpus")

__all__ = ["__version__"]
