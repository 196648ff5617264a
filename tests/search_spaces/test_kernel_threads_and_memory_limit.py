"""A kernel template's thread count is a whole number (1.5 would be built as 1 thread yet named another task),
the memory a shape may use is the smaller of the machine's and its control group's limit (a container
with a memory limit is killed past it, whatever the machine has), and sizes given with spaces for commas are
refused saying so."""

import numpy as np
import pytest

from autotune.errors import UsageError
from autotune.search_spaces.kernels import base, kernel_problem
from autotune.search_spaces.kernels.softmax import Softmax


@pytest.mark.parametrize("threads", [1.5, 1.0, True, "1"])
def test_threads_that_are_not_a_whole_number_are_refused(threads):
    with pytest.raises(UsageError, match=f"threads must be a whole number of threads, not {threads!r}"):
        kernel_problem("gemm", "8,8,8", "cpu", threads=threads)


def test_a_numpy_whole_number_of_threads_is_a_plain_int_in_the_task():
    _, template = kernel_problem("softmax", "4,8", "cpu", threads=np.int64(1))
    assert template.task.params["threads"] == 1 and type(template.task.params["threads"]) is int


def _cgroup(tmp_path, proc_lines: list[str], files: dict[str, str]):
    root = tmp_path / "cgroup"
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text + "\n")
    proc = tmp_path / "proc-self-cgroup"
    proc.write_text("".join(line + "\n" for line in proc_lines))
    return str(root), str(proc)


def test_the_cgroup_memory_limit_is_the_smallest_set_on_the_cgroup_or_above(tmp_path):
    # v2: the job's own cgroup says max, its parent (the container) 2 GiB
    root, proc = _cgroup(tmp_path, ["0::/box/job"], {"memory.max": "max", "box/memory.max": str(2 << 30),
                                                     "box/job/memory.max": "max"})
    assert base.cgroup_memory_limit(root, proc) == 2 << 30
    # v1: the memory controller's hierarchy; "unlimited" is a number near 2**63
    root, proc = _cgroup(tmp_path / "v1", ["4:memory:/docker/abc", "3:cpuset:/"],
                         {"memory/memory.limit_in_bytes": "9223372036854771712",
                          "memory/docker/abc/memory.limit_in_bytes": str(512 << 20)})
    assert base.cgroup_memory_limit(root, proc) == 512 << 20
    root, proc = _cgroup(tmp_path / "none", ["0::/"], {"memory.max": "max"})
    assert base.cgroup_memory_limit(root, proc) is None
    assert base.cgroup_memory_limit(str(tmp_path / "missing"), str(tmp_path / "missing-proc")) is None


def test_a_shape_past_the_cgroup_memory_limit_is_refused_naming_the_limit(monkeypatch):
    t = Softmax("64,64", "cpu", threads=1)  # 96 KiB: the inputs and output, and their float64 reference
    monkeypatch.setattr(base, "cgroup_memory_limit", lambda: 64 << 10)
    with pytest.raises(UsageError, match=r"needs 96 KiB of memory .* more than the 64 KiB this process may use "
                                         r"\(its control group's memory limit"):
        t.check_memory()
    monkeypatch.setattr(base, "cgroup_memory_limit", lambda: 1 << 62)  # larger than the machine: the machine's
    t.check_memory()


def test_sizes_separated_by_spaces_are_refused_saying_to_use_commas():
    with pytest.raises(UsageError, match=r"shape value M='64 64 64' is not an integer; separate the sizes with "
                                         r"commas: M,N,K"):
        kernel_problem("gemm", "64 64 64", "cpu")
    with pytest.raises(UsageError, match=r"shape value M='abc' is not an integer$"):
        kernel_problem("gemm", "abc,1,1", "cpu")
