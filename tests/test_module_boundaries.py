"""The package's modules form a layered graph: no import circle (a function-level import that only
dodges a circle is still one), and no module reaches into another module's private names
(``from .x import _name`` or ``x._name``).  A private *module* (``_batch``, ``_format``, ...) is
meant for the package and may be imported; a private *name* inside a module belongs to its owner:
make it public there, or move the code that needs it to its owner."""
from __future__ import annotations

import ast
import os
import re

PKG_DIR = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "src", "kafkalog"))
PKG = "kafkalog"


def _modules() -> dict[str, str]:
    """Dotted module name -> source path, for every .py file in the package."""
    found = {}
    for dirpath, _dirs, names in os.walk(PKG_DIR):
        for n in sorted(names):
            if not n.endswith(".py"):
                continue
            rel = os.path.relpath(os.path.join(dirpath, n), PKG_DIR)[:-3].split(os.sep)
            if rel[-1] == "__init__":
                rel = rel[:-1]
            found[".".join([PKG] + rel)] = os.path.join(dirpath, n)
    return found


MODULES = _modules()
# a module only exists as compiled code (a .pyx twin) too: its name is a module all the same
COMPILED = {
    ".".join([PKG] + os.path.relpath(os.path.join(d, n), PKG_DIR).split(os.sep)[:-1]
             + [n.split(".", 1)[0]])
    for d, _s, ns in os.walk(PKG_DIR) for n in ns if n.endswith(".pyx")
}


def _is_package(mod: str) -> bool:
    return MODULES[mod].endswith("__init__.py")


def _base(mod: str, level: int, name: str | None) -> str:
    """Resolve a (possibly relative) ``from`` target as seen from module ``mod``."""
    if level == 0:
        return name or ""
    parts = mod.split(".")
    if not _is_package(mod):
        parts = parts[:-1]
    if level > 1:
        parts = parts[: len(parts) - (level - 1)]
    return ".".join(parts + ([name] if name else []))


def _is_module(name: str) -> bool:
    return name in MODULES or name in COMPILED


def _imports(mod: str):
    """(imported module, imported name or None, line) for every import in ``mod``, at any depth,
    plus (module, attribute, line) for ``alias._attr`` access through an imported module alias."""
    with open(MODULES[mod], encoding="utf-8") as f:
        tree = ast.parse(f.read(), MODULES[mod])
    aliases: dict[str, str] = {}  # local name -> module it is bound to
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] != PKG:
                    continue
                yield a.name, None, node.lineno
                if a.asname:
                    aliases[a.asname] = a.name
        elif isinstance(node, ast.ImportFrom):
            base = _base(mod, node.level, node.module)
            if base.split(".")[0] != PKG:
                continue
            for a in node.names:
                sub = f"{base}.{a.name}"
                if _is_module(sub):
                    yield sub, None, node.lineno
                    aliases[a.asname or a.name] = sub
                else:
                    yield base, a.name, node.lineno
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id in aliases):
            yield aliases[node.value.id], node.attr, node.lineno


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for mod in MODULES:
        for target, _name, _line in _imports(mod):
            # importing a.b.c runs a and a.b first; a package's own __init__ is not an edge to
            # itself
            parts = target.split(".")
            for i in range(2, len(parts) + 1):
                t = ".".join(parts[:i])
                if t in MODULES and t != mod and not mod.startswith(t + "."):
                    graph[mod].add(t)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each as a cycle."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(_one_cycle(graph, set(comp)))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _one_cycle(graph: dict[str, set[str]], comp: set[str]) -> list[str]:
    """A concrete cycle through the component, for the message."""
    start = min(comp)
    path = [start]
    seen = {start}
    v = start
    while True:
        nxt = sorted(w for w in graph[v] if w in comp)
        back = [w for w in nxt if w in seen]
        if back:
            return path[path.index(back[0]):] + [back[0]]
        v = nxt[0]
        path.append(v)
        seen.add(v)


