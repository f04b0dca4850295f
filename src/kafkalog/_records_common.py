"""What the record twins share at run time: the record classes a LegacyRecord compares equal
with.

A v0/v1 record equals a record of either format, from either twin, with the same offset,
timestamp, key and value and no headers.  Each twin registers its record classes here when it
is imported, so the twins never import each other to find them (a class that was never imported
has no instances to compare with).
"""
from __future__ import annotations

__all__ = ["EQ_CLASSES", "register_record_class"]

EQ_CLASSES: tuple = ()


def register_record_class(cls: type) -> None:
    """Add ``cls`` to the classes LegacyRecord compares with (once)."""
    global EQ_CLASSES
    if cls not in EQ_CLASSES:
        EQ_CLASSES = (*EQ_CLASSES, cls)
