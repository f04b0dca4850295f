"""The one place that chooses between the compiled and the pure-Python twins.

``KAFKALOG_PURE_PYTHON`` (read once, at import) set to 1/true/yes/on forces the pure twins;
any other value, or none, loads the compiled twins and falls back to pure Python only if they
cannot be imported (then ``FALLBACK_REASON`` says why).  Everything else in kafkalog imports
the chosen modules from here and never names a twin.
"""
from __future__ import annotations

import os
import platform
from typing import Optional

__all__ = ["IMPLEMENTATION", "FALLBACK_REASON", "PURE_REQUESTED", "varint", "crc", "batch", "legacy"]

PURE_REQUESTED = os.environ.get("KAFKALOG_PURE_PYTHON", "").strip().lower() in ("1", "true", "yes", "on")
FALLBACK_REASON: Optional[str] = None

if PURE_REQUESTED:
    from . import _batch_py as batch, _crc_py as crc, _legacy_py as legacy, _varint_py as varint

    IMPLEMENTATION = "python"
else:
    try:
        from . import _batch as batch, _crc as crc, _legacy as legacy, _varint as varint  # type: ignore

        IMPLEMENTATION = "cython"
    except ImportError as exc:  # no compiler at install time, PyPy, a broken wheel
        from . import _batch_py as batch, _crc_py as crc, _legacy_py as legacy, _varint_py as varint

        IMPLEMENTATION = "python"
        FALLBACK_REASON = (
            f"compiled twins unavailable on {platform.python_implementation()}: {exc}"
        )