def _private_reaches():
    for mod in sorted(MODULES):
        for target, name, line in _imports(mod):
            if name is None or not name.startswith("_") or name.startswith("__"):
                continue
            if _is_module(f"{target}.{name}"):
                continue  # a private module: meant for the package
            if target == mod:
                continue
            yield os.path.relpath(MODULES[mod], PKG_DIR).replace(os.sep, "/"), line, target, name


# What is still to be done, in modules other owners are changing (issue 27): each entry names
# who has to change what; the tests fail when an entry is no longer needed, so the lists only
# shrink.  Keep them empty in new code.
PENDING_CYCLES: dict = {}
PENDING_PRIVATE: dict = {}  # (importing file, owner module): why it is still here


def test_no_import_cycle():
    cycles = _cycles(_graph())
    new = [c for c in cycles if frozenset(c) not in PENDING_CYCLES]
    assert new == [], "import circles:\n" + "\n".join(" -> ".join(c) for c in new)
    gone = set(PENDING_CYCLES) - {frozenset(c) for c in cycles}
    assert gone == set(), f"PENDING_CYCLES entries no longer needed: {gone}"


def test_no_private_name_from_another_module():
    found = sorted(set(_private_reaches()))
    new = [f"{rel}:{line}: {owner}.{name}" for rel, line, owner, name in found
           if (rel, owner) not in PENDING_PRIVATE]
    assert new == [], ("private names used outside their module (make them public in their "
                       "owner, or move the code there):\n" + "\n".join(new))
    gone = set(PENDING_PRIVATE) - {(rel, owner) for rel, _line, owner, _name in found}
    assert gone == set(), f"PENDING_PRIVATE entries no longer needed: {sorted(gone)}"


# -- private attributes of another module's classes ------------------------------------------------
# A class's private attributes (``self._x`` it sets, ``_x`` methods and class attributes) belong to
# the modules that make up the class: ``obj._x`` on one of its objects anywhere else reaches into
# it.  The classes watched, with the modules that are their own code (a Log's parts are mixins in
# their own modules, each one Log's code; a Segment's store subclasses, and the FileRecords of a
# store, are in store_segment):
OWNED_CLASSES = {
    "Log": {
        "kafkalog.storage.log": {"Log"},
        "kafkalog.storage.loader": {"LogLoader"},
        "kafkalog.storage.local_log": {"LocalLog"},
        "kafkalog.storage.retention": {"LogRetention"},
    },
    "Segment": {
        "kafkalog.storage.segment": {"Segment"},
        "kafkalog.storage.store_segment": {"StoreSegment", "EmptySegment"},
    },
    "FileRecords": {
        "kafkalog.storage.file_records": {"FileRecords"},
        "kafkalog.storage.store_segment": {"StoreRecords"},
    },
}


def _class_private_names(mod: str, classes: set) -> set:
    """The private names the classes ``classes`` of ``mod`` define: methods, class attributes
    and the ``self._x`` their methods set."""
    with open(MODULES[mod], encoding="utf-8") as f:
        tree = ast.parse(f.read(), MODULES[mod])
    names = set()

    def private(n: str) -> bool:
        return n.startswith("_") and not n.startswith("__")

    for cls in tree.body:
        if not (isinstance(cls, ast.ClassDef) and cls.name in classes):
            continue
        for item in cls.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and private(item.name):
                names.add(item.name)
            elif isinstance(item, ast.Assign):
                names.update(t.id for t in item.targets
                             if isinstance(t, ast.Name) and private(t.id))
            elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name) \
                    and private(item.target.id):
                names.add(item.target.id)
        for node in ast.walk(cls):
            if (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
                    and isinstance(node.value, ast.Name) and node.value.id == "self"
                    and private(node.attr)):
                names.add(node.attr)
    return names


