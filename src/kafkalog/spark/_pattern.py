"""``subscribePattern``: the connector's ``java.util.regex.Pattern`` as a Python pattern."""
from __future__ import annotations

import re
from typing import List

from ._errors import OptionError

_JAVA_POSIX = {
    "Lower": "a-z",
    "Upper": "A-Z",
    "ASCII": "\\x00-\\x7f",
    "Alpha": "a-zA-Z",
    "Digit": "0-9",
    "Alnum": "a-zA-Z0-9",
    "Punct": re.escape("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"),
    "Graph": "\\x21-\\x7e",
    "Print": "\\x20-\\x7e",
    "Blank": " \\t",
    "Cntrl": "\\x00-\\x1f\\x7f",
    "XDigit": "0-9a-fA-F",
    "Space": " \\t\\n\\x0b\\f\\r",
    "javaLowerCase": "a-z",
    "javaUpperCase": "A-Z",
    "L": "a-zA-Z",
    "IsAlphabetic": "a-zA-Z",
    "IsDigit": "0-9",
    "N": "0-9",
    "Nd": "0-9",
}


def java_regex(pattern: str) -> str:
    """``subscribePattern`` is a ``java.util.regex.Pattern`` in the connector: translate the
    Java-only syntax that Python's ``re`` lacks or reads differently (``\\Q...\\E``,
    ``(?<name>...)``, ``\\z``, the POSIX ``\\p{...}`` classes, ``\\h``, ``\\v``), and refuse
    clearly what has no exact translation (class intersection ``&&``, ``\\G``, ``\\R``,
    ``\\X``, other ``\\p{...}``).  Returns the Python pattern (compiled once here)."""

    def fail(what: str) -> OptionError:
        return OptionError(
            f"option 'subscribePattern': {what} in {pattern!r} is Java regex syntax kafkalog "
            "cannot reproduce exactly; rewrite the pattern without it"
        )

    out: List[str] = []
    i, n = 0, len(pattern)
    in_class = 0
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            d = pattern[i + 1]
            if d == "Q":
                j = pattern.find("\\E", i + 2)
                lit = pattern[i + 2 :] if j < 0 else pattern[i + 2 : j]
                out.append(re.escape(lit))
                i = n if j < 0 else j + 2
                continue
            if d in "pP" and i + 2 < n:
                if pattern[i + 2] == "{":
                    j = pattern.find("}", i + 3)
                    name = pattern[i + 3 : j] if j > 0 else ""
                    k = name[2:] if name.startswith("Is") and name[2:] in _JAVA_POSIX else name
                    if j < 0 or k not in _JAVA_POSIX:
                        raise fail(f"the class \\{d}{{{name}}}")
                    cls = _JAVA_POSIX[k]
                    end = j + 1
                else:
                    raise fail(f"\\{d}{pattern[i + 2]}")
                neg = d == "P"
                if in_class:
                    if neg:
                        raise fail(f"a negated class \\P{{{name}}} inside [...]")
                    out.append(cls)
                else:
                    out.append(("[^" if neg else "[") + cls + "]")
                i = end
                continue
            if d == "z":
                out.append("\\Z")
            elif d == "Z":
                out.append("(?=\\n?\\Z)")
            elif d == "h":
                out.append(
                    ("" if in_class else "[")
                    + " \\t\\xa0\\u1680\\u180e\\u2000-\\u200a\\u202f\\u205f\\u3000"
                    + ("" if in_class else "]")
                )
            elif d == "v":
                out.append(
                    ("" if in_class else "[") + "\\n\\x0b\\f\\r\\x85\\u2028\\u2029"
                    + ("" if in_class else "]")
                )
            elif d in "GRXHVkec":
                raise fail(f"\\{d}")
            else:
                out.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class and pattern.startswith("&&", i):
            raise fail("a class intersection '&&'")
        if c == "[":
            if in_class:
                raise fail("a nested class '[...[...]]'")
            in_class = 1
            out.append(c)
            i += 1
            # a ']' right after '[' or '[^' is kept literal (topic names cannot hold one)
            if pattern.startswith("^", i):
                out.append("^")
                i += 1
            if pattern.startswith("]", i):
                out.append("\\]")
                i += 1
            continue
        if c == "]" and in_class:
            in_class = 0
        elif c == "(" and pattern.startswith("(?<", i) and not pattern.startswith(
            ("(?<=", "(?<!"), i
        ):
            out.append("(?P<")
            i += 3
            continue
        out.append(c)
        i += 1
    py = "".join(out)
    try:
        re.compile(py)
    except re.error as e:
        raise OptionError(
            f"option 'subscribePattern': invalid regular expression {pattern!r}: {e}"
        ) from None
    return py
