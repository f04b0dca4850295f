"""Where a ``path`` given to the Spark data source points on the local file system.

Spark hands a Python data source the path exactly as the user typed it: a plain path or a
URI.  kafkalog reads and writes local (or mounted) directories only, so every path goes
through :func:`local_path`, which accepts the local forms Hadoop's ``Path`` accepts and
refuses everything else with :class:`UnsupportedPathError` naming the URI, instead of making
a directory called ``s3a:`` in the working directory.

The parsing follows ``org.apache.hadoop.fs.Path(String)`` on a POSIX system:

* the text before the first ``:`` is a scheme when that ``:`` comes before the first ``/``
  (``s3a://b/x``, ``hdfs:/x`` and ``gs:x`` all name a scheme; ``/data/a:b`` does not);
* after ``file:`` (or at the start of a plain path), ``//`` followed by more text starts an
  authority, which ends at the next ``/``.  An empty authority (``file:///x``) or
  ``localhost`` (RFC 8089's name for this machine) is local; any other host is not
  (``//host/x`` is ``file://host/x`` to Hadoop).  The path of a ``file:`` URI must be
  absolute (Hadoop reads ``file:a:`` as the Windows drive path ``/a:``; kafkalog refuses it);
* the rest is the path, taken literally: Hadoop does not percent-decode a path string
  (``file:///logs/a%20b`` is the directory ``/logs/a%20b``), nor treat ``?`` or ``#`` as the
  start of a query or fragment, and neither does kafkalog.
"""

from __future__ import annotations

import re

from ..errors import KafkaLogError

__all__ = ["UnsupportedPathError", "local_path"]

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*\Z")
_LOCAL_HOSTS = ("", "localhost")


class UnsupportedPathError(KafkaLogError, ValueError):
    """A path the Spark data source cannot use: a URI naming storage other than the local file
    system (another scheme, or a ``file:`` URI of another host), or not a valid path at all.
    ``uri`` is the path as given (the message names it too)."""

    def __init__(self, message: str, uri: str) -> None:
        super().__init__(message)
        self.uri = uri

    def __reduce__(self):
        return (type(self), (self.message, self.uri))


def _refuse(uri: str, why: str) -> UnsupportedPathError:
    return UnsupportedPathError(
        f"cannot use {uri!r}: {why}; kafkalog reads and writes local (or mounted) directories "
        "only (mount the storage or copy the log directories to a local path)",
        uri,
    )


def local_path(uri: str) -> str:
    """The local file-system path that ``uri`` names (see the module doc for the rules);
    relative plain paths stay relative.  Raises :class:`UnsupportedPathError` for anything
    that is not on the local file system."""
    s = str(uri)
    if not s:
        raise _refuse(s, "the path is empty")
    colon = s.find(":")
    slash = s.find("/")
    scheme = None
    rest = s
    if colon != -1 and (slash == -1 or colon < slash):
        scheme = s[:colon]
        if not _SCHEME.match(scheme):
            raise _refuse(s, f"{scheme!r} before ':' is not a URI scheme")
        if scheme.lower() != "file":
            raise _refuse(s, f"the {scheme!r} scheme is not supported")
        rest = s[colon + 1 :]
    if rest.startswith("//") and len(rest) > 2:
        # an authority, with or without 'file:' ('//host/x' is file://host/x to Hadoop)
        end = rest.find("/", 2)
        host = rest[2:] if end == -1 else rest[2:end]
        if host.lower() not in _LOCAL_HOSTS:
            raise _refuse(s, f"it names the host {host!r}, not this machine")
        rest = "" if end == -1 else rest[end:]
        if not rest:
            raise _refuse(s, "it names no directory")
    if scheme is None:
        return "/" + rest.lstrip("/") if rest.startswith("/") else rest
    if not rest.startswith("/") or (not rest.strip("/") and rest != "/"):
        raise _refuse(s, "a file: URI needs an absolute path (file:/dir, file:///dir)")
    return "/" + rest.lstrip("/")
