"""The switch's log as BMv2 keeps it: nothing unless asked; ``--log-console`` on stdout; ``--log-file F``
in ``F.txt``, rotated at ``--log-file-max-size`` bytes into ``F.1.txt`` .. ``F.N.txt``
(``--log-file-max-files``), flushed after every message only with ``--log-flush`` (else when the buffer
fills, at warnings and at exit, which keeps per-packet tracing cheap); ``-L`` picks the level, ``trace``
by default as in BMv2."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys

from p4switch.engine import api as engine

LEVELS = {"trace": engine.TRACE, "debug": logging.DEBUG, "info": logging.INFO, "warn": logging.WARNING,
          "warning": logging.WARNING, "error": logging.ERROR, "off": logging.CRITICAL + 1}


class LogFile(logging.StreamHandler):  # type: ignore[type-arg]
    """A log file rotated by size with BMv2's (spdlog's) names, ``F.txt`` then ``F.1.txt`` (newest) ..
    ``F.N.txt``, appended to across restarts. It flushes per message only with ``--log-flush`` or for
    warnings and errors."""

    def __init__(self, base: str, max_bytes: int, backups: int, flush_each: bool) -> None:
        self.base, self.max_bytes, self.backups, self.flush_each = base, max_bytes, backups, flush_each
        path = log_file_path(base)
        super().__init__(open(path, "a", encoding="utf-8"))  # noqa: SIM115 - closed in close()
        self.size = os.path.getsize(path)

    def backup_path(self, index: int) -> str:
        return f"{self.base}.{index}.txt"

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = self.format(record) + "\n"
            size = len(text.encode("utf-8", "replace"))
            if self.size and self.size + size > self.max_bytes:
                self.rotate()
            self.stream.write(text)
            self.size += size
            if self.flush_each or record.levelno >= logging.WARNING:
                self.stream.flush()
        except Exception:  # noqa: BLE001 - logging's contract: report, never raise into the caller
            self.handleError(record)

    def rotate(self) -> None:
        """Shift F.i.txt to F.(i+1).txt (dropping the oldest), F.txt to F.1.txt, start a new F.txt."""
        self.stream.close()
        path = log_file_path(self.base)
        if self.backups:
            for index in range(self.backups - 1, 0, -1):
                if os.path.exists(self.backup_path(index)):
                    os.replace(self.backup_path(index), self.backup_path(index + 1))
            os.replace(path, self.backup_path(1))
        self.stream = open(path, "w", encoding="utf-8")  # noqa: SIM115 - closed in close()
        self.size = 0

    def close(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            self.stream.close()
        super().close()


def log_file_path(base: str) -> str:
    """Where ``--log-file base`` writes (as BMv2: the name plus ``.txt``)."""
    return base + ".txt"


def setup(args: argparse.Namespace) -> logging.Logger:
    """The ``p4switch`` logger with the sinks and level of the command line (BMv2 refuses --log-file with
    --log-console; p4switch writes to both). Raises OSError when the log file cannot be opened."""
    handlers: list[logging.Handler] = []
    if args.log_file:
        handlers.append(LogFile(args.log_file, args.log_file_max_size, args.log_file_max_files,
                                args.log_flush))
    if args.log_console:
        handlers.append(logging.StreamHandler(sys.stdout))
    formatter = logging.Formatter(f"%(asctime)s [dev {args.device_id}] %(levelname)s %(name)s: %(message)s")
    for handler in handlers:
        handler.setFormatter(formatter)
    root = logging.getLogger("p4switch")
    for old in root.handlers:
        old.close()
    root.handlers[:] = handlers or [logging.NullHandler()]
    root.setLevel(LEVELS[args.log_level])
    root.propagate = False
    return root
