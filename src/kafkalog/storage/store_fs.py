"""Object stores and HDFS behind the :mod:`kafkalog.storage.fs` interface, through
:mod:`pyarrow.fs`; and where a location leads: :func:`resolve` and :func:`for_path` give the
file system a local path, a ``file://`` URI or a store's URI (``s3://``, ``gs://``,
``hdfs://``, ``abfs://``, ...) names, :func:`local_directory` the local directory a writable
Log needs.

A store is read in ranges (:class:`ArrowFileSystem`): listings are remembered until
:meth:`~ArrowFileSystem.refresh`, reads are retried with backoff and never short, and
``map()`` is ``None``, so callers read ranges.  How (block size, retries, timeouts) is
:class:`RemoteOptions`, kafkalog's own keys of ``storage_options``.
"""

from __future__ import annotations

import math
import os
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Tuple, Union

from ..errors import KafkaStorageError
from .fs import (
    DIRECTORY,
    FILE,
    LOCAL,
    MISSING,
    OTHER,
    Entry,
    FileSystem,
    MissingFileError,
    PathLike,
    ReadableFile,
    is_uri,
    not_regular_error,
)

__all__ = [
    "DEFAULT_BLOCK_SIZE",
    "ArrowFileSystem",
    "RemoteOptions",
    "remote_options",
    "resolve",
    "for_path",
    "local_directory",
]

# Why pyarrow.fs and not fsspec: pyarrow is already what the arrow and spark extras install, its
# S3/GCS/HDFS/Azure clients are C++ (ranged reads release the GIL, so a read-ahead thread really
# overlaps decoding), it reads the standard AWS variables itself, and it adds no dependency.
# fsspec would add s3fs/gcsfs/adlfs/aiobotocore and an event loop for the same ranged GETs.

_SCHEMES_HINT = {
    "s3": "pip install 'kafkalog[s3]' (pyarrow with S3 support)",
    "s3a": "pip install 'kafkalog[s3]' (pyarrow with S3 support)",
    "gs": "pip install 'kafkalog[gcs]' (pyarrow with GCS support)",
    "gcs": "pip install 'kafkalog[gcs]' (pyarrow with GCS support)",
    "hdfs": "pip install 'kafkalog[hdfs]' (pyarrow) and install libhdfs (a Hadoop client, "
            "HADOOP_HOME, JAVA_HOME, CLASSPATH)",
    "abfs": "pip install 'kafkalog[azure]' (pyarrow>=16 with Azure support)",
    "abfss": "pip install 'kafkalog[azure]' (pyarrow>=16 with Azure support)",
}

DEFAULT_BLOCK_SIZE = 8 * 1024 * 1024


class RemoteOptions(NamedTuple):
    """How kafkalog reads an object store (``storage_options`` keys of the same names):
    ``block_size`` bytes per ranged read (default 8 MiB; memory held per open file is about
    twice that), ``retries`` attempts after the first failure of a read or a listing, with
    exponential ``backoff`` seconds (doubling), ``connect_timeout``/``request_timeout`` seconds
    for one request."""

    block_size: int = DEFAULT_BLOCK_SIZE
    retries: int = 3
    backoff: float = 0.2
    connect_timeout: float = 5.0
    request_timeout: float = 30.0


_KAFKALOG_OPTIONS = set(RemoteOptions._fields)
_MAX_RETRIES = 100


