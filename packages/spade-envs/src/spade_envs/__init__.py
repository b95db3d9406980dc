"""spade-envs: see the package README."""

from importlib.metadata import version as _version

__version__ = _version("spade-envs")

__all__ = ["__version__"]
