"""The default campaign name of a kernel campaign names the kernel, so rerunning the command resumes it."""

from autotune.drivers.kernel import tune_template


def test_default_campaign_name_names_the_kernel(tmp_path):
    url = f"sqlite:///{tmp_path / 'k.db'}"
    result, _, _ = tune_template("softmax", "16,96", "cpu", trials=2, batch=2, db=url, threads=1, progress=False)
    assert result.campaign == "kernel-softmax-cpu-16x96-t1-evolutionary+xgb-seed0"
