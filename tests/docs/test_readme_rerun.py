"""The README's quick start of the user's own kernel, run again as a user reruns a script, resumes its campaign
(the kernel's check is part of its task: an answer computed from new random data each run would be a new task,
measured afresh every time)."""

from __future__ import annotations

import os
import shutil

import pytest
from test_readme import README_BLOCKS


@pytest.mark.skipif(not shutil.which(os.environ.get("CC", "gcc")), reason="the kernel quick start needs a C compiler")
def test_the_own_kernel_quick_start_run_again_resumes_its_campaign(tmp_path, monkeypatch, capsys):
    [block] = [b for b in README_BLOCKS if "from autotune import tune_kernel" in b.code]
    monkeypatch.chdir(tmp_path)
    campaigns = []
    for _ in range(2):
        exec(compile(block.code, "README.md", "exec"), {"__name__": "__main__"})  # noqa: S102 - the README's own code
        campaigns.append(capsys.readouterr().out.split()[-1])
    assert campaigns[0] == campaigns[1]
