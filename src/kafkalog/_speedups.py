"""The one place that chooses between the compiled and the pure-Python twins.

``KAFKALOG_PURE_PYTHON`` (read once, at import) set to 1/true/yes/on forces the pure twins;
any other value, or none, loads the compiled twins and falls back to pure Python only if they
cannot be imported (then ``FALLBACK_REASON`` says why: the reason the build recorded in
``_build_info.json`` when it was installed without them, else the import error).  Everything
else in kafkalog imports the chosen modules from here and never names a twin.

``batch``, ``crc``, ``legacy`` and ``varint`` are loaded at import, all compiled or all pure.
``arrow`` (the columnar decoder), ``arrow_encode`` (its way back) and ``dump`` (the dump and
stats walks) are loaded on first use (``from ._speedups import arrow``), as not every program
needs them: the compiled twin when the twins above are compiled and it imports (a build
without that one extension falls back to its pure twin: same results, slower), else the pure
twin.
"""
from __future__ import annotations

import importlib
import json
import os
from typing import Optional

__all__ = [
    "IMPLEMENTATION",
    "FALLBACK_REASON",
    "PURE_REQUESTED",
    "varint",
    "crc",
    "batch",
    "legacy",
]

PURE_REQUESTED = os.environ.get("KAFKALOG_PURE_PYTHON", "").strip().lower() in (
    "1",
    "true",
    "yes",
    "on",
)
FALLBACK_REASON: Optional[str] = None


def _build_reason() -> Optional[str]:
    """Why the installed build has no compiled twins, as setup.py recorded it (None: unknown)."""
    try:
        with open(
            os.path.join(os.path.dirname(__file__), "_build_info.json"), encoding="utf-8"
        ) as f:
            info = json.load(f)
    except (OSError, ValueError):
        return None  # a source checkout, or an install by other means
    if isinstance(info, dict) and not info.get("compiled", True) and info.get("reason"):
        return str(info["reason"])
    return None


def _load(suffix: str):
    # import_module, not "from . import", so a missing module reads as missing rather than as
    # the "partially initialized module (circular import)" error of a package mid-import
    return tuple(
        importlib.import_module(f"{__package__}.{name}{suffix}")
        for name in ("_batch", "_crc", "_legacy", "_varint")
    )


if PURE_REQUESTED:
    batch, crc, legacy, varint = _load("_py")
    IMPLEMENTATION = "python"
else:
    try:
        batch, crc, legacy, varint = _load("")
        IMPLEMENTATION = "cython"
    except ImportError as exc:  # no compiler at install time, PyPy, a broken wheel
        batch, crc, legacy, varint = _load("_py")
        IMPLEMENTATION = "python"
        _why = _build_reason()
        if _why is not None:
            FALLBACK_REASON = f"built without the compiled twins: {_why}"
        else:
            import platform  # only here: importing it costs the CLI ~2 ms at every start

            FALLBACK_REASON = (
                f"compiled twins unavailable on {platform.python_implementation()}: {exc}"
            )


_ON_FIRST_USE = {"arrow": "_arrow", "arrow_encode": "_arrow_encode", "dump": "_dump"}


def __getattr__(name: str):
    base = _ON_FIRST_USE.get(name)
    if base is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    mod = None
    if IMPLEMENTATION == "cython":
        try:
            mod = importlib.import_module(f"{__package__}.{base}")
        except ImportError:  # a build without this extension: same results, slower
            mod = None
    if mod is None:
        mod = importlib.import_module(f"{__package__}.{base}_py")
    globals()[name] = mod
    return mod
