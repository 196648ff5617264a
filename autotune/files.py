"""Files written whole or not at all: the content goes to a new file beside the target, then takes its name, so
a write that fails part-way (a full disk, a file size limit, Ctrl-C) leaves the file that was there. Standard
library only."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable


def write_whole(path: str | os.PathLike, write: Callable[[str], None]) -> None:
    """Have ``write(name)`` write the content to a new file beside ``path``'s target (a symbolic link is
    followed), then rename it over the target. The file keeps the mode of the file it replaces, or a new one
    gets the mode the umask gives. What is not a regular file (/dev/null, a pipe) is written in place: replacing
    it would put a file where a device or a pipe was. The temporary name ends in the target's suffix, so a writer
    that picks its format by suffix picks the target's. OSError (and whatever ``write`` raises) as raised, the
    temporary file removed."""
    target = os.path.realpath(path)
    if os.path.exists(target) and not os.path.isfile(target):
        write(target)
        return
    folder, base = os.path.split(target)
    stem, suffix = os.path.splitext(base)
    fd, temp = tempfile.mkstemp(prefix=f".{stem}.", suffix=f".tmp{suffix}", dir=folder or ".")
    os.close(fd)
    try:
        write(temp)
        with open(temp, "rb+") as f:
            os.fsync(f.fileno())  # on disk before it takes the name
        if os.path.isfile(target):
            mode = os.stat(target).st_mode & 0o7777
        else:
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        os.chmod(temp, mode)
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
