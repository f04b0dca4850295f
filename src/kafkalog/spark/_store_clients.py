"""Which file system a path of the Spark data source names: the local one, or an object store
or HDFS reached with the ``storage.*`` options (:func:`kafkalog.storage.store_fs.resolve`); one
client per store and options, per process."""
from __future__ import annotations

import json
from typing import Any, Dict, Mapping, Optional

from ..storage import fs as _fs
from ..storage import store_fs as _store_fs

STORAGE_PREFIX = "storage."
_INT_KEYS = ("block_size", "retries")
_FLOAT_KEYS = ("backoff", "connect_timeout", "request_timeout")
_BOOL_KEYS = ("anonymous", "allow_bucket_creation", "allow_bucket_deletion")


def is_remote(path: str) -> bool:
    """Whether a path given to the source names a store other than the local file system."""
    return _fs.is_uri(path) and path.split("://", 1)[0].lower() != "file"


def storage_options(opts: Mapping[str, Any]) -> Dict[str, Any]:
    """The ``storage.*`` Spark options as ``storage_options`` (strings typed as the store's
    file system expects them)."""
    out: Dict[str, Any] = {}
    for k, v in opts.items():
        k = str(k).lower()
        if not k.startswith(STORAGE_PREFIX):
            continue
        name = k[len(STORAGE_PREFIX):]
        if isinstance(v, str):
            s = v.strip()
            if name in _INT_KEYS:
                v = int(s)
            elif name in _FLOAT_KEYS:
                v = float(s)
            elif name in _BOOL_KEYS:
                if s.lower() not in ("true", "false"):
                    raise ValueError(f"option {k!r} must be true or false, not {v!r}")
                v = s.lower() == "true"
        out[name] = v
    return out


_STORES: Dict[Any, Any] = {}  # one file system per store and options, per process


def store_of(path: str, storage_options: Optional[Mapping[str, Any]] = None) -> "_fs.FileSystem":
    """The file system holding ``path``: the local one for a path or ``file://`` URI, else an
    object store / HDFS client configured by ``storage_options`` (kept per process: its
    listing answers serve later opens, and a task does not build a client per file)."""
    if not is_remote(path):
        return _fs.LOCAL
    scheme, _, rest = path.partition("://")
    key = (scheme.lower(), rest.split("/", 1)[0],
           json.dumps(dict(storage_options or {}), sort_keys=True, default=str))
    fs = _STORES.get(key)
    if fs is None:
        fs = _STORES[key] = _store_fs.resolve(path, dict(storage_options or {}))[0]
    return fs
