"""Our Wireshark dissector (``ibsec.lua`` beside this file): install it, and read captures with it.

The dissector is a Lua plugin that works beside Wireshark's InfiniBand dissector (see the comment at the
top of ``ibsec.lua`` for what it shows). ``python -m ibsec.wireshark install`` (``make wireshark``) copies
it into the user's personal Lua plugin folder, where Wireshark and tshark load it at start-up.

:func:`read_fields` runs tshark with the plugin on a capture and returns the fields asked for, frame by
frame: what the tests and scripts use. It runs tshark with a throw-away home directory, so that neither
an installed copy of the plugin nor the user's preferences change what it reads.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

PLUGIN = Path(__file__).with_name("ibsec.lua")
PLUGIN_NAME = "ibsec.lua"
DEFAULT_PERSONAL_LUA_PLUGINS = Path("~/.local/lib/wireshark/plugins")
"""Wireshark's personal Lua plugin folder on Linux and macOS when tshark is not there to ask."""
AGGREGATOR = "\x1f"
"""Separates the occurrences of one field in tshark's output (a byte no field value contains)."""


LUA_ERRORS = "_ws.expert.message"
"""Where tshark reports a Lua error raised while dissecting a frame."""


class TsharkError(RuntimeError):
    """tshark is missing, failed, or the plugin raised a Lua error."""


def tshark() -> str:
    """The tshark on PATH; :class:`TsharkError` if there is none."""
    path = shutil.which("tshark")
    if path is None:
        raise TsharkError("tshark is not installed (Debian: apt-get install tshark)")
    return path


def personal_plugin_dir() -> Path:
    """Where Wireshark looks for this user's Lua plugins: asked from tshark, else its Linux default."""
    try:
        out = subprocess.run([tshark(), "-G", "folders"], capture_output=True, text=True, timeout=60,
                             check=True).stdout
    except (TsharkError, subprocess.SubprocessError):
        return DEFAULT_PERSONAL_LUA_PLUGINS.expanduser()
    for line in out.splitlines():
        label, _, path = line.partition(":")
        if label.strip() == "Personal Lua Plugins" and path.strip():
            return Path(path.strip())
    return DEFAULT_PERSONAL_LUA_PLUGINS.expanduser()


def install(folder: Path | None = None) -> Path:
    """Copy the plugin into ``folder`` (default: the personal Lua plugin folder); returns its new path."""
    folder = folder or personal_plugin_dir()
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / PLUGIN_NAME
    shutil.copyfile(PLUGIN, target)
    target.chmod(0o644)
    return target


def read_fields(capture: Path, fields: Sequence[str], prefs: Mapping[str, str] | None = None,
                display_filter: str | None = None, timeout: float = 300) -> list[dict[str, list[str]]]:
    """Each frame of ``capture`` (matching ``display_filter``) as {field: [every occurrence's value]}.

    ``prefs`` are Wireshark preferences (``{"ibsec.topology": "runs/X/topology.json"}``). A field absent
    from a frame maps to an empty list. Raises :class:`TsharkError` if tshark fails or the plugin raised a
    Lua error on any frame (Wireshark shows those as expert infos, so they are always read).
    """
    wanted = [*fields, LUA_ERRORS] if LUA_ERRORS not in fields else list(fields)
    argv = [tshark(), "-n", "-X", f"lua_script:{PLUGIN}", "-r", str(capture), "-T", "fields",
            "-E", "header=n", "-E", "separator=\t", "-E", "occurrence=a", "-E", f"aggregator={AGGREGATOR}"]
    for name, value in (prefs or {}).items():
        argv += ["-o", f"{name}:{value}"]
    if display_filter:
        argv += ["-Y", display_filter]
    for name in wanted:
        argv += ["-e", name]
    with tempfile.TemporaryDirectory(prefix="ibsec-tshark-") as home:
        env = {**os.environ, "HOME": home, "XDG_CONFIG_HOME": home}
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)
    if done.returncode != 0 or "Lua: Error" in done.stderr:
        raise TsharkError(f"tshark exited with {done.returncode}: {done.stderr.strip()[-2000:]}")
    frames = []
    for line in done.stdout.splitlines():
        values = line.split("\t") + [""] * len(wanted)
        frames.append({name: [v for v in value.split(AGGREGATOR) if v]
                       for name, value in zip(wanted, values, strict=False)})
    errors = [m for frame in frames for m in frame[LUA_ERRORS] if m.startswith("Lua Error")]
    if errors:
        raise TsharkError(f"the plugin failed on {len(errors)} frame(s): {errors[0]}")
    return frames


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m ibsec.wireshark", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    put = sub.add_parser("install", help="copy ibsec.lua into Wireshark's personal Lua plugin folder")
    put.add_argument("--dir", type=Path, help="another plugin folder")
    args = parser.parse_args(argv)
    if args.command == "install":
        target = install(args.dir)
        print(f"installed {target}")
        print("Wireshark and tshark load it at start-up; give a run's topology with "
              "-o ibsec.topology:runs/X/topology.json (tshark) or Preferences > Protocols > IBSEC.")
