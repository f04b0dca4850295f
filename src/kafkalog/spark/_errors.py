"""The errors of the ``kafkalog`` Spark data source, and its warnings."""
from __future__ import annotations

import warnings

from ..errors import KafkaLogError


class OptionError(ValueError):
    """An option value the data source cannot accept (raised on the driver, at load time)."""


class NoKafkaLogError(KafkaLogError, OptionError):
    """A path given to the source under which nothing looks like a Kafka log (no segment, no
    partition directory with log files, no log-dir checkpoint): a mistyped or wrong path, as a
    missing one is, not an empty result."""


class DataLossError(KafkaLogError):
    """Records a query was to read are gone from the log directories (deleted by retention, or
    the partition was deleted, recreated or rewritten shorter).  Raised when ``failOnDataLoss``
    is true; with false the records are skipped with a warning."""


class ConcurrentWriteError(KafkaLogError):
    """A partition directory was replaced (by a kafkalog write's commit, or deleted) after the
    query was planned.  Nothing mixed was returned; re-running the query reads the new data."""

    retryable = True


def warn(msg: str) -> None:
    """Warn once: a ``UserWarning`` (printed on the stderr of the process that planned or read,
    as Python prints warnings; ``warnings`` filters apply)."""
    warnings.warn(msg, stacklevel=3)
