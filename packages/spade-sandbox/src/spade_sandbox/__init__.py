"""spade-sandbox: see the package README."""

from importlib.metadata import version as _version

__version__ = _version("spade-sandbox")

__all__ = ["__version__"]
