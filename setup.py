"""Build the compiled twins of kafkalog.

Only the extension modules are declared here; everything else lives in pyproject.toml.
The compiled twins are skipped on PyPy and when KAFKALOG_PURE_PYTHON is truthy at build
time (the pure twins are always installed). KAFKALOG_CYTHON_DEBUG=1 turns on Cython's
bounds/wraparound checks and line tracing, for sanitizer and fuzzing builds.
"""
import os
import platform
import sys

from setuptools import Extension, setup


def _truthy(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")


COMPILED = ["_varint", "_crc", "_batch", "_legacy", "_arrow", "_dump"]


def extensions():
    if platform.python_implementation() != "CPython" or _truthy("KAFKALOG_PURE_PYTHON"):
        return []
    from Cython.Build import cythonize

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
    if debug:
        directives["linetrace"] = True
        macros += [("CYTHON_TRACE_NOGIL", "1")]
    if sys.platform == "win32":
        compile_args += ["/O2"]
    else:
        compile_args += ["-O3", "-fno-strict-aliasing"]
        extra = os.environ.get("KAFKALOG_EXTRA_CFLAGS")
        if extra:
            compile_args += extra.split()
    mods = [
        Extension(
            f"kafkalog.{name}",
            [f"src/kafkalog/{name}.pyx"],
            include_dirs=["src/kafkalog/_csrc"],
            define_macros=macros,
            extra_compile_args=compile_args,
            extra_link_args=(os.environ.get("KAFKALOG_EXTRA_LDFLAGS", "").split() or None),
        )
        for name in COMPILED
        if os.path.exists(f"src/kafkalog/{name}.pyx")
    ]
    return cythonize(mods, compiler_directives=directives, quiet=True)


setup(ext_modules=extensions())
