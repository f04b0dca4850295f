"""Damage anywhere in a partition directory: every reader says the same thing, and none is ever
silently short.

The rule (docs/architecture.md, "A read"): a read returns every record the files hold below the
log end, or reports exactly what it could not read -- ``CorruptRecordError`` naming file,
position and offset, or, with ``on_damage="skip"``, a ``DamageGap`` naming the bytes and offsets
skipped.  A read-only view ends the log quietly only at a torn tail: bytes after the last whole
batch of the LAST segment that do not form a whole valid batch, judged by what follows them
(a whole valid batch after them makes them damage), never by the damaged bytes' own
size/offset claims.  A bad CRC, magic, size or offset in a middle segment, or before whole
batches of the last segment, is damage, also in a directory without ``.kafka_cleanshutdown``
and checkpoints (a copied or backed-up partition).

Property test, seeded (the same cases on every run): each case writes a partition directory
with kafkalog's own writer (``Log.open`` + ``append_as_follower`` of batches built with
``MemoryRecordsBuilder``: v2 with every codec, legacy v0/v1, a v0 -> v1 -> v2 upgrade,
transactions with COMMIT/ABORT markers; small segments, so several), closes it cleanly, then
in about half the cases deletes ``.kafka_cleanshutdown`` and the root checkpoints (a copied
partition).  It damages one ``.log`` (a bit flip anywhere -- the base offset and the partition
leader epoch included, which a v2 CRC does not cover --, a truncation, a zeroed range, a bad
size, a bad offset, a bad magic, garbage or zeros appended) and reads the directory through
every entry point:

* ``Log.open(dir, read_only=True).iter_records()``, and with ``on_damage="skip", gaps=[]``;
* ``storage.log.open_view(dir).iter_batches()`` (records of the data batches), and skipping;
* ``arrow.to_arrow(dir)``, ``arrow.iter_batches(dir)``, ``arrow.to_arrow(<opened Log>)``;
* the CLI (``kafkalog stats --json``, ``verify --json``, ``dump --json --deep-iteration``),
  through its ``main`` function.

What is expected is computed from what was written and what was damaged, with no kafkalog
reader: the file layout comes from walking the pristine ``.log`` files with ``struct``, the
record offsets from the appends; a batch is *untouched* when none of its bytes changed and it
is still in its file.  Assertions, per case:

(a) the reads that raise on damage return the same offsets (each strictly increasing) or
    raise a ``KafkaLogError`` -- nothing else;
(b) none returns without an error while leaving out a record of an untouched batch (a torn
    tail only ever holds touched or cut batches, so it is the one place a read may end
    quietly);
(c) the skipping reads never raise on damage, return every untouched batch's records that
    lie in other segments or at or after the first offset-index entry (of the pristine
    ``.index``) past the damaged bytes, and a ``DamageGap`` covers each untouched record
    they leave out;
(d) no read returns an offset that was never written (a batch whose base offset was damaged
    is damage, not records at other offsets);
(e) the CLI: ``stats`` and ``dump`` exit 0 only with every untouched record counted/printed
    or the loss reported (dump: an invalid batch, trailing bytes, non-consecutive offsets),
    and ``verify`` exits non-zero whenever a read raised or a skipping read reported a gap.

``KAFKALOG_DAMAGE_CASES`` changes the number of cases (default 63: every layout with every
kind of damage), ``KAFKALOG_DAMAGE_SEED`` the seed.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import struct
import sys
import warnings
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

import pytest

pa = pytest.importorskip("pyarrow")

import kafkalog.arrow as ka  # noqa: E402
from kafkalog import MemoryRecordsBuilder  # noqa: E402
from kafkalog.control import build_end_txn_marker  # noqa: E402
from kafkalog.errors import KafkaLogError  # noqa: E402
from kafkalog.storage.log import Log, open_view  # noqa: E402
from kafkalog.storage.log_view import DamageGap  # noqa: E402
from kafkalog.tools import cli  # noqa: E402

N_CASES = int(os.environ.get("KAFKALOG_DAMAGE_CASES", "63"))
SEED = int(os.environ.get("KAFKALOG_DAMAGE_SEED", "20240611"))
TS = 1_700_000_000_000
PID = 4242

LAYOUTS = ("none", "gzip", "lz4", "zstd", "snappy", "v0", "v1", "txn", "upgrade")
DAMAGES = ("bitflip", "truncate", "zero", "size", "offset", "magic", "append")


# ------------------------------------------------------------------------------------------------
# writing
# ------------------------------------------------------------------------------------------------
def _value(rng: random.Random, offset: int) -> bytes:
    head = b"r%d|" % offset
    n = rng.randrange(8, 90)
    if rng.random() < 0.5:  # incompressible, so compressed batches keep their size
        return head + bytes(rng.randrange(256) for _ in range(n))
    return head + b"." * n


def _legacy(rng, magic, codec, base, n):
    b = MemoryRecordsBuilder(magic=magic, compression_type=codec, base_offset=base)
    for j in range(n):
        b.append(TS + base + j, None if (base + j) % 5 == 0 else b"k%d" % (base + j),
                 _value(rng, base + j))
    return b.build()


def _v2(rng, codec, base, n, *, txn_seq=None):
    if txn_seq is None:
        b = MemoryRecordsBuilder(2, codec, base, "create_time", partition_leader_epoch=0)
    else:
        b = MemoryRecordsBuilder(2, codec, base, "create_time", PID, 0, txn_seq,
                                 is_transactional=True, partition_leader_epoch=0)
    for j in range(n):
        b.append(TS + base + j, None if (base + j) % 5 == 0 else b"k%d" % (base + j),
                 _value(rng, base + j), headers=[("h", b"%d" % j)] if j % 3 == 0 else None)
    return b.build()


def _write(d: str, layout: str, rng: random.Random) -> dict:
    cfg = {
        "segment.bytes": rng.choice((1100, 1600, 2400)),
        "index.interval.bytes": rng.choice((1, 150, 300, 600)),
        "max.message.bytes": 1 << 20,
    }
    nbatches = rng.randrange(14, 28)
    seq = 0
    in_txn = 0
    with Log.open(d, cfg) as log:
        for i in range(nbatches):
            base = log.log_end_offset
            n = rng.randrange(1, 6)
            if layout in ("v0", "v1"):
                magic = 0 if layout == "v0" else 1
                codec = rng.choice(("none", "gzip", "snappy", "lz4") if magic else ("none", "gzip"))
                data = _legacy(rng, magic, codec, base, n)
            elif layout == "upgrade":
                third = nbatches // 3
                if i < third:
                    data = _legacy(rng, 0, rng.choice(("none", "gzip")), base, n)
                elif i < 2 * third:
                    data = _legacy(rng, 1, rng.choice(("none", "snappy", "lz4")), base, n)
                else:
                    data = _v2(rng, rng.choice(("none", "zstd", "gzip")), base, n)
            elif layout == "txn":
                if in_txn and (in_txn >= 3 or rng.random() < 0.4):
                    data = build_end_txn_marker(rng.random() < 0.6, PID, 0, 0, base_offset=base,
                                                timestamp=TS + base, partition_leader_epoch=0)
                    in_txn = 0
                else:
                    data = _v2(rng, rng.choice(("none", "zstd")), base, n, txn_seq=seq)
                    seq += n
                    in_txn += 1
            else:
                data = _v2(rng, layout, base, n)
            _append(log, data)
        if layout == "txn" and in_txn:
            base = log.log_end_offset
            _append(log, build_end_txn_marker(True, PID, 0, 0, base_offset=base,
                                              timestamp=TS + base, partition_leader_epoch=0))
        leo = log.log_end_offset
    return {"cfg": cfg, "leo": leo}


def _append(log, data: bytes) -> None:
    # one log entry per append (legacy uncompressed message sets hold several), so segments
    # roll between entries as a broker's do
    pos = 0
    while pos + 12 <= len(data):
        size = struct.unpack_from(">i", data, pos + 8)[0] + 12
        log.append_as_follower(data[pos:pos + size])
        pos += size


# ------------------------------------------------------------------------------------------------
# the pristine layout, walked with struct (no kafkalog reader)
# ------------------------------------------------------------------------------------------------
@dataclass
class Entry:
    file: str
    pos: int
    size: int
    magic: int
    first: int  # first offset of the entry (inner offsets of a legacy wrapper included)
    last: int
    control: bool

    @property
    def end(self) -> int:
        return self.pos + self.size

    def offsets(self):
        return range(self.first, self.last + 1)


@dataclass
class Seg:
    path: str
    base: int
    size: int
    entries: List[Entry] = field(default_factory=list)
    index_positions: List[int] = field(default_factory=list)


def _layout(d: str) -> List[Seg]:
    segs = []
    prev_last = -1
    for name in sorted(n for n in os.listdir(d) if n.endswith(".log")):
        path = os.path.join(d, name)
        data = open(path, "rb").read()
        seg = Seg(path, int(name[:-4]), len(data))
        pos = 0
        while pos < len(data):
            off, size = struct.unpack_from(">qi", data, pos)
            magic = data[pos + 16]
            if magic == 2:
                last = off + struct.unpack_from(">i", data, pos + 23)[0]
                attrs = struct.unpack_from(">h", data, pos + 21)[0]
                e = Entry(path, pos, size + 12, 2, off, last, bool(attrs & 0x20))
            else:  # a legacy entry's offset is its last (inner) offset
                e = Entry(path, pos, size + 12, magic, prev_last + 1, off, False)
            assert e.first == prev_last + 1, (path, pos, e, prev_last)
            prev_last = e.last
            seg.entries.append(e)
            pos += size + 12
        assert pos == len(data)
        ipath = path[:-4] + ".index"
        if os.path.exists(ipath):
            raw = open(ipath, "rb").read()
            for k in range(0, len(raw) - 7, 8):
                rel, p = struct.unpack_from(">ii", raw, k)
                if k and rel == 0 and p == 0:
                    break
                seg.index_positions.append(p)
        segs.append(seg)
    return segs


# ------------------------------------------------------------------------------------------------
# damage
# ------------------------------------------------------------------------------------------------
@dataclass
class Damage:
    kind: str
    path: str
    start: int  # the changed byte range [start, end) of the file (truncation: to its old end)
    end: int
    what: str


def _damage(segs: List[Seg], kind: str, rng: random.Random) -> Damage:
    # the last segment or another one, about as often
    k = len(segs) - 1 if (len(segs) == 1 or rng.random() < 0.45) else rng.randrange(len(segs) - 1)
    seg = segs[k]
    where = "last segment" if k == len(segs) - 1 else f"segment {k + 1} of {len(segs)}"
    data = bytearray(open(seg.path, "rb").read())
    i = rng.randrange(len(seg.entries))
    e = seg.entries[i]
    ent = f"entry {i + 1}/{len(seg.entries)} (pos {e.pos}, size {e.size}, magic {e.magic}, " \
          f"offsets {e.first}-{e.last}{', control' if e.control else ''}) of the {where}"

    def write(pos, new: bytes, what: str) -> Damage:
        old = bytes(data[pos:pos + len(new)])
        data[pos:pos + len(new)] = new
        open(seg.path, "wb").write(bytes(data))
        return Damage(kind, seg.path, pos, pos + len(new),
                      f"{what} at file pos {pos}: {old.hex()} -> {new.hex()} in {ent}")

    if kind == "bitflip":
        region = rng.choice(("base offset", "size", "leader epoch/crc", "magic", "header",
                             "body", "anywhere"))
        if region == "anywhere":
            p = rng.randrange(len(data))
            for j, x in enumerate(seg.entries):  # name the entry it lands in
                if x.pos <= p < x.end:
                    i, e = j, x
            ent = f"entry {i + 1}/{len(seg.entries)} (pos {e.pos}, size {e.size}, magic " \
                  f"{e.magic}, offsets {e.first}-{e.last}) of the {where}"
        else:
            lo, hi = {"base offset": (0, 8), "size": (8, 12), "leader epoch/crc": (12, 16),
                      "magic": (16, 17), "header": (17, min(61, e.size)),
                      "body": (min(61, e.size - 1), e.size)}[region]
            if e.magic < 2 and region == "leader epoch/crc":
                region = "crc"
            p = e.pos + rng.randrange(lo, hi)
        bit = rng.randrange(8)
        return write(p, bytes([data[p] ^ (1 << bit)]), f"flip of bit {bit} ({region})")
    if kind == "truncate":
        if rng.random() < 0.25:
            cut = e.pos  # at an entry boundary: whole entries gone, nothing torn
        else:
            cut = e.pos + rng.randrange(1, e.size)
        old = len(data)
        os.truncate(seg.path, cut)
        return Damage(kind, seg.path, cut, old,
                      f"truncation to {cut} bytes (of {old}) inside/at {ent}")
    if kind == "zero":
        for _ in range(50):  # a range that is not all zeros already (else nothing changes)
            p = e.pos + rng.randrange(e.size)
            n = rng.choice((1, 4, 12, 40, 200, len(data) - p))
            n = max(1, min(n, len(data) - p))
            if any(data[p:p + n]):
                break
        return write(p, bytes(n), f"{n} zero bytes")
    if kind == "size":
        cur = e.size - 12
        later = [x.end - e.pos - 12 for x in seg.entries[i + 1:]]
        choices = [0, -1, 5, 13, cur - 1, cur + 1, cur + rng.randrange(2, 300),
                   2**31 - 1, rng.randrange(-2**31, 2**31)]
        if later:
            choices.append(rng.choice(later))  # lands exactly on a later entry's end
        new = rng.choice(choices)
        return write(e.pos + 8, struct.pack(">i", new), f"size field {cur} -> {new}")
    if kind == "offset":
        nxt = segs[k + 1].base if k + 1 < len(segs) else e.last + 50
        cur = struct.unpack_from(">q", data, e.pos)[0]
        new = rng.choice([0, cur - 1, cur + 1, cur - 3, -5, nxt + 10, 2**40, seg.base - 1,
                          cur + 2**31])
        if new == cur:
            new = cur + 7
        return write(e.pos, struct.pack(">q", new), f"offset field {cur} -> {new}")
    if kind == "magic":
        new = rng.choice([3, 7, 0xFF] + [m for m in (0, 1, 2) if m != e.magic])
        return write(e.pos + 16, bytes([new]), f"magic {e.magic} -> {new}")
    if kind == "append":
        n = rng.randrange(1, 300)
        junk = bytes(n) if rng.random() < 0.5 else bytes(rng.randrange(256) for _ in range(n))
        old = len(data)
        with open(seg.path, "ab") as f:
            f.write(junk)
        return Damage(kind, seg.path, old, old + n,
                      f"{n} {'zero' if not any(junk) else 'random'} bytes appended after the "
                      f"last entry of the {where} ({old} bytes)")
    raise AssertionError(kind)


def _touched(e: Entry, dmg: Damage) -> bool:
    return e.file == dmg.path and e.pos < dmg.end and dmg.start < e.end


def _undetectable_offsets(segs: List[Seg], dmg: Damage) -> set:
    """The offsets an entry whose offset field was changed now claims, where nothing can tell
    them from offsets written so: after the previous entry's, before the next one's, inside
    its segment's range (Kafka logs may have gaps, as compaction leaves).  A v2 CRC does not
    cover the base offset, so such a change reads as records at those offsets, rightly."""
    entries = [e for s in segs for e in s.entries]
    for k, e in enumerate(entries):
        if not _touched(e, dmg):
            continue
        if dmg.kind == "truncate" or dmg.start < e.pos or dmg.end > e.pos + 8:
            return set()  # more than the offset field changed
        with open(e.file, "rb") as f:
            f.seek(e.pos)
            head = f.read(8)
        x = struct.unpack_from(">q", head, 0)[0]
        n = e.last - e.first
        first, last = (x, x + n) if e.magic == 2 else (x - n, x)
        base = next(s.base for s in segs if s.path == e.file)
        prev_last = entries[k - 1].last if k else -1
        nxt = entries[k + 1].first if k + 1 < len(entries) else None
        if first > prev_last and (nxt is None or last < nxt) and first >= base \
                and last - base <= 2**31 - 1:
            return set(range(first, last + 1))
        return set()
    return set()


# ------------------------------------------------------------------------------------------------
# reading through every entry point
# ------------------------------------------------------------------------------------------------
@dataclass
class Got:
    offsets: Optional[List[int]] = None
    error: Optional[BaseException] = None
    gaps: Optional[List[DamageGap]] = None
    warned: List[str] = field(default_factory=list)

    def show(self) -> str:
        if self.error is not None:
            return f"raised {type(self.error).__name__}: {self.error}"
        s = f"{len(self.offsets)} offsets {_ranges(self.offsets)}"
        if self.gaps:
            s += " gaps " + "; ".join(
                f"[{g.offset},{g.next_offset}) at {os.path.basename(g.path)}:{g.position} "
                f"({g.reason})" for g in self.gaps)
        return s


def _ranges(offs, limit=8) -> str:
    offs = sorted(set(offs))
    out = []
    for o in offs:
        if out and o == out[-1][1] + 1:
            out[-1][1] = o
        else:
            out.append([o, o])
    parts = [f"{a}" if a == b else f"{a}-{b}" for a, b in out]
    if len(parts) > limit:
        parts = parts[:limit] + [f"... ({len(parts) - limit} more)"]
    return "[" + ", ".join(parts) + "]"


@contextlib.contextmanager
def _memory_cap(headroom: int = 4 << 30):
    """While a damaged log is read, cap this process's address space at what it uses now plus
    ``headroom``: a reader that believes a damaged size or offset and allocates for it then
    fails with MemoryError (a failure of this test) instead of taking the machine down."""
    try:
        import resource
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        with open("/proc/self/status") as f:
            vm = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))
    except (ImportError, AttributeError, OSError, StopIteration, ValueError):
        yield
        return
    cap = vm + headroom
    if hard != resource.RLIM_INFINITY:
        cap = min(cap, hard)
    if soft != resource.RLIM_INFINITY and soft <= cap:
        yield
        return
    resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def _call(fn) -> Got:
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        try:
            with _memory_cap():
                got = fn()
        except BaseException as e:  # noqa: BLE001 - what it raised is the answer
            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                raise
            got = Got(error=e)
    got.warned = [str(x.message) for x in w]
    return got


def _log_records(d, skip=False) -> Got:
    gaps: list = []
    with Log.open(d, read_only=True) as log:
        if skip:
            offs = [r.offset for r in log.iter_records(on_damage="skip", gaps=gaps)]
        else:
            offs = [r.offset for r in log.iter_records()]
    return Got(offs, gaps=gaps if skip else None)


def _view_batches(d, skip=False) -> Got:
    gaps: list = []
    offs = []
    with open_view(d) as v:
        it = v.iter_batches(on_damage="skip", gaps=gaps) if skip else v.iter_batches()
        for b in it:
            if not b.is_control_batch:
                offs.extend(r.offset for r in b)
    return Got(offs, gaps=gaps if skip else None)


def _arrow_dir(d) -> Got:
    return Got(ka.to_arrow(d, columns=["offset"]).column("offset").to_pylist())


def _arrow_iter(d) -> Got:
    offs = []
    for rb in ka.iter_batches(d, columns=["offset"], max_rows=7):
        offs.extend(rb.column("offset").to_pylist())
    return Got(offs)


def _arrow_log(d) -> Got:
    with Log.open(d, read_only=True) as log:
        return Got(ka.to_arrow(log, columns=["offset"]).column("offset").to_pylist())


READS = {
    "Log.iter_records": _log_records,
    "open_view.iter_batches": _view_batches,
    "to_arrow(dir)": _arrow_dir,
    "arrow.iter_batches(dir)": _arrow_iter,
    "to_arrow(Log)": _arrow_log,
}
SKIPS = {
    "Log.iter_records(skip)": lambda d: _log_records(d, True),
    "open_view.iter_batches(skip)": lambda d: _view_batches(d, True),
}


def _cli(*argv) -> Tuple[int, str, str]:
    out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8")
    err = io.StringIO()
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = out, err
    try:
        with _memory_cap():
            rc = cli.main(list(argv))
    except MemoryError as e:
        rc = -1
        err.write(f"MemoryError: {e}")
    finally:
        sys.stdout, sys.stderr = saved
    out.flush()
    return rc, out.buffer.getvalue().decode("utf-8", "replace"), err.getvalue()


def _json_lines(text: str) -> List[dict]:
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
    return out


# ------------------------------------------------------------------------------------------------
# the property
# ------------------------------------------------------------------------------------------------
def _case(root: str, case: int):
    rng = random.Random(SEED * 1000 + case)
    layout = LAYOUTS[case % len(LAYOUTS)]
    kind = DAMAGES[case % len(DAMAGES)]
    d = os.path.join(root, "t-0")
    facts = _write(d, layout, rng)
    segs = _layout(d)
    copied = rng.random() < 0.5
    if copied:  # a copied partition: no clean-shutdown marker, no root checkpoints
        for name in (os.path.join(d, ".kafka_cleanshutdown"),
                     os.path.join(root, "recovery-point-offset-checkpoint"),
                     os.path.join(root, "replication-offset-checkpoint"),
                     os.path.join(root, "log-start-offset-checkpoint")):
            if os.path.exists(name):
                os.unlink(name)
    dmg = _damage(segs, kind, rng)
    return d, layout, segs, dmg, copied, facts


@pytest.mark.parametrize("case", range(N_CASES))
def test_damage_everywhere(tmp_path, case):
    root = str(tmp_path / "root")
    d, layout, segs, dmg, copied, facts = _case(root, case)
    entries = [e for s in segs for e in s.entries]
    written = {o for e in entries if not e.control for o in e.offsets()}
    untouched = [e for e in entries if not _touched(e, dmg)]
    must = sorted(o for e in untouched if not e.control for o in e.offsets())  # (b)
    must_all = sum(e.last - e.first + 1 for e in untouched)  # records incl. markers, for stats
    dseg = next(s for s in segs if s.path == dmg.path)
    later_index = [p for p in dseg.index_positions if p >= dmg.end]
    resume = min(later_index) if later_index else None
    must_skip = sorted(  # (c)
        o for e in untouched if not e.control
        and (e.file != dmg.path or (resume is not None and e.pos >= resume))
        for o in e.offsets())

    state = ("copied (no .kafka_cleanshutdown, no root checkpoints)" if copied
             else "cleanly closed")
    header = (
        f"case {case}: layout {layout}, {state}, {len(segs)} segment(s) "
        f"{[(s.base, s.size) for s in segs]}, log end {facts['leo']}, "
        f"cfg {facts['cfg']}\n  damage: {dmg.kind}: {dmg.what} in "
        f"{os.path.basename(dmg.path)}\n  untouched data records: {_ranges(must)}"
    )
    fails: List[str] = []

    got: Dict[str, Got] = {name: _call(lambda f=f: f(d)) for name, f in READS.items()}
    skipped: Dict[str, Got] = {name: _call(lambda f=f: f(d)) for name, f in SKIPS.items()}

    # (a) the same offsets, or a kafkalog error
    answers = {}
    for name, g in {**got, **skipped}.items():
        if g.error is not None:
            if not isinstance(g.error, KafkaLogError):
                fails.append(f"(a) {name} raised {type(g.error).__name__} (not a KafkaLogError):"
                             f" {g.error!r}")
            continue
        if g.offsets != sorted(set(g.offsets)):
            dups = sorted({o for o in g.offsets if g.offsets.count(o) > 1})
            fails.append(f"(a) {name} returned offsets out of order or twice (repeated: "
                         f"{_ranges(dups)}; first ones {g.offsets[:12]})")
        if name in READS or not g.gaps:
            answers.setdefault(tuple(sorted(set(g.offsets))), []).append(name)
    if len(answers) > 1:
        fails.append("(a) the reads disagree: " + " | ".join(
            f"{', '.join(names)}: {len(offs)} offsets {_ranges(offs)}"
            for offs, names in answers.items()))

    # (b) never silently short
    for name, g in got.items():
        if g.offsets is None:
            continue
        missing = sorted(set(must) - set(g.offsets))
        if missing:
            fails.append(f"(b) {name} returned without an error and without "
                         f"{len(missing)} record(s) of untouched batches: {_ranges(missing)} "
                         f"(got {g.show()})")

    # (c) skipping reads: no error on damage, what lies past the next index entry or in other
    # segments, and a gap for whatever untouched is left out
    for name, g in skipped.items():
        if g.error is not None:
            if isinstance(g.error, KafkaLogError):
                fails.append(f"(c) {name} raised {type(g.error).__name__}: {g.error}")
            continue
        missing = sorted(set(must_skip) - set(g.offsets))
        if missing:
            fails.append(f"(c) {name} left out {len(missing)} record(s) of untouched batches "
                         f"in other segments or past the next index entry (pos {resume}): "
                         f"{_ranges(missing)} (got {g.show()})")
        uncovered = [o for o in sorted(set(must) - set(g.offsets))
                     if not any(x.offset <= o < x.next_offset for x in g.gaps)]
        if uncovered:
            fails.append(f"(c) {name} left out {_ranges(uncovered)} (untouched) with no "
                         f"DamageGap covering them (got {g.show()})")

    # (d) no invented offsets (but those a damaged offset field claims where nothing can tell)
    claimed = _undetectable_offsets(segs, dmg)
    for name, g in {**got, **skipped}.items():
        if g.offsets is None:
            continue
        phantom = sorted(set(g.offsets) - written - claimed)
        if phantom:
            fails.append(f"(d) {name} returned offsets never written: {_ranges(phantom)} "
                         f"(written: {_ranges(written)})")

    # (e) the CLI
    rc, out, err = _cli("stats", "--json", "--no-progress", d)
    parts = [o for o in _json_lines(out) if o.get("type") == "partition"]
    if rc == 0:
        recs = parts[0].get("records") if parts else None
        if recs is None or recs < must_all:
            fails.append(f"(e) kafkalog stats exited 0 counting {recs} records, fewer than the "
                         f"{must_all} of the untouched batches (stderr: {err.strip()[:300]})")
    elif rc != 1:
        fails.append(f"(e) kafkalog stats exited {rc}: {err.strip()[:300]}")

    raised = [n for n, g in got.items() if isinstance(g.error, KafkaLogError)]
    gapped = [n for n, g in skipped.items() if g.gaps]
    rc, out, err = _cli("verify", "--json", "--no-progress", d)
    if rc == 0 and (raised or gapped):
        fails.append(f"(e) kafkalog verify exited 0 (OK) although {raised + gapped} "
                     f"raised or reported a gap")
    elif rc not in (0, 1):
        fails.append(f"(e) kafkalog verify exited {rc}: {err.strip()[:300]}")

    rc, out, err = _cli("dump", "--json", "--deep-iteration", "--no-progress", d)
    objs = _json_lines(out)
    if rc == 0:
        control = set()
        printed = []
        reported = False
        for o in objs:
            t = o.get("type")
            if t == "batch" and (o.get("isValid") is False):
                reported = True
            elif t in ("trailing_bytes", "non_consecutive_offsets", "error"):
                reported = True
            elif t == "record":
                if "control" in o:
                    control.add(o["offset"])
                else:
                    printed.append(o["offset"])
        missing = sorted(set(must) - set(printed))
        if missing and not reported:
            fails.append(f"(e) kafkalog dump exited 0 without {len(missing)} record(s) of "
                         f"untouched batches and without reporting damage: {_ranges(missing)}")
    elif rc != 1:
        fails.append(f"(e) kafkalog dump exited {rc}: {err.strip()[:300]}")

    if fails:
        lines = [header]
        for name, g in {**got, **skipped}.items():
            lines.append(f"  {name}: {g.show()}")
        lines.append("  FAILED:")
        lines.extend("    " + f for f in fails)
        pytest.fail("\n".join(lines), pytrace=False)
