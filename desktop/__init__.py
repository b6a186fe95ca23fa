"""SIMI Multi: a native desktop workspace for working with many AI models at once."""

__version__ = "0.1.0"
APP_NAME = "SIMI Multi"
