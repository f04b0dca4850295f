"""``kafkalog dump --format FMT``: one line (or any text) per record from a format string with
kcat's ``-f`` tokens, for pipes.

=========  =====================================================================================
``%t``     topic (from the partition directory's name; empty when the file is not in one)
``%p``     partition (-1 when the file is not in a ``<topic>-<partition>`` directory)
``%o``     offset
``%k``     key (its bytes; nothing for a null key)
``%s``     value (its bytes; nothing for a null value)
``%K``     key length in bytes, -1 for a null key
``%S``     value length in bytes, -1 for a null value
``%R``     value length (-1 for null) as a 4-byte big-endian signed integer
``%T``     timestamp (ms since the epoch; -1 for a v0 message)
``%h``     headers as ``name=value`` pairs separated by ``,`` (a null value: ``name=``)
``%%``     a ``%``
``\\n``    newline; ``\\r``, ``\\t``, ``\\\\`` and ``\\xXX`` (a byte in hex) likewise
=========  =====================================================================================

Anything else after a ``%`` or ``\\`` is a usage error, reported when the command line is read.
"""
from __future__ import annotations

import struct
from typing import Any, Callable, List, Optional, Sequence, Tuple, Union

__all__ = ["TOKENS", "parse_record_format", "RecordFormat"]

#: the ``%`` tokens and what they print (for --help and the docs)
TOKENS = {
    "t": "topic", "p": "partition", "o": "offset", "k": "key", "s": "value",
    "K": "key length (-1: null)", "S": "value length (-1: null)",
    "R": "value length as a 4-byte big-endian int", "T": "timestamp (ms)",
    "h": "headers (name=value,...)",
}
_ESCAPES = {"n": b"\n", "r": b"\r", "t": b"\t", "\\": b"\\"}
_INT32 = struct.Struct(">i")

Piece = Union[bytes, str]  # literal bytes, or a token letter


def parse_record_format(text: str) -> List[Piece]:
    """``text`` as literal byte strings and token letters; raises ValueError naming what is
    wrong (an unknown token, a lone ``%`` or ``\\`` at the end, a bad ``\\x``)."""
    out: List[Piece] = []
    lit = bytearray()
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == "%":
            if i + 1 >= n:
                raise ValueError("the format ends with a lone '%' (write %% for a '%')")
            tok = text[i + 1]
            i += 2
            if tok == "%":
                lit += b"%"
                continue
            if tok not in TOKENS:
                raise ValueError(f"unknown format token %{tok} (known: "
                                 f"{', '.join('%' + t for t in TOKENS)}, %%)")
            if lit:
                out.append(bytes(lit))
                lit.clear()
            out.append(tok)
            continue
        if ch == "\\":
            if i + 1 >= n:
                raise ValueError("the format ends with a lone '\\'")
            esc = text[i + 1]
            if esc in _ESCAPES:
                lit += _ESCAPES[esc]
                i += 2
                continue
            if esc == "x":
                digits = text[i + 2:i + 4]
                try:
                    if len(digits) != 2:
                        raise ValueError
                    lit.append(int(digits, 16))
                except ValueError:
                    raise ValueError(f"\\x takes two hex digits, not {digits!r}") from None
                i += 4
                continue
            raise ValueError(f"unknown escape \\{esc} in the format (known: \\n \\r \\t \\\\ "
                             "\\xXX)")
        lit += ch.encode("utf-8", "surrogateescape")
        i += 1
    if lit:
        out.append(bytes(lit))
    return out


def _headers(hd: Sequence[Tuple[str, Optional[bytes]]]) -> bytes:
    return b",".join(k.encode("utf-8", "surrogateescape") + b"=" + (v or b"") for k, v in hd)


class RecordFormat:
    """A parsed format string, rendering the records of one partition at a time
    (:meth:`for_partition`).  ``parse``: how keys and values are written when a decoder is
    chosen (a function ``record -> (key text, value text)``, None for a null); None: their
    bytes as they are."""

    def __init__(self, text: str,
                 parse: Optional[Callable[[Any], Tuple[Optional[str], Optional[str]]]] = None
                 ) -> None:
        self.text = text
        self.pieces = parse_record_format(text)
        self.parse = parse

    def for_partition(self, topic: Optional[str], partition: Optional[int]
                      ) -> Callable[[Any], bytes]:
        """A function ``record -> bytes`` for the records of one partition."""
        t = (topic or "").encode("utf-8", "surrogateescape")
        p = b"%d" % (-1 if partition is None else partition)
        parse = self.parse
        getters: List[Callable[[Any], bytes]] = []
        for piece in self.pieces:
            if isinstance(piece, bytes):
                getters.append(lambda r, b=piece: b)
            elif piece == "t":
                getters.append(lambda r: t)
            elif piece == "p":
                getters.append(lambda r: p)
            elif piece == "o":
                getters.append(lambda r: b"%d" % r.offset)
            elif piece == "T":
                getters.append(lambda r: b"%d" % r.timestamp)
            elif piece in ("k", "s"):
                if parse is None:
                    getters.append((lambda r: r.key or b"") if piece == "k"
                                   else (lambda r: r.value or b""))
                else:
                    i = 0 if piece == "k" else 1
                    getters.append(lambda r, i=i: _text(parse(r)[i]))
            elif piece == "K":
                getters.append(lambda r: b"-1" if r.key is None else b"%d" % len(r.key))
            elif piece == "S":
                getters.append(lambda r: b"-1" if r.value is None else b"%d" % len(r.value))
            elif piece == "R":
                getters.append(lambda r: _INT32.pack(-1 if r.value is None else len(r.value)))
            else:  # "h"
                getters.append(lambda r: _headers(getattr(r, "headers", None) or ()))
        if len(getters) == 1:
            return getters[0]
        return lambda r: b"".join([g(r) for g in getters])


def _text(s: Optional[str]) -> bytes:
    return b"" if s is None else s.encode("utf-8", "surrogateescape")