def _private_attribute_reaches():
    """(file, line, receiver, name, owner class) for every ``receiver._name`` outside the owner
    modules of a watched class whose private names include ``_name`` (``self``/``cls`` aside:
    a module's own objects)."""
    watched = {}  # name -> (owner class, its modules)
    for owner, parts in OWNED_CLASSES.items():
        for mod, classes in parts.items():
            for n in _class_private_names(mod, classes):
                watched.setdefault(n, []).append((owner, set(parts)))
    for mod in sorted(MODULES):
        with open(MODULES[mod], encoding="utf-8") as f:
            tree = ast.parse(f.read(), MODULES[mod])
        rel = os.path.relpath(MODULES[mod], PKG_DIR).replace(os.sep, "/")
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Attribute) and node.attr in watched):
                continue
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                continue
            for owner, owner_mods in watched[node.attr]:
                if mod not in owner_mods:
                    yield rel, node.lineno, ast.unparse(node.value), node.attr, owner


# (file, receiver, name): why it is still here.  Same convention as above: the test fails when an
# entry is no longer needed, so the list only shrinks.
PENDING_PRIVATE_ATTRS = {
    # The cleaner (Kafka's LogCleaner) cleans a Log under its lock and swaps segments in: it
    # still reads the Log's segments and calls its private helpers.  To do: hand it what it
    # needs (the LogSegments, the clock, a segment factory, the cleaner checkpoint and the I/O
    # error hook, as LogView is handed them) from Log.compact.
    ("storage/cleaner.py", "log", "_segments"): "the segments to clean",
    ("storage/cleaner.py", "log", "_clock"): "the time of a round",
    ("storage/cleaner.py", "log", "_lock"): "a round runs under the log's lock",
    ("storage/cleaner.py", "log", "_check_writable"): "a round needs a writable log",
    ("storage/cleaner.py", "log", "_set_cleaner_checkpoint"): "the round's end",
    ("storage/cleaner.py", "log", "_io_error"): "an I/O error takes the log offline",
    ("storage/cleaner.py", "log", "_open_segment"): "the .cleaned segment",
}


def test_no_private_attribute_of_log_or_segment_from_another_module():
    found = sorted(set(_private_attribute_reaches()))
    new = [f"{rel}:{line}: {recv}.{name} ({owner})" for rel, line, recv, name, owner in found
           if (rel, recv, name) not in PENDING_PRIVATE_ATTRS]
    assert new == [], ("private attributes of a class used outside its modules (give the "
                       "class a public method, or hand the code the object it needs):\n"
                       + "\n".join(new))
    gone = set(PENDING_PRIVATE_ATTRS) - {(rel, recv, name) for rel, _l, recv, name, _o in found}
    assert gone == set(), f"PENDING_PRIVATE_ATTRS entries no longer needed: {sorted(gone)}"


def test_the_attribute_check_sees_reaches():
    """The scan knows the classes' private names and would have seen the old LogView's
    ``self._log._segments``."""
    log_names = set()
    for mod, classes in OWNED_CLASSES["Log"].items():
        log_names |= _class_private_names(mod, classes)
    assert {"_segments", "_offsets", "_lock", "_io_error", "_check_open"} <= log_names
    seg_names = _class_private_names("kafkalog.storage.segment", {"Segment"})
    assert {"_file_records", "_max_ts", "_drain"} <= seg_names
    records_names = _class_private_names("kafkalog.storage.file_records", {"FileRecords"})
    assert {"_file_size", "_wbuf", "_fd"} <= records_names
    tree = ast.parse("self._log._segments\nself._lock\n")
    reaches = [n for n in ast.walk(tree) if isinstance(n, ast.Attribute)
               and n.attr in log_names
               and not (isinstance(n.value, ast.Name) and n.value.id in ("self", "cls"))]
    assert [ast.unparse(n) for n in reaches] == ["self._log._segments"]


