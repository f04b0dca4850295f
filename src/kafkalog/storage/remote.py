"""Object stores and other remote file systems behind :class:`kafkalog.storage.fs.FileSystem`.

``resolve(location, storage_options)`` turns what a user passes (a local path, a ``file:`` URI,
or ``s3://``, ``gs://``, ``abfs://``, ``hdfs://`` ...) into a file system and a path on it.
Remote locations use ``pyarrow.fs`` (already the arrow and spark extras' dependency; its S3,
GCS, Azure and HDFS clients are the ones Arrow and Spark users configure already), wrapped as
:class:`ArrowFileSystem`:

* one listing per directory (``get_file_info`` with a selector: the sizes come with it, no
  request per file);
* :class:`RemoteFile` reads byte ranges (``read_at``) and never maps; every read is retried
  with exponential backoff (``retries``, ``retry_backoff``), then raised as
  :class:`~kafkalog.errors.KafkaStorageError` naming the URI; a short read is an error, never
  data;
* timeouts are bounded (``connect_timeout``, ``request_timeout``: 5 s and 30 s by default).

S3 settings come as users set them for other tools: ``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, ``AWS_REGION`` / ``AWS_DEFAULT_REGION``,
``AWS_ENDPOINT_URL`` / ``AWS_ENDPOINT_URL_S3`` (S3-compatible stores), or in
``storage_options``: ``access_key``, ``secret_key``, ``session_token``, ``region``,
``endpoint_url`` (``http://host:port``), ``anonymous``, ``connect_timeout``,
``request_timeout``, ``retries``, ``retry_backoff``.  Nothing here writes.
"""

from __future__ import annotations

import fnmatch
import os
import posixpath
import re
import time
from typing import Any, Dict, List, Mapping, Optional, Tuple
from urllib.parse import unquote, urlsplit

from ..errors import KafkaStorageError
from . import fs as _fs

__all__ = ["resolve", "is_remote", "ArrowFileSystem", "RemoteFile", "RemoteStorageError"]

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")
# what each scheme needs, for the message when pyarrow cannot serve it
_NEEDS = {
    "s3": "pyarrow built with S3 support (the wheels from PyPI have it): pip install 'kafkalog[arrow]'",
    "s3a": "pyarrow built with S3 support: pip install 'kafkalog[arrow]'",
    "gs": "pyarrow built with GCS support (the wheels from PyPI have it): pip install 'kafkalog[arrow]'",
    "gcs": "pyarrow built with GCS support: pip install 'kafkalog[arrow]'",
    "abfs": "pyarrow 16 or later with Azure support: pip install 'kafkalog[arrow]'",
    "abfss": "pyarrow 16 or later with Azure support: pip install 'kafkalog[arrow]'",
    "hdfs": "pyarrow with libhdfs: a Hadoop client (HADOOP_HOME, CLASSPATH, JAVA_HOME) on this host",
}
_DEFAULTS = {"connect_timeout": 5.0, "request_timeout": 30.0, "retries": 3, "retry_backoff": 0.2}
_KNOWN = {"access_key", "secret_key", "session_token", "region", "endpoint_url", "anonymous",
          *_DEFAULTS}


class RemoteStorageError(KafkaStorageError, ValueError):
    """A remote location cannot be used as given: an unsupported scheme, a missing library,
    bad options, missing credentials.  Names the URI and what to do."""


def is_remote(location: Any) -> bool:
    """Whether ``location`` names a remote file system: a ``scheme:`` other than ``file:`` (and
    not a Windows drive letter).  :func:`resolve` refuses those it cannot serve, clearly."""
    if not isinstance(location, str):
        return False
    m = _SCHEME.match(location)
    return bool(m) and len(m.group(1)) > 1 and m.group(1).lower() != "file"