def remote_options(storage_options: Optional[Mapping[str, Any]] = None) -> RemoteOptions:
    """kafkalog's own keys of ``storage_options`` as :class:`RemoteOptions`, checked before any
    request is made: ``block_size`` an int >= 65536, ``retries`` an int from 0 to 100,
    ``backoff`` a number >= 0, ``connect_timeout``/``request_timeout`` numbers > 0 (finite;
    seconds).  TypeError / ValueError naming the option otherwise: a value no request could
    use would only show later as every read failing."""
    if storage_options is None:
        return RemoteOptions()
    if not isinstance(storage_options, Mapping):
        raise TypeError(f"storage_options must be a dict, not {type(storage_options).__name__}")
    got: Dict[str, Any] = {}
    for name in RemoteOptions._fields:
        if name not in storage_options:
            continue
        v = storage_options[name]
        what = f"storage_options[{name!r}]"
        if name in ("block_size", "retries"):
            if not isinstance(v, int) or isinstance(v, bool):
                raise TypeError(f"{what} must be an int, not {type(v).__name__} ({v!r})")
            if name == "block_size" and v < 64 * 1024:
                raise ValueError(f"{what} (bytes per ranged read) must be >= 65536, not {v}")
            if name == "retries" and not 0 <= v <= _MAX_RETRIES:
                raise ValueError(f"{what} (attempts after a failed request) must be from 0 to "
                                 f"{_MAX_RETRIES}, not {v}")
        else:
            if not isinstance(v, (int, float)) or isinstance(v, bool):
                raise TypeError(f"{what} must be a number of seconds, not {type(v).__name__} "
                                f"({v!r})")
            low_ok = v >= 0 if name == "backoff" else v > 0
            if not (low_ok and math.isfinite(v)):
                bound = ">= 0" if name == "backoff" else "> 0"
                raise ValueError(f"{what} must be a finite number of seconds {bound}, not {v}")
            v = float(v)
        got[name] = v
    return RemoteOptions(**got)


def resolve(
    location: PathLike, storage_options: Optional[dict] = None
) -> Tuple[FileSystem, str]:
    """``(file_system, path)`` for a local path, a ``file://`` URI or an object-store / HDFS URI
    (``s3://``, ``gs://``, ``hdfs://``, ``abfs://``, ...).  Local paths and ``file://`` give
    :data:`LOCAL` and a local path; other schemes give an :class:`ArrowFileSystem` and the URI
    itself as the path (so every error names the URI).  ``storage_options`` passes keys to the
    pyarrow file system (e.g. ``endpoint_override``, ``region``, ``access_key``,
    ``secret_key``, ``anonymous``) and kafkalog's own :class:`RemoteOptions`.  A scheme whose
    support is not installed is a KafkaStorageError naming the URI and what to install."""
    if isinstance(location, os.PathLike):
        location = os.fspath(location)
    remote_options(storage_options)  # checked whatever the location: a bad value is a mistake
    if not is_uri(location):
        return LOCAL, location
    scheme = location.split("://", 1)[0].lower()
    if scheme == "file":
        from urllib.parse import unquote, urlsplit

        parts = urlsplit(location)
        if parts.netloc not in ("", "localhost"):
            raise KafkaStorageError(
                f"cannot read {location}: a file:// URI names a local path (file:///dir/...),"
                f" not host {parts.netloc!r}", path=location, operation="resolving a URI")
        path = unquote(parts.path)
        if os.name == "nt" and len(path) > 2 and path[0] == "/" and path[2] == ":":
            path = path[1:]
        return LOCAL, path
    return ArrowFileSystem.for_uri(location, storage_options), location.rstrip("/")


def _credentials_available(opts: dict) -> bool:
    if opts.get("anonymous") or opts.get("access_key") or opts.get("session_name"):
        return True
    if opts.get("credentials") in ("default", "instance"):
        return True
    env = os.environ
    if env.get("AWS_ACCESS_KEY_ID") and env.get("AWS_SECRET_ACCESS_KEY"):
        return True
    if env.get("AWS_PROFILE") or env.get("AWS_WEB_IDENTITY_TOKEN_FILE") \
            or env.get("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI") \
            or env.get("AWS_CONTAINER_CREDENTIALS_FULL_URI"):
        return True
    shared = env.get("AWS_SHARED_CREDENTIALS_FILE") or os.path.join(
        os.path.expanduser("~"), ".aws", "credentials")
    return os.path.isfile(shared)


