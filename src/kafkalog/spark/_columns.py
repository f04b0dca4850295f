"""The source's column names and the ``columns`` read option that narrows them (one module
both the options and the schema modules import)."""

from __future__ import annotations

from typing import Any, List, Mapping, Optional, Tuple

from ._errors import OptionError

KAFKA_COLUMNS: Tuple[str, ...] = (
    "key",
    "value",
    "topic",
    "partition",
    "offset",
    "timestamp",
    "timestampType",
)


def source_columns(
    include_headers: bool = False, batch_metadata: bool = False, segment_metadata: bool = False
) -> Tuple[str, ...]:
    """The names of the source's columns for these options, in the default schema's order."""
    return (
        KAFKA_COLUMNS
        + (("headers",) if include_headers else ())
        + (("batch",) if batch_metadata else ())
        + (("segment",) if segment_metadata else ())
    )


def parse_columns(opts: Mapping[str, Any], include_headers: bool = False,
                  batch_metadata: bool = False,
                  segment_metadata: bool = False) -> Optional[List[str]]:
    """The ``columns`` option (lower-cased keys): comma-separated names of the source's columns
    for these flags, in any order, each once (a name in another case is taken as the column's
    own spelling), or None when absent.  The source's schema is then only those columns."""
    v = opts.get("columns")
    if v is None:
        return None
    valid = source_columns(include_headers, batch_metadata, segment_metadata)
    every = source_columns(True, True, True)
    listing = f"the source's columns are {', '.join(valid)}"
    names = [c.strip() for c in str(v).split(",")]
    if not any(names):
        raise OptionError(
            f"option 'columns' names no column ({str(v)!r}): give a comma-separated list of the "
            f"columns to read; {listing}"
        )
    if "" in names:
        raise OptionError(
            f"option 'columns' has an empty name in {str(v)!r} (a stray comma?); {listing}"
        )
    by_lower = {c.lower(): c for c in every}
    out: List[str] = []
    for n in names:
        c = by_lower.get(n.lower())
        if c is None or c not in valid:
            flag = {"headers": "includeHeaders", "batch": "includeBatchMetadata",
                    "segment": "includeSegmentMetadata"}.get(c or "")
            why = f" without {flag}=true" if flag else ""
            raise OptionError(
                f"option 'columns': {n!r} is not a column of the kafkalog source{why}; {listing}"
            )
        if c in out:
            raise OptionError(
                f"option 'columns' names {c!r} twice ({str(v)!r}): name each column once; "
                f"{listing}"
            )
        out.append(c)
    return out