def resolve(location: Any, storage_options: Optional[Mapping[str, Any]] = None
            ) -> Tuple[_fs.FileSystem, str]:
    """``(file system, path on it)`` for a local path, a ``file:`` URI or a remote URI."""
    loc = os.fspath(location)
    m = _SCHEME.match(loc) if isinstance(loc, str) else None
    if m is None or len(m.group(1)) == 1:  # a path (or a Windows drive letter)
        return _fs.LOCAL, loc
    scheme = m.group(1).lower()
    if scheme == "file":
        return _fs.LOCAL, _file_uri_path(loc)
    if "://" not in loc:
        raise RemoteStorageError(f"cannot read {loc}: a {scheme} URI needs {scheme}://", path=loc)
    return ArrowFileSystem.for_uri(loc, storage_options), _path_of(loc)


def _file_uri_path(uri: str) -> str:
    parts = urlsplit(uri)
    if parts.netloc not in ("", "localhost"):
        raise RemoteStorageError(f"cannot read {uri}: a file: URI with a host other than "
                                 "localhost is not on this machine", path=uri)
    path = unquote(parts.path)
    if not path.startswith("/"):
        raise RemoteStorageError(f"cannot read {uri}: a file: URI needs an absolute path", path=uri)
    return "/" + path.lstrip("/")


def _path_of(uri: str) -> str:
    """The path pyarrow's file systems use: ``bucket/key`` for object stores."""
    parts = urlsplit(uri)
    path = unquote(parts.path)
    if parts.scheme.lower() == "hdfs":
        return path or "/"
    return (parts.netloc + path).rstrip("/") if path not in ("", "/") else parts.netloc