def _missing_extra(uri: str, scheme: str, err: Union[BaseException, str]) -> KafkaStorageError:
    fix = _SCHEMES_HINT.get(scheme, "install pyarrow with support for this scheme")
    e = KafkaStorageError(
        f"cannot read {uri}: the {scheme}:// scheme is not available here ({err}); {fix}",
        path=uri, operation="resolving a URI")
    return e


class ArrowFileSystem(FileSystem):
    """An object store or HDFS through :mod:`pyarrow.fs`: paths are the URIs themselves.

    Listing a directory is one listing request whose sizes are remembered, so opening or
    sizing a listed file costs no extra request.  Reads are ranged (``block_size`` at a time,
    at most one block cached per open file), retried with backoff, and never short: a range
    that comes back shorter than asked is an error naming the URI, not data.  ``map()`` is
    ``None``: callers read ranges.  ``bytes_read``/``requests`` count what was fetched.

    What is remembered (the sizes and names of listings and inspections) lasts until
    :meth:`refresh`, which a new plan and a new read call: a client kept for the life of a
    process (a reused Spark worker, a long-lived planner) never answers from what an earlier
    plan or task saw (a segment that grew since, a name that appeared).  A listing always asks
    the store, and replaces what was remembered of the names it holds.

    :meth:`version_key` is the size, the modification time and the identity of the listing or
    inspection that saw the file: S3 keeps modification times to the second and pyarrow's
    listings carry no ETag or version, so a file rewritten with the same size within the same
    second has the same size and time; each new listing of its directory gives a new key, so a
    cache keyed on it (the root checkpoints' parse) reads the file again once per listing
    (once per plan), never across plans."""

    def __init__(self, pafs, prefix: str, options: RemoteOptions) -> None:
        self.pafs = pafs
        self.prefix = prefix  # s3://, gs://: URI = prefix + pyarrow path
        self._native_base: Optional[str] = None  # others: pyarrow path = base + URI path
        self.options = options
        self.bytes_read = 0
        self.requests = 0
        # path -> (pyarrow FileInfo, the number of the listing or inspection that gave it)
        self._infos: Dict[str, tuple] = {}
        # the names of each directory as last listed: a name missing there is missing without
        # a request (a listing is as fresh as what it says is there; until refresh())
        self._listed: Dict[str, set] = {}
        self._seen = 0  # listings and inspections so far (what version_key tells apart)
        import threading

        self._lock = threading.Lock()

    def refresh(self) -> None:
        with self._lock:
            self._infos.clear()
            self._listed.clear()

    # -- construction
    @classmethod
    def for_uri(cls, uri: str, storage_options: Optional[dict] = None) -> "ArrowFileSystem":
        options = remote_options(storage_options)
        opts = {k: v for k, v in dict(storage_options or {}).items() if k not in _KAFKALOG_OPTIONS}
        scheme = uri.split("://", 1)[0].lower()
        try:
            import pyarrow.fs as pafs_mod
        except ImportError as e:
            raise _missing_extra(uri, scheme, e) from e
        try:
            if scheme in ("s3", "s3a"):
                fs = cls._s3(pafs_mod, uri, opts, options)
                prefix = scheme + "://"
            elif scheme in ("gs", "gcs"):
                kw = dict(opts)
                kw.setdefault("retry_time_limit", _timedelta(options.request_timeout))
                fs = pafs_mod.GcsFileSystem(**kw)
                prefix = scheme + "://"
            elif opts:
                raise ValueError(
                    f"storage_options {sorted(opts)} are not supported for {scheme}:// here")
            else:
                fs, native = pafs_mod.FileSystem.from_uri(uri)
                # hdfs://host:port/dir, abfs://container@account/dir: the pyarrow path of a URI
                # is a base (/, container/) then the URI's path
                rest = uri.split("://", 1)[1]
                auth, _, rel = rest.partition("/")
                rel = rel.rstrip("/")
                if rel and not native.rstrip("/").endswith(rel):
                    raise ValueError(f"cannot map {uri} to a path of its file system ({native})")
                base = native.rstrip("/")[: len(native.rstrip("/")) - len(rel)]
                out = cls(fs, uri[: len(uri) - len(rest)] + auth, options)
                out._native_base = base if base else ("/" if native.startswith("/") else "")
                return out
        except KafkaStorageError:
            raise
        except (ImportError, AttributeError) as e:
            raise _missing_extra(uri, scheme, e) from e
        except Exception as e:  # OSError, ValueError, pyarrow.ArrowException ...
            msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            if "Unrecognized filesystem type" in msg or "not supported" in msg \
                    or "libjvm" in msg or "libhdfs" in msg or "support" in msg and "enabled" in msg:
                raise _missing_extra(uri, scheme, msg) from e
            raise KafkaStorageError(
                f"cannot open {uri}: {msg}; check the URI and the store's credentials "
                "(see storage_options)", path=uri, operation="resolving a URI") from e
        return cls(fs, prefix, options)

    @staticmethod
    def _s3(pafs_mod, uri: str, opts: dict, options: RemoteOptions):
        if not hasattr(pafs_mod, "S3FileSystem"):
            raise ImportError("this pyarrow was built without S3")
        env = os.environ
        kw = dict(opts)
        cred = kw.pop("credentials", None)
        if not _credentials_available(opts):
            raise KafkaStorageError(
                f"cannot read {uri}: no S3 credentials: set AWS_ACCESS_KEY_ID and "
                "AWS_SECRET_ACCESS_KEY (or AWS_PROFILE), pass storage_options "
                "{'access_key': ..., 'secret_key': ...}, {'anonymous': True} for a public "
                "bucket, or {'credentials': 'default'} to use the instance's role",
                path=uri, operation="resolving a URI")
        if cred is None and not kw.get("anonymous") and "access_key" not in kw \
                and env.get("AWS_ACCESS_KEY_ID") and env.get("AWS_SECRET_ACCESS_KEY"):
            kw["access_key"] = env["AWS_ACCESS_KEY_ID"]
            kw["secret_key"] = env["AWS_SECRET_ACCESS_KEY"]
            if env.get("AWS_SESSION_TOKEN"):
                kw.setdefault("session_token", env["AWS_SESSION_TOKEN"])
        endpoint = kw.pop("endpoint_url", None) or env.get("AWS_ENDPOINT_URL_S3") \
            or env.get("AWS_ENDPOINT_URL")
        if endpoint and "endpoint_override" not in kw:
            if endpoint.startswith("http://"):
                kw.setdefault("scheme", "http")
                endpoint = endpoint[len("http://"):]
            elif endpoint.startswith("https://"):
                endpoint = endpoint[len("https://"):]
            kw["endpoint_override"] = endpoint.rstrip("/")
        region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
        if region:
            kw.setdefault("region", region)
        elif kw.get("endpoint_override"):
            kw.setdefault("region", "us-east-1")  # no region lookup against a custom endpoint
        kw.setdefault("connect_timeout", options.connect_timeout)
        kw.setdefault("request_timeout", options.request_timeout)
        kw.setdefault("retry_strategy", pafs_mod.AwsStandardS3RetryStrategy(max_attempts=2))
        return pafs_mod.S3FileSystem(**kw)

    # -- paths
    def _native(self, path) -> str:
        path = os.fspath(path)
        if not path.startswith(self.prefix):
            raise ValueError(f"{path} is not a path of {self.prefix}")
        p = path[len(self.prefix):].rstrip("/")
        if self._native_base is not None:
            return (self._native_base + p.lstrip("/")) or "/"
        return p

    def _uri(self, native: str) -> str:
        if self._native_base is not None:
            return self.prefix + "/" + native[len(self._native_base):].lstrip("/")
        return self.prefix + native

    def _retry(self, what: str, uri: str, fn, position: Optional[int] = None):
        import time

        from pyarrow.lib import ArrowException

        opts = self.options
        last: Optional[BaseException] = None
        for attempt in range(opts.retries + 1):
            try:
                return fn()
            except KafkaStorageError:
                raise
            except FileNotFoundError as e:
                raise not_regular_error(uri, MISSING) from e
            except (OSError, ArrowException) as e:
                last = e
                msg = str(e)
                # not worth retrying: access, credentials, missing bucket, bad request
                if any(s in msg for s in ("AccessDenied", "InvalidAccessKeyId", "NoSuchBucket",
                                           "SignatureDoesNotMatch", "Forbidden", "HTTP status 403",
                                           "HTTP status 404", "HTTP status 400")):
                    break
                if attempt < opts.retries:
                    time.sleep(opts.backoff * (2 ** attempt))
        text = str(last).strip().splitlines()[0] if str(last).strip() else type(last).__name__
        raise KafkaStorageError(
            f"{what} {uri} failed after {opts.retries + 1} attempt(s): {text}; check the URI, "
            "the endpoint (AWS_ENDPOINT_URL / storage_options endpoint_override), the "
            "credentials and the network, or raise storage_options retries/request_timeout",
            path=uri, position=position, operation=what) from last

    # -- listing
    def _info(self, path: str):
        return self._seen_info(path)[0]

    def _seen_info(self, path: str) -> tuple:
        """(FileInfo, which listing or inspection gave it) of ``path``: remembered, else one
        request (a name its directory's listing lacks is missing without one)."""
        with self._lock:
            got = self._infos.get(path)
        if got is not None:
            return got
        import pyarrow.fs as pafs_mod

        native = self._native(path)
        if native in ("", "/"):
            return _FakeDirInfo(native), 0
        parent, _, name = path.rstrip("/").rpartition("/")
        with self._lock:
            names = self._listed.get(parent)
        if names is not None and name not in names:
            return _MissingInfo(native), 0
        self.requests += 1
        info = self._retry("inspecting", path, lambda: self.pafs.get_file_info(native))
        with self._lock:
            self._seen += 1
            got = (info, self._seen)
            if info.type != pafs_mod.FileType.NotFound:
                self._infos[path] = got
        return got

    def kind(self, path: PathLike) -> str:
        import pyarrow.fs as pafs_mod

        t = self._info(os.fspath(path)).type
        if t == pafs_mod.FileType.File:
            return FILE
        if t == pafs_mod.FileType.Directory:
            return DIRECTORY
        if t == pafs_mod.FileType.NotFound:
            return MISSING
        return OTHER

    def list_dir(self, path: PathLike) -> List[Entry]:
        import pyarrow.fs as pafs_mod

        path = os.fspath(path).rstrip("/")
        native = self._native(path)
        sel = pafs_mod.FileSelector(native, recursive=False, allow_not_found=True)
        self.requests += 1
        infos = self._retry("listing", path, lambda: self.pafs.get_file_info(sel))
        if not infos and self.kind(path) == MISSING:
            raise not_regular_error(path, MISSING)
        out: List[Entry] = []
        with self._lock:
            self._seen += 1
            seen = self._seen
            names = set()
            for info in infos:
                base = info.path.rstrip("/").rpartition("/")[2]
                uri = self._uri(info.path.rstrip("/"))
                self._infos[uri] = (info, seen)
                names.add(base)
                if info.type == pafs_mod.FileType.File:
                    kind = FILE
                elif info.type == pafs_mod.FileType.Directory:
                    kind = DIRECTORY
                else:
                    kind = OTHER
                out.append(Entry(base, uri, kind, False))
            self._listed[path] = names
        out.sort(key=_by_name)
        return out

    def glob(self, pattern: str) -> List[str]:
        """Shell patterns over the URI's components; one listing per directory level that
        holds a pattern."""
        import fnmatch

        head, _, rest = pattern.partition("://")
        parts = rest.split("/")
        # the fixed leading components (bucket, prefix) up to the first wildcard
        fixed = []
        for i, part in enumerate(parts):
            if any(c in part for c in "*?["):
                break
            fixed.append(part)
        else:
            return [pattern] if self.kind(pattern) != MISSING else []
        current = [head + "://" + "/".join(fixed)]
        for part in parts[len(fixed):]:
            nxt: List[str] = []
            for d in current:
                if any(c in part for c in "*?["):
                    try:
                        entries = self.list_dir(d)
                    except MissingFileError:
                        continue
                    nxt.extend(e.path for e in entries if fnmatch.fnmatchcase(e.name, part))
                else:
                    nxt.append(d.rstrip("/") + "/" + part)
            current = nxt
        return sorted(p for p in current if self.kind(p) != MISSING)

    def size(self, path: PathLike) -> int:
        import pyarrow.fs as pafs_mod

        path = os.fspath(path)
        info = self._info(path)
        if info.type != pafs_mod.FileType.File:
            raise not_regular_error(path, self.kind(path))
        return info.size

    def open_read(self, path: PathLike) -> ReadableFile:
        import pyarrow.fs as pafs_mod

        path = os.fspath(path)
        info = self._info(path)
        if info.type != pafs_mod.FileType.File:
            raise not_regular_error(path, self.kind(path))
        return _RemoteFile(self, path, info)

    def modified_ms(self, path: PathLike) -> Optional[int]:
        mtime = getattr(self._info(os.fspath(path)), "mtime", None)
        return None if mtime is None else int(mtime.timestamp() * 1000)

    def version_key(self, path: PathLike) -> Optional[tuple]:
        """(size, modification time, the listing or inspection that saw the file): see the
        class doc; a new listing of the file's directory gives a new key."""
        import pyarrow.fs as pafs_mod

        info, seen = self._seen_info(os.fspath(path))
        mtime = getattr(info, "mtime", None)
        if info.type != pafs_mod.FileType.File or mtime is None:
            return None
        return (info.size, mtime, seen)