def test_the_checks_see_imports():
    """The scans themselves work: known edges are found, and a made-up circle is reported."""
    graph = _graph()
    assert "kafkalog.storage.segment" in graph["kafkalog.storage.log"]
    assert "kafkalog.records" in graph["kafkalog._sources"]
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c", "a"]]
    assert _base("kafkalog.storage.log", 2, "records") == "kafkalog.records"
    assert _base("kafkalog.spark", 1, "_source") == "kafkalog.spark._source"


# -- twins -----------------------------------------------------------------------------------------
# A module with a compiled twin (``_x.pyx``) and a pure one (``_x_py.py``) is chosen in one place,
# ``_speedups``: no other module names either twin.  Inside the twins, pure ones may import pure
# ones and compiled ones may cimport compiled ones (C declarations, ``.pxd``), never across; a
# compiled twin finds what it shares with its pure twin in a common module (``_arrow_common``,
# ``_records_common``, ``_format``), not in the pure twin.  The ``.pyx``/``.pxd`` sources are read
# line by line (Cython is not Python): ``import``, ``from ... import``/``cimport`` statements,
# parenthesised lists included, and ``import_module("kafkalog.x")`` calls in any source.
TWIN_CHOOSER = f"{PKG}._speedups"


def _sources() -> dict[str, str]:
    """Dotted module name -> path, for the .py, .pyx and .pxd files of the package (a .pxd under
    the name of its module: what cimports it names)."""
    found = {}
    for dirpath, _dirs, names in os.walk(PKG_DIR):
        for n in sorted(names):
            stem, dot, ext = n.rpartition(".")
            if not dot or ext not in ("py", "pyx", "pxd"):
                continue
            rel = os.path.relpath(os.path.join(dirpath, stem), PKG_DIR).split(os.sep)
            if rel[-1] == "__init__":
                rel = rel[:-1]
            found.setdefault(".".join([PKG] + rel), []).append(os.path.join(dirpath, n))
    return found


SOURCES = _sources()
COMPILED_TWINS = {m for m, paths in SOURCES.items() if any(p.endswith(".pyx") for p in paths)
                  and f"{m}_py" in MODULES}
PURE_TWINS = {f"{m}_py" for m in COMPILED_TWINS}

_FROM = re.compile(r"^\s*from\s+(\.*[\w.]*)\s+(c?import)\s+(.*)$")
_IMPORT = re.compile(r"^\s*(c?import)\s+(.*)$")
_IMPORT_MODULE = re.compile(r"import_module\(\s*[\"']([\w.]+)[\"']")


def _statements(text: str):
    """(line number, statement) for every line, a parenthesised name list joined into one."""
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        start, stmt = i + 1, lines[i].split("#", 1)[0]
        while stmt.count("(") > stmt.count(")") and i + 1 < len(lines):
            i += 1
            stmt += " " + lines[i].split("#", 1)[0]
        yield start, stmt
        i += 1


def _resolve(mod: str, path: str, target: str) -> str:
    level = len(target) - len(target.lstrip("."))
    if level == 0:
        return target
    parts = mod.split(".")
    if not path.endswith("__init__.py"):
        parts = parts[:-1]
    parts = parts[: len(parts) - (level - 1)]
    rest = target[level:]
    return ".".join(parts + ([rest] if rest else []))


def _source_imports(mod: str, path: str, text: str):
    """(line, 'import' or 'cimport', imported module), once each, for ``mod``'s source ``text``."""
    return list(dict.fromkeys(_each_import(mod, path, text)))


def _each_import(mod: str, path: str, text: str):
    for line, stmt in _statements(text):
        for name in _IMPORT_MODULE.findall(stmt):
            yield line, "import", name
        m = _FROM.match(stmt)
        if m:
            base = _resolve(mod, path, m.group(1))
            if base.split(".")[0] != PKG:
                continue
            names = m.group(3).replace("(", " ").replace(")", " ").replace("\\", " ")
            for item in names.split(","):
                name = item.split(" as ")[0].strip()
                if not name:
                    continue
                sub = f"{base}.{name}"
                yield line, m.group(2), sub if sub in SOURCES else base
            continue
        m = _IMPORT.match(stmt)
        if m:
            for item in m.group(2).split(","):
                name = item.split(" as ")[0].strip()
                if name.split(".")[0] == PKG:
                    yield line, m.group(1), name


