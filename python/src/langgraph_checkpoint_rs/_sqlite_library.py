"""Loads the extension on the SQLite library of Python's own ``sqlite3``.

The wheel's extension carries no SQLite and names no SQLite library: its
``sqlite3_*`` symbols are resolved, when it is loaded, from the global symbol
scope. The library that Python's ``_sqlite3`` linked was loaded privately
(``RTLD_LOCAL``), so it is first re-opened with ``RTLD_GLOBAL | RTLD_NOLOAD``
(which loads nothing new: it only widens the scope of the copy already
there). One process then has one SQLite, whose file locks ``sqlite3``
connections and the Rust savers both see; two copies in one process do not
see each other's POSIX locks, and writing one file through both can corrupt
it.

An extension built from the sdist links the system's libsqlite3 by name
instead (or compiles SQLite in with the ``bundled-sqlite`` feature); for it
the promotion is harmless.
"""

from __future__ import annotations

import ctypes
import os
import sys
from collections.abc import Iterable
from types import ModuleType

SYMBOL = "sqlite3_libversion_number"
# the oldest SQLite whose functions the extension was built against
MIN_SQLITE = "3.34.1"
# _sqlite3 has SQLite linked in, not exported: nothing can share it
HIDDEN = ""


def mapped_file(address: int, maps: Iterable[str]) -> str | None:
    """The file mapped at ``address``, from lines of ``/proc/self/maps``."""
    for line in maps:
        fields = line.split(None, 5)
        if len(fields) < 6 or not fields[5].startswith("/"):
            continue
        start, _, end = fields[0].partition("-")
        if int(start, 16) <= address < int(end, 16):
            return fields[5].rstrip("\n")
    return None


def python_sqlite_library() -> str | None:
    """The file that holds the SQLite Python's ``_sqlite3`` calls, or ``None``
    when ``_sqlite3`` is missing or built into the interpreter, or has SQLite
    linked in and hidden (``HIDDEN``)."""
    try:
        import _sqlite3
    except ImportError:
        return None
    module_file = getattr(_sqlite3, "__file__", None)
    if not module_file:
        return None
    try:
        # dlsym on the module's handle finds the definition the module binds
        # to: its own (SQLite linked in) or one of its libraries'
        handle = ctypes.CDLL(module_file, mode=os.RTLD_NOLOAD)
        address = ctypes.cast(getattr(handle, SYMBOL), ctypes.c_void_p).value
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            library = mapped_file(address or 0, maps)
    except (OSError, AttributeError):
        library = None
    return HIDDEN if library is None else library


def share_python_sqlite() -> str | None:
    """Puts the SQLite of Python's ``sqlite3`` in the global symbol scope;
    returns its file (``None`` when there is none to promote)."""
    library = python_sqlite_library()
    if library:
        ctypes.CDLL(library, mode=os.RTLD_GLOBAL | os.RTLD_NOLOAD)
    return library


def import_core(package: str) -> ModuleType:
    """Imports ``<package>._core`` on the SQLite of Python's ``sqlite3``."""
    import importlib

    library = share_python_sqlite() if sys.platform.startswith("linux") else None
    if not hasattr(sys, "getdlopenflags"):
        return importlib.import_module(f"{package}._core")
    flags = sys.getdlopenflags()
    # every symbol bound at load: a missing SQLite is an ImportError here,
    # never a crash at the first call
    sys.setdlopenflags((flags & ~os.RTLD_LAZY) | os.RTLD_NOW)
    try:
        core = importlib.import_module(f"{package}._core")
    except ImportError as e:
        if "undefined symbol: sqlite3_" not in str(e):
            raise
        raise ImportError(missing_sqlite_message(library or None, str(e))) from e
    finally:
        sys.setdlopenflags(flags)
    if library == HIDDEN:
        # a source build (libsqlite3 linked by name, or bundled) loads anyway
        import warnings

        warnings.warn(
            "Python's sqlite3 module has SQLite linked in, so langgraph-checkpoint-rs "
            "runs on another copy: do not open one SQLite file through both in one "
            "process (their file locks do not see each other)",
            RuntimeWarning,
            stacklevel=3,
        )
    return core


def missing_sqlite_message(library: str | None, loader_error: str) -> str:
    """Why the extension cannot load, and what to do."""
    try:
        import sqlite3

        version = f"SQLite {sqlite3.sqlite_version}"
    except ImportError:
        version = "no sqlite3 module"
    if library is None:
        why = (
            "this Python has no shared SQLite library to lend it (its _sqlite3 "
            f"has SQLite linked in, or is missing; {version}); use a Python "
            "whose _sqlite3 links libsqlite3 dynamically (a Linux "
            "distribution's or pyenv's)"
        )
    else:
        why = (
            f"the SQLite of this Python ({library}, {version}) lacks a function "
            f"it needs: it needs SQLite {MIN_SQLITE} or newer"
        )
    return (
        "the binary wheel of langgraph-checkpoint-rs runs on the SQLite library "
        f"of Python's own sqlite3 module, and {why}; or build the package from "
        "source (needs Rust and libsqlite3-dev; it links its own libsqlite3: do "
        "not open one file through it and sqlite3 in one process): pip install "
        f"--no-binary langgraph-checkpoint-rs langgraph-checkpoint-rs. Loader: {loader_error}"
    )
