"""Compiling p4switch's C sources with the system C compiler and loading them with cffi (ABI mode: a plain
shared library opened with ``dlopen``, so neither Python's headers nor libffi's are needed at run time).

A library is cached by the hash of everything that goes into it (its sources, the headers beside them, the
flags and the compiler's version) under ``$P4SWITCH_CACHE`` (default ``$XDG_CACHE_HOME/p4switch`` or
``~/.cache/p4switch``): the first switch that loads a program compiles it, every later one (and every
other switch of a fabric starting at the same moment, which waits on a lock file) opens the same file.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

C_DIR = Path(__file__).resolve().parent / "c"
OPTIMIZE = ("-O2", "-std=gnu11", "-fPIC", "-Wall", "-Wno-unused-function", "-Wno-unused-variable",
            "-Wno-unused-but-set-variable", "-Wno-unused-label", "-fno-strict-aliasing")
SANITIZE = ("-O1", "-g", "-std=gnu11", "-fPIC", "-Wall", "-Wno-unused-function", "-Wno-unused-variable",
            "-Wno-unused-but-set-variable", "-Wno-unused-label", "-fno-strict-aliasing",
            "-fsanitize=address,undefined", "-fno-sanitize-recover=all", "-fno-omit-frame-pointer")
"""AddressSanitizer and UndefinedBehaviorSanitizer, any report fatal: the fuzz build."""
COMPILE_SECONDS = 600


class NativeUnavailable(Exception):  # noqa: N818 - a reason to fall back, not an error of the caller
    """The native back end cannot run here (no C compiler, a compiler error): the message says why."""


@dataclass(frozen=True)
class Toolchain:
    compiler: str
    version: str


@functools.cache
def toolchain() -> Toolchain:
    """The C compiler (``$CC``, else cc, gcc or clang on PATH). Raises NativeUnavailable."""
    wanted = os.environ.get("CC")
    for name in ([wanted] if wanted else ["cc", "gcc", "clang"]):
        path = shutil.which(name)
        if path:
            try:
                out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60,
                                     check=True)
            except (OSError, subprocess.SubprocessError) as err:
                raise NativeUnavailable(f"the C compiler {path} does not run: {err}") from None
            return Toolchain(path, out.stdout.splitlines()[0] if out.stdout else path)
    raise NativeUnavailable(
        f"no C compiler found ({'$CC=' + wanted if wanted else 'cc, gcc or clang'} not on PATH; "
        "scripts/setup.sh installs gcc)")


def cache_dir() -> Path:
    base = os.environ.get("P4SWITCH_CACHE")
    if base:
        return Path(base)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "p4switch"


def _headers() -> list[Path]:
    return sorted(C_DIR.glob("*.h")) + sorted(C_DIR.glob("*.c"))


def content_key(sources: dict[str, str], flags: tuple[str, ...], tools: Toolchain) -> str:
    """Hash of the sources, every file of the C directory they may include, the flags and the compiler."""
    digest = hashlib.sha256()
    for part in (tools.version, " ".join(flags)):
        digest.update(part.encode() + b"\0")
    for name, text in sorted(sources.items()):
        digest.update(name.encode() + b"\0" + text.encode() + b"\0")
    for path in _headers():
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:32]


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def build(name: str, sources: dict[str, str], *, flags: tuple[str, ...] = OPTIMIZE, shared: bool = True,
          link: tuple[str, ...] = ("-lpthread",)) -> Path:
    """The compiled library (or, with ``shared=False``, executable) of ``sources`` (file name -> text; the
    ``.c`` files are compiled, any may include the headers of p4switch/native/c), from the cache when it
    was built before. Raises NativeUnavailable with the compiler's messages when it fails."""
    tools = toolchain()
    key = content_key(sources, flags, tools)
    directory = cache_dir()
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / f"{name}-{key}{'.so' if shared else ''}"
    if target.exists():
        return target
    with _locked(directory / f".{name}-{key}.lock"):
        if target.exists():  # another process built it while we waited
            return target
        with tempfile.TemporaryDirectory(prefix=f"{name}-", dir=directory) as tmp:
            for file_name, text in sources.items():
                Path(tmp, file_name).write_text(text)
            units = [str(Path(tmp, n)) for n in sources if n.endswith(".c")]
            out = Path(tmp, target.name)
            argv = [tools.compiler, *flags, *(["-shared"] if shared else []), f"-I{C_DIR}", "-o", str(out),
                    *units, *link]
            try:
                result = subprocess.run(argv, capture_output=True, text=True, timeout=COMPILE_SECONDS)
            except (OSError, subprocess.SubprocessError) as err:
                raise NativeUnavailable(f"{tools.compiler} failed to run: {err}") from None
            if result.returncode != 0:
                raise NativeUnavailable(
                    f"{tools.compiler} could not compile {name}: {result.stderr.strip()[-4000:]}")
            os.replace(out, target)
    return target


def c_source(name: str) -> str:
    """One of the C files shipped in p4switch/native/c."""
    return (C_DIR / name).read_text()