def _by_name(e) -> str:
    return e.name


class _MissingInfo:
    """What a directory's listing says of a name it does not hold."""

    def __init__(self, path):
        import pyarrow.fs as pafs_mod

        self.path = path
        self.type = pafs_mod.FileType.NotFound
        self.size = None


class _FakeDirInfo:
    def __init__(self, path):
        import pyarrow.fs as pafs_mod

        self.path = path
        self.type = pafs_mod.FileType.Directory
        self.size = None


def _timedelta(seconds: float):
    import datetime

    return datetime.timedelta(seconds=seconds)


class _RemoteFile(ReadableFile):
    """Ranged reads of one object: ``read`` keeps the last range fetched, so small reads
    (headers, index entries) cost no extra request; reading on grows the ranges up to
    ``block_size``, a jump starts again at :attr:`FIRST_READ` bytes."""

    def __init__(self, fs: ArrowFileSystem, path: str, info) -> None:
        self.fs = fs
        self.path = path
        self.size = int(info.size)
        self._info = info
        self._handle = None
        self._block_start = 0
        self._block = b""
        self._want = self.FIRST_READ

    FIRST_READ = 16 * 1024  # bytes fetched by a read away from the block kept

    def _open(self):
        if self._handle is None:
            native = self.fs._native(self.path)

            def opener():
                try:
                    return self.fs.pafs.open_input_file(self._info)
                except TypeError:  # a backend that wants a path
                    return self.fs.pafs.open_input_file(native)

            self._handle = self.fs._retry("opening", self.path, opener)
        return self._handle

    def fetch(self, position: int, length: int) -> bytes:
        """Exactly ``min(length, size - position)`` bytes from the store (one ranged read,
        retried); never fewer."""
        want = max(0, min(length, self.size - position))
        if want == 0:
            return b""

        def go():
            h = self._open()
            data = h.read_at(want, position)
            if len(data) != want:
                raise OSError(
                    f"short read: {len(data)} of {want} bytes at position {position} (the object"
                    f" is shorter than its listed size {self.size}: truncated or replaced?)")
            return data

        data = self.fs._retry("reading", self.path, go, position=position)
        self.fs.bytes_read += want
        self.fs.requests += 1
        return data.to_pybytes() if hasattr(data, "to_pybytes") else bytes(data)

    def read(self, position: int, length: int) -> bytes:
        if position < 0 or length < 0:
            raise ValueError(f"position and length must be non-negative ({position}, {length})")
        end = min(position + length, self.size)
        if end <= position:
            return b""
        bs, blk = self._block_start, self._block
        if bs <= position and end <= bs + len(blk):
            return blk[position - bs: end - bs]
        block_size = self.fs.options.block_size
        # reading on from the block kept: twice as much as last time, up to block_size; a
        # jump elsewhere (an index lookup, a header walk) starts small again, so a seek
        # costs a small range, not a block
        if blk and bs <= position <= bs + len(blk):
            self._want = min(block_size, self._want * 2)
        else:
            self._want = min(block_size, self.FIRST_READ)
        if end - position >= self._want:
            return self.fetch(position, end - position)
        self._block = self.fetch(position, self._want)
        self._block_start = position
        return self._block[: end - position]

    def map(self):
        return None

    def close(self) -> None:
        h, self._handle = self._handle, None
        self._block = b""
        if h is not None:
            try:
                h.close()
            except Exception:
                pass


