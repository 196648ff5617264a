"""Files written whole or not at all (autotune.files.write_whole): a failed write leaves the file that was there;
the file keeps its mode, a new one gets the umask's; what is not a regular file (a pipe, /dev/null) is written in
place, never replaced by a file."""

import os
import stat
import threading

import pytest

from autotune.files import write_whole


def test_a_failed_write_leaves_the_old_file_and_no_temporary_one(tmp_path):
    target = tmp_path / "out.json"
    target.write_text("old")

    def fails(name):
        with open(name, "w") as f:
            f.write("half")
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError):
        write_whole(target, fails)
    assert target.read_text() == "old" and os.listdir(tmp_path) == ["out.json"]


def test_modes_are_kept_or_come_from_the_umask_and_links_are_written_through(tmp_path):
    old = tmp_path / "old.txt"
    old.write_text("x")
    old.chmod(0o640)
    write_whole(old, lambda name: open(name, "w").write("y"))
    assert old.read_text() == "y" and stat.S_IMODE(old.stat().st_mode) == 0o640
    umask = os.umask(0o022)
    try:
        new = tmp_path / "new.txt"
        write_whole(new, lambda name: open(name, "w").write("z"))
        assert stat.S_IMODE(new.stat().st_mode) == 0o644
    finally:
        os.umask(umask)
    link = tmp_path / "link.txt"
    link.symlink_to(old)
    write_whole(link, lambda name: open(name, "w").write("w"))
    assert link.is_symlink() and old.read_text() == "w"


def test_a_pipe_is_written_in_place_not_replaced(tmp_path):
    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    got = []
    reader = threading.Thread(target=lambda: got.append(open(pipe).read()))
    reader.start()
    write_whole(pipe, lambda name: open(name, "w").write("through the pipe"))
    reader.join(timeout=10)
    assert got == ["through the pipe"] and stat.S_ISFIFO(pipe.stat().st_mode)