def _twin_reaches(sources=None):
    """(file, line, importer, kind, twin) for every import of a twin the rules above forbid."""
    sources = SOURCES if sources is None else sources
    for mod in sorted(sources):
        for path in sources[mod]:
            with open(path, encoding="utf-8") as f:
                text = f.read()
            compiled = not path.endswith(".py")
            for line, kind, target in _source_imports(mod, path, text):
                if target not in COMPILED_TWINS | PURE_TWINS or target == mod:
                    continue
                if mod == TWIN_CHOOSER:
                    continue
                if not compiled and mod in PURE_TWINS and target in PURE_TWINS and kind == "import":
                    continue
                if compiled and mod in COMPILED_TWINS and target in COMPILED_TWINS \
                        and kind == "cimport":
                    continue
                rel = os.path.relpath(path, PKG_DIR).replace(os.sep, "/")
                yield rel, line, mod, kind, target


def test_only_speedups_chooses_a_twin_and_twins_stay_apart():
    found = [f"{rel}:{line}: {kind} {target}" for rel, line, _m, kind, target in _twin_reaches()]
    assert found == [], ("twins named outside _speedups, or a twin reaching across to the other "
                         "kind (move what they share into a common module, or ask _speedups "
                         "for the chosen twin):\n" + "\n".join(found))


def test_the_twin_check_reads_pyx_imports(tmp_path):
    """The scan knows the twins, sees the compiled modules' cimports and would have seen the
    imports it exists to stop."""
    assert {f"{PKG}._arrow", f"{PKG}._arrow_encode", f"{PKG}._batch", f"{PKG}._dump",
            f"{PKG}._varint"} <= COMPILED_TWINS
    assert f"{PKG}._arrow_common" not in COMPILED_TWINS | PURE_TWINS
    batch = [p for p in SOURCES[f"{PKG}._batch"] if p.endswith(".pyx")][0]
    with open(batch, encoding="utf-8") as f:
        seen = {(k, t) for _l, k, t in _source_imports(f"{PKG}._batch", batch, f.read())}
    assert {("cimport", f"{PKG}._legacy"), ("cimport", f"{PKG}._codecs"),
            ("import", f"{PKG}._format")} <= seen
    bad = tmp_path / "_batch.pyx"
    bad.write_text(
        "from ._arrow_py import (\n    COL_ALL,\n    _error,\n)\n"
        "from . import _arrow_py as _twin\n"
        "cimport cython\n"
        "from ._varint cimport kl_zigzag32\n"
        "            from ._arrow import decompress_section\n"
        "        importlib.import_module('kafkalog._legacy_py')\n",
        encoding="utf-8",
    )
    pure = tmp_path / "_batch_py.py"
    pure.write_text("from ._legacy_py import LegacyRecord\nfrom . import _crc\n", encoding="utf-8")
    tool = tmp_path / "dump.py"
    tool.write_text("from .. import _dump_py as _lines\n", encoding="utf-8")
    got = [(line, kind, target) for _r, line, _m, kind, target in _twin_reaches({
        f"{PKG}._batch": [str(bad)], f"{PKG}._batch_py": [str(pure)],
        f"{PKG}.tools.dump": [str(tool)]})]
    assert got == [
        (1, "import", f"{PKG}._arrow_py"),
        (5, "import", f"{PKG}._arrow_py"),
        (8, "import", f"{PKG}._arrow"),
        (9, "import", f"{PKG}._legacy_py"),
        (2, "import", f"{PKG}._crc"),
        (1, "import", f"{PKG}._dump_py"),
    ], got