def _options(uri: str, storage_options: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    opts = dict(_DEFAULTS)
    for k, v in (storage_options or {}).items():
        if k not in _KNOWN:
            raise RemoteStorageError(
                f"cannot read {uri}: unknown storage option {k!r} (known: {', '.join(sorted(_KNOWN))})",
                path=uri)
        opts[k] = v
    for k in ("connect_timeout", "request_timeout", "retry_backoff"):
        try:
            opts[k] = float(opts[k])
        except (TypeError, ValueError):
            raise RemoteStorageError(f"cannot read {uri}: storage option {k} must be a number of "
                                     f"seconds, not {opts[k]!r}", path=uri) from None
        if not 0 <= opts[k] <= 3600:
            raise RemoteStorageError(f"cannot read {uri}: storage option {k} must be in [0, 3600]",
                                     path=uri)
    try:
        opts["retries"] = int(opts["retries"])
    except (TypeError, ValueError):
        raise RemoteStorageError(f"cannot read {uri}: storage option retries must be an int",
                                 path=uri) from None
    if not 0 <= opts["retries"] <= 20:
        raise RemoteStorageError(f"cannot read {uri}: storage option retries must be in [0, 20]",
                                 path=uri)
    return opts


def _s3(uri: str, opts: Dict[str, Any]):
    from pyarrow import fs as pafs

    env = os.environ
    endpoint = opts.get("endpoint_url") or env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL")
    kw: Dict[str, Any] = {
        "connect_timeout": opts["connect_timeout"],
        "request_timeout": opts["request_timeout"],
        "retry_strategy": pafs.AwsStandardS3RetryStrategy(max_attempts=max(1, opts["retries"])),
    }
    if endpoint:
        ep = urlsplit(endpoint if "://" in endpoint else "https://" + endpoint)
        if ep.scheme not in ("http", "https") or not ep.netloc:
            raise RemoteStorageError(f"cannot read {uri}: endpoint {endpoint!r} is not an "
                                     "http(s)://host[:port] URL", path=uri)
        kw["endpoint_override"] = ep.netloc
        kw["scheme"] = ep.scheme
    region = opts.get("region") or env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
    if region:
        kw["region"] = region
    elif endpoint:
        kw["region"] = "us-east-1"  # an S3-compatible store: no region lookup
    if opts.get("anonymous"):
        kw["anonymous"] = True
    else:
        key = opts.get("access_key") or env.get("AWS_ACCESS_KEY_ID")
        secret = opts.get("secret_key") or env.get("AWS_SECRET_ACCESS_KEY")
        if bool(key) != bool(secret):
            raise RemoteStorageError(
                f"cannot read {uri}: an access key needs its secret key (set both "
                "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or storage options access_key and "
                "secret_key)", path=uri)
        if key:
            kw["access_key"] = key
            kw["secret_key"] = secret
            token = opts.get("session_token") or env.get("AWS_SESSION_TOKEN")
            if token:
                kw["session_token"] = token
        elif not (env.get("AWS_PROFILE") or env.get("AWS_WEB_IDENTITY_TOKEN_FILE")
                  or env.get("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI")
                  or os.path.exists(os.path.expanduser("~/.aws/credentials"))):
            raise RemoteStorageError(
                f"cannot read {uri}: no AWS credentials (set AWS_ACCESS_KEY_ID and "
                "AWS_SECRET_ACCESS_KEY, a profile, or storage options access_key/secret_key; "
                "storage option anonymous=True for a public bucket)", path=uri)
    return pafs.S3FileSystem(**kw)


class ArrowFileSystem(_fs.FileSystem):
    """A remote file system through ``pyarrow.fs`` (see the module doc)."""

    def __init__(self, pa_fs, scheme: str, options: Dict[str, Any], authority: str = "") -> None:
        self._fs = pa_fs
        self.scheme = scheme
        self.options = options
        self._authority = authority
        # what the listings said (type and size): no request per listed file to inspect it
        self._listed: Dict[str, Any] = {}

    @classmethod
    def for_uri(cls, uri: str, storage_options: Optional[Mapping[str, Any]] = None) -> "ArrowFileSystem":
        scheme = urlsplit(uri).scheme.lower()
        opts = _options(uri, storage_options)
        try:
            import pyarrow.fs as pafs
        except ImportError:
            raise RemoteStorageError(
                f"cannot read {uri}: remote storage needs pyarrow: pip install 'kafkalog[arrow]'",
                path=uri) from None
        try:
            if scheme in ("s3", "s3a"):
                pa_fs = _s3(uri, opts)
            else:
                pa_fs, _ = pafs.FileSystem.from_uri(uri)
        except RemoteStorageError:
            raise
        except (ImportError, NotImplementedError, ValueError, OSError) as e:
            need = _NEEDS.get(scheme, "a pyarrow file system for this scheme")
            raise RemoteStorageError(f"cannot read {uri}: {scheme}:// is not available here "
                                     f"({e}); it needs {need}", path=uri) from e
        authority = urlsplit(uri).netloc if scheme == "hdfs" else ""
        return cls(pa_fs, scheme, opts, authority)

    # -- names -------------------------------------------------------------------------------------
    def uri(self, path: str) -> str:
        """The URI of ``path`` on this file system (for messages and for the paths it returns)."""
        if self.scheme == "hdfs":
            return f"hdfs://{self._authority}{path}"
        return f"{self.scheme}://{path}"

    def _path(self, path) -> str:
        p = os.fspath(path)
        return _path_of(p) if _SCHEME.match(p) and "://" in p else p

    def _error(self, e: BaseException, operation: str, path: str) -> KafkaStorageError:
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        low = msg.lower()
        if "credential" in low or "access denied" in low or "forbidden" in low:
            hint = "; check the credentials (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY or storage options)"
        elif "nosuchbucket" in low or "bucket does not exist" in low or "no such bucket" in low:
            hint = "; the bucket does not exist"
        elif "curl" in low or "connect" in low or "timed out" in low or "timeout" in low:
            hint = "; the endpoint cannot be reached (check AWS_ENDPOINT_URL / endpoint_url and the network)"
        else:
            hint = ""
        err = KafkaStorageError(f"{operation} {self.uri(path)} failed: {msg}{hint}",
                                path=self.uri(path), operation=operation)
        err.__cause__ = e
        return err

    def _call(self, operation: str, path: str, fn, *args):
        """``fn(*args)`` with the retries and backoff of the options; OSError -> KafkaStorageError."""
        attempts = self.options["retries"] + 1
        for i in range(attempts):
            try:
                return fn(*args)
            except FileNotFoundError:
                raise
            except OSError as e:
                low = str(e).lower()
                if i + 1 >= attempts or "nosuchbucket" in low or "credential" in low or "access denied" in low:
                    raise self._error(e, operation, path) from e
                time.sleep(self.options["retry_backoff"] * (2 ** i))
        raise AssertionError("unreachable")  # pragma: no cover

    def _info(self, path: str):
        info = self._listed.get(path)
        if info is None:
            info = self._call("inspecting", path, self._fs.get_file_info, path)
        return info

    # -- FileSystem --------------------------------------------------------------------------------
    def list_dir(self, path) -> List[_fs.Entry]:
        from pyarrow import fs as pafs

        p = self._path(path)
        sel = pafs.FileSelector(p, allow_not_found=True, recursive=False)
        infos = self._call("listing", p, self._fs.get_file_info, sel)
        if not infos and self.kind(p) == _fs.MISSING:
            raise _fs.not_regular_error(self.uri(p), _fs.MISSING, operation="listing a directory")
        out = []
        for info in sorted(infos, key=lambda i: i.base_name):
            self._listed[info.path] = info
            kind = _kind(info)
            out.append(_fs.Entry(info.base_name, info.path, kind, False))
        return out

    def kind(self, path) -> str:
        p = self._path(path)
        if p in ("", "/"):
            return _fs.DIRECTORY
        return _kind(self._info(p))

    def size(self, path) -> int:
        p = self._path(path)
        info = self._info(p)
        kind = _kind(info)
        if kind != _fs.FILE:
            raise _fs.not_regular_error(self.uri(p), kind)
        return info.size

    def open_read(self, path) -> "RemoteFile":
        p = self._path(path)
        size = self.size(p)
        return RemoteFile(self, p, size)

    def glob(self, pattern: str) -> List[str]:
        p = self._path(pattern)
        parent, name = posixpath.split(p)
        return sorted(e.path for e in self.list_dir(parent) if fnmatch.fnmatchcase(e.name, name))

    def is_local(self) -> bool:
        return False


def _kind(info) -> str:
    from pyarrow import fs as pafs

    t = info.type
    if t == pafs.FileType.File:
        return _fs.FILE
    if t == pafs.FileType.Directory:
        return _fs.DIRECTORY
    if t == pafs.FileType.NotFound:
        return _fs.MISSING
    return _fs.OTHER


class RemoteFile(_fs.ReadableFile):
    """A remote object open for ranged reads (no map: ``map()`` is None).  ``bytes_read``
    counts what was fetched."""

    def __init__(self, fs: ArrowFileSystem, path: str, size: int) -> None:
        self._rfs = fs
        self.path = fs.uri(path)
        self._key = path
        self.size = size
        self._f = None
        self.bytes_read = 0

    def _handle(self):
        if self._f is None:
            self._f = self._rfs._call("opening", self._key, self._rfs._fs.open_input_file, self._key)
        return self._f

    def read(self, position: int, length: int) -> bytes:
        if position < 0 or length < 0:
            raise ValueError("position and length must be non-negative")
        want = max(0, min(length, self.size - position))
        if want == 0:
            return b""

        def once():
            data = self._handle().read_at(want, position)
            if len(data) != want:  # never hand a partial read on as data
                self._close_handle()
                raise OSError(f"short read: {len(data)} of {want} bytes at position {position} "
                              f"(the object changed or the connection dropped)")
            return data

        data = self._rfs._call("reading", self._key, once)
        self.bytes_read += len(data)
        return data.to_pybytes() if hasattr(data, "to_pybytes") else bytes(data)

    def map(self):
        return None

    def _close_handle(self) -> None:
        f, self._f = self._f, None
        if f is not None:
            try:
                f.close()
            except OSError:
                pass

    def close(self) -> None:
        self._close_handle()