_CACHE: dict = {}


def for_path(path: PathLike, fs: Optional[FileSystem] = None) -> Tuple[FileSystem, str]:
    """``(file_system, path)``: ``fs`` when given and not the local one, else the file system a
    path or URI names, configured from the environment (``KAFKALOG_STORAGE_OPTIONS``, a JSON
    object of storage_options, besides the store's own variables; one :class:`ArrowFileSystem`
    per scheme and bucket/authority, kept, so its listing sizes serve later opens)."""
    if fs is not None and fs is not LOCAL:
        return fs, os.fspath(path)
    if not is_uri(path):
        return LOCAL, os.fspath(path) if not isinstance(path, str) else path
    scheme, _, rest = path.partition("://")
    key = (scheme.lower(), rest.split("/", 1)[0])
    got = _CACHE.get(key)
    if got is None:
        got, p = resolve(path, _env_storage_options())
        if got is LOCAL:
            return got, p
        _CACHE[key] = got
    return got, path.rstrip("/")


def local_directory(location: PathLike) -> str:
    """The local path a writable :class:`~kafkalog.storage.log.Log` opens: a path as given, a
    ``file://`` URI as its path; any other URI is a KafkaStorageError naming it (a ``Log``
    appends, locks and recovers in place, which needs a local file system; object-store and
    HDFS copies are opened with ``Log.open(uri, read_only=True)`` or read with
    :mod:`kafkalog.arrow` and the ``kafkalog`` CLI), never a local directory named after the
    scheme."""
    if isinstance(location, os.PathLike):
        location = os.fspath(location)
    if not is_uri(location):
        return location
    if location.split("://", 1)[0].lower() == "file":
        return resolve(location)[1]
    raise KafkaStorageError(
        f"cannot open {location} as a writable Log: a Log appends, locks and recovers in place, "
        "which needs a local directory; open an object-store or HDFS copy with "
        "Log.open(uri, read_only=True), kafkalog.arrow.to_arrow/iter_batches or "
        "`kafkalog dump|verify|stats`",
        path=location, operation="opening a log")


def _env_storage_options() -> Optional[dict]:
    import json

    raw = os.environ.get("KAFKALOG_STORAGE_OPTIONS")
    if not raw:
        return None
    try:
        opts = json.loads(raw)
    except ValueError as e:
        raise ValueError(f"KAFKALOG_STORAGE_OPTIONS is not a JSON object: {e}") from None
    if not isinstance(opts, dict):
        raise ValueError("KAFKALOG_STORAGE_OPTIONS must be a JSON object")
    return opts
