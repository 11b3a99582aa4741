"""Lazy imports of optional dependencies with an error that names the extra to install.

Usage::

    franky = optional_import("franky", extra="real")   # MissingExtraError if not installed
"""

from __future__ import annotations

import importlib
from types import ModuleType

from robot_rl.errors import MissingExtraError


def optional_import(module: str, extra: str, purpose: str = "") -> ModuleType:
    """Import `module`, or raise `MissingExtraError` telling the user `pip install 'robot-rl[extra]'`."""
    try:
        return importlib.import_module(module)
    except ImportError as err:  # ModuleNotFoundError or a broken shared library
        what = f" (needed for {purpose})" if purpose else ""
        raise MissingExtraError(
            f"the optional package '{module}'{what} is not installed or failed to import ({err}); "
            f"install it with: pip install 'robot-rl[{extra}]'"
        ) from err
