"""The cluster file shown in docs/parallel.md loads, and the simulator's cluster is the one it describes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from autotune.errors import UsageError
from autotune.search_spaces.parallel.clusters import get_cluster

DOC = Path(__file__).resolve().parents[2] / "docs" / "parallel.md"


def _doc_yaml() -> str:
    blocks = re.findall(r"```yaml\n(.*?)```", DOC.read_text(), re.DOTALL)
    assert blocks, "docs/parallel.md lost its cluster file example"
    return blocks[0]


def test_documented_cluster_file_loads(tmp_path):
    path = tmp_path / "my-cluster.yaml"
    path.write_text(_doc_yaml())
    c = get_cluster(str(path))
    assert (c.name, c.nodes, c.per_node, c.devices) == ("my-cluster", 2, 4, 8)
    assert c.device.name == "A100"
    assert c.intra_bw == 300e9 and c.inter_bw == 25e9 and c.intra_latency == 3e-6


def test_cluster_file_numbers_as_text_and_bad_values(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(_doc_yaml().replace("intra_bw: 300e9", "intra_bw: fast"))
    with pytest.raises(UsageError, match="intra_bw"):
        get_cluster(str(path))
    path.write_text(_doc_yaml().replace("inter_bw: 25e9", "inter_bw: -25e9"))
    with pytest.raises(UsageError, match="inter_bw"):
        get_cluster(str(path))


def test_a_misspelt_key_and_an_oversized_preset_are_refused(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(_doc_yaml() + "intra_latncy: 1.0\n")  # would silently keep the default latency
    with pytest.raises(UsageError, match=r"unknown key\(s\) 'intra_latncy' .*did you mean 'intra_latency'"):
        get_cluster(str(path))
    assert get_cluster("dgx-a100-x2048").devices == 1 << 14  # the most modelled, as a file allows
    with pytest.raises(UsageError, match="16,392 devices; at most 16,384"):
        get_cluster("dgx-a100-x2049")
