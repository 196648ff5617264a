"""The C toolchain as a user's environment sets it: $CC with options or an unclosed quote, a compiler that
builds nothing, and no writable temporary folder for the builds. Each is a UsageError naming what to fix
(exit status 2 on the command line), not a traceback, and $CC's options are part of the device."""

import errno
import tempfile
from pathlib import Path

import pytest

from autotune.errors import MissingDependencyError, UsageError
from autotune.runners import processes
from autotune.runners.c import DEFAULT_FLAGS, CRunner, check_compiler, compiler_command, cpu_device
from autotune.search_spaces.kernels import Softmax


def fake_compiler(tmp_path: Path, body: str) -> Path:
    """A stand-in for gcc: answers --version, else runs ``body`` (sh)."""
    cc = tmp_path / "fake-cc"
    cc.write_text(f'#!/bin/sh\ncase "$1" in --version) echo "fake-cc 1"; exit 0;; esac\n{body}\n')
    cc.chmod(0o755)
    return cc


def test_cc_with_an_unclosed_quote_is_a_usage_error(monkeypatch):
    monkeypatch.setenv("CC", "gcc -DX='")
    with pytest.raises(UsageError, match=r"\$CC .* is not a command line \(No closing quotation\)"):
        compiler_command()


def test_a_compiler_that_fails_every_build_is_said_once_in_its_own_words(tmp_path):
    cc = fake_compiler(tmp_path, 'echo "fake-cc: note: reading flags" >&2\necho "fake-cc: error: no OpenMP here" >&2\n'
                                 "exit 1")
    with pytest.raises(UsageError, match=r"cannot build a shared object with -O3 .*: fake-cc: error: no OpenMP here; "
                                         r"set CC to a working C compiler"):
        check_compiler([str(cc)], DEFAULT_FLAGS)


def test_the_ray_cpu_probe_checks_the_compiler_where_it_runs(tmp_path, monkeypatch):
    """tune kernel --ray on a CPU reads the device with a Ray task on the cluster (``runners.ray._probe``):
    there a compiler that builds nothing is the same one message as without Ray, not a failed trial each."""
    from autotune.runners.ray import _probe

    monkeypatch.setenv("CC", str(fake_compiler(tmp_path, 'echo "fake-cc: error: broken" >&2\nexit 1')))
    with pytest.raises(UsageError, match="cannot build a shared object .*: fake-cc: error: broken"):
        _probe("cpu", "auto")
    monkeypatch.setenv("CC", str(tmp_path / "no-such-cc"))
    with pytest.raises(MissingDependencyError, match="was not found; install gcc or set CC"):
        _probe("cpu", "auto")
    monkeypatch.setenv("CC", "gcc")
    assert _probe("cpu", "auto")["cores"] >= 1


def test_a_compiler_that_succeeds_without_writing_the_shared_object_is_a_compile_error(tmp_path, monkeypatch):
    cc = fake_compiler(tmp_path, "exit 0")  # like CC=true
    with pytest.raises(UsageError, match="exited with status 0 but wrote no shared object"):
        check_compiler([str(cc)], DEFAULT_FLAGS)
    monkeypatch.setenv("CC", str(cc))
    t = Softmax("4,64", "cpu", threads=1)
    runner = CRunner(t)
    try:  # one configuration's build: a failed build (a COMPILE_ERROR trial), not a FileNotFoundError
        so, err, _ = runner.build(t.default_config())
        assert so is None and "wrote no shared object" in err
    finally:
        runner.close()


def test_the_options_cc_carries_make_another_device():
    """CC="gcc -O0" builds other code than gcc: its trials are not looked up as gcc's. Plain gcc's device is
    what it was (its flags alone), so the trials stored before stay found."""
    plain, with_options = cpu_device(["gcc"], DEFAULT_FLAGS), cpu_device(["gcc", "-O0"], DEFAULT_FLAGS)
    assert plain.properties["cflags"] == list(DEFAULT_FLAGS)
    assert with_options.properties["cflags"] == ["-O0", *DEFAULT_FLAGS]
    assert plain.key != with_options.key


def test_no_writable_temporary_folder_is_a_usage_error_naming_tmpdir(monkeypatch):
    def none_usable():
        raise FileNotFoundError(errno.ENOENT, "No usable temporary directory found in ['/ro', '/tmp']")

    monkeypatch.setattr(tempfile, "gettempdir", none_usable)
    with pytest.raises(UsageError, match=r"no writable temporary folder .*\['/ro', '/tmp'\].*set TMPDIR"):
        processes.private_workdir("autotune-test-")


def test_a_temporary_folder_that_cannot_hold_a_build_folder_is_a_usage_error(tmp_path, monkeypatch):
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("")
    monkeypatch.setattr(tempfile, "tempdir", str(not_a_folder))
    with pytest.raises(UsageError, match=r"cannot make a build folder in the temporary folder .*set TMPDIR"):
        processes.private_workdir("autotune-test-")
