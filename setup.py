"""Build the compiled twins of kafkalog.

Only the extension modules are declared here; everything else lives in pyproject.toml.
The compiled twins are skipped on PyPy and when KAFKALOG_PURE_PYTHON is truthy at build
time (the pure twins are always installed).  When the compiled twins cannot be built (no C
compiler, no Cython, a failed compile) the install still succeeds with the pure twins and
one warning; the reason is recorded in kafkalog/_build_info.json, which
``kafkalog.FALLBACK_REASON`` and ``kafkalog --version`` report.

Release builds are optimised and carry no debug info (-g0, stripped on Linux).
KAFKALOG_CYTHON_DEBUG=1 turns on Cython's bounds/wraparound checks, line tracing and -g, for
sanitizer and fuzzing builds.

KAFKALOG_REQUIRE_COMPILED=1 makes a build that cannot compile them fail instead (exit status
non-zero, the reason printed): for CI and for in-place developer builds
(``python setup.py build_ext --inplace``), where a fallback would leave compiled modules of
an older source in place and the tests would run them.

``python setup.py --source-hash`` prints the hash of the build inputs that is recorded in the
installed package (scripts/run.sh and scripts/test.sh use it to skip a rebuild).
"""
import hashlib
import json
import os
import platform
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


def _truthy(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


COMPILED = ["_varint", "_crc", "_batch", "_legacy", "_arrow", "_arrow_encode", "_dump"]
BUILD_INFO = "_build_info.json"


def source_hash() -> str:
    """SHA-256 over the build inputs: setup.py, pyproject.toml and the package sources."""
    h = hashlib.sha256()
    files = [os.path.join(HERE, "setup.py"), os.path.join(HERE, "pyproject.toml")]
    pkg = os.path.join(HERE, "src", "kafkalog")
    for root, dirs, names in os.walk(pkg):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for n in sorted(names):
            if n.endswith((".py", ".pyx", ".pxd", ".pyi", ".h", ".typed")) or (
                n.endswith(".c") and os.path.basename(root) == "_csrc"
            ):
                files.append(os.path.join(root, n))
    for path in files:
        h.update(os.path.relpath(path, HERE).replace(os.sep, "/").encode() + b"\0")
        with open(path, "rb") as f:
            h.update(f.read() + b"\0")
    return h.hexdigest()


# Why the compiled twins are absent from this build (None: they are built).
_NOT_COMPILED = None


def extensions():
    global _NOT_COMPILED
    if platform.python_implementation() != "CPython":
        _NOT_COMPILED = f"{platform.python_implementation()} uses the pure-Python twins"
        return []
    if _truthy("KAFKALOG_PURE_PYTHON"):
        _NOT_COMPILED = "KAFKALOG_PURE_PYTHON was set at build time"
        return []
    try:
        from Cython.Build import cythonize
    except ImportError as exc:
        _NOT_COMPILED = f"Cython is not installed ({exc})"
        _require_compiled(_NOT_COMPILED)
        return []

    debug = _truthy("KAFKALOG_CYTHON_DEBUG")
    directives = {
        "language_level": 3,
        "boundscheck": debug,
        "wraparound": debug,
        "initializedcheck": debug,
        "cdivision": True,
        "embedsignature": True,
        "binding": True,
    }
    macros = []
    compile_args = []
    link_args = []
    if debug:
        directives["linetrace"] = True
        macros += [("CYTHON_TRACE_NOGIL", "1")]
    if sys.platform == "win32":
        compile_args += ["/O2"]
    else:
        # -g0 after Python's own CFLAGS (which carry -g) drops the debug info: ~0.4 MB per
        # module instead of ~2.5 MB.  A debug build keeps it.
        compile_args += ["-O3", "-fno-strict-aliasing"] + (["-g"] if debug else ["-g0"])
        if not debug and sys.platform.startswith("linux"):
            link_args += ["-s"]
        extra = os.environ.get("KAFKALOG_EXTRA_CFLAGS")
        if extra:
            compile_args += extra.split()
    link_args += os.environ.get("KAFKALOG_EXTRA_LDFLAGS", "").split()
    mods = [
        Extension(
            f"kafkalog.{name}",
            [f"src/kafkalog/{name}.pyx"],
            include_dirs=["src/kafkalog/_csrc"],
            define_macros=macros,
            extra_compile_args=compile_args,
            extra_link_args=link_args or None,
        )
        for name in COMPILED
        if os.path.exists(os.path.join(HERE, "src", "kafkalog", f"{name}.pyx"))
    ]
    try:
        return cythonize(mods, compiler_directives=directives, quiet=True)
    except Exception as exc:  # a Cython error: still install the pure twins
        _NOT_COMPILED = f"Cython failed to translate the .pyx sources ({exc})"
        _require_compiled(_NOT_COMPILED)
        return []


def _require_compiled(reason: str) -> None:
    """With KAFKALOG_REQUIRE_COMPILED set, a build without the compiled twins is an error."""
    if _truthy("KAFKALOG_REQUIRE_COMPILED"):
        sys.stderr.write(f"\nERROR: KAFKALOG_REQUIRE_COMPILED is set and the compiled twins "
                         f"cannot be built: {reason}\n\n")
        sys.exit(1)


def _write_build_info(build_lib: str, reason) -> None:
    target = os.path.join(build_lib, "kafkalog")
    os.makedirs(target, exist_ok=True)
    info = {"compiled": reason is None, "reason": reason, "source_hash": source_hash()}
    with open(os.path.join(target, BUILD_INFO), "w", encoding="utf-8") as f:
        json.dump(info, f)


def _warn(reason: str) -> None:
    bar = "*" * 78
    sys.stderr.write(
        f"\n{bar}\nWARNING: kafkalog is installed WITHOUT its compiled twins: {reason}\n"
        "Everything works with the pure-Python twins, only slower. To build them, install a C\n"
        "compiler (and the Python headers) and reinstall kafkalog.\n"
        f"{bar}\n\n"
    )


class BuildPy(build_py):
    def run(self):
        super().run()
        if not self.editable_mode:
            _write_build_info(self.build_lib, _NOT_COMPILED)
            if _NOT_COMPILED is not None:
                _warn(_NOT_COMPILED)


class OptionalBuildExt(build_ext):
    """build_ext that falls back to the pure twins instead of failing the install."""

    def run(self):
        if _NOT_COMPILED is not None and self.inplace:
            # an in-place build keeps whatever compiled modules an older build left: say so
            _warn(_NOT_COMPILED + "; compiled modules of an earlier build in src/kafkalog, if "
                  "any, were left in place (KAFKALOG_REQUIRE_COMPILED=1 makes this an error)")
        try:
            super().run()
        except Exception as exc:  # no compiler, missing headers (DistutilsPlatformError, ...)
            self._fallback(exc)

    def build_extension(self, ext):
        if getattr(self, "_failed", False):
            return
        try:
            super().build_extension(ext)
        except Exception as exc:  # CompileError, LinkError, DistutilsExecError
            self._fallback(exc)

    def _fallback(self, exc):
        if getattr(self, "_failed", False):
            return
        self._failed = True
        reason = f"the C build failed ({type(exc).__name__}: {str(exc).strip() or 'no message'})"
        _require_compiled(reason)
        # leave no half-built module behind: all compiled twins or none
        for ext in self.extensions:
            path = self.get_ext_fullpath(ext.name)
            if os.path.exists(path):
                os.remove(path)
        if not self.inplace:
            _write_build_info(self.build_lib, reason)
        _warn(reason)

    def get_outputs(self):
        if getattr(self, "_failed", False):
            return []
        return super().get_outputs()


if __name__ == "__main__" and sys.argv[1:] == ["--source-hash"]:
    print(source_hash())
    sys.exit(0)

setup(
    ext_modules=extensions(),
    cmdclass={"build_py": BuildPy, "build_ext": OptionalBuildExt},
)
