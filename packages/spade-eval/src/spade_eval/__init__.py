"""spade-eval: see the package README."""

from importlib.metadata import version as _version

__version__ = _version("spade-eval")

__all__ = ["__version__"]
