"""A campaign run whole as a Ray task (`tune parallel --ray`, `tune graph --ray`, `autotune worker --ray`) whose
task fails in any way Ray reports (the campaign's own error, another exception, a worker that died) is one
error line, as a Ray actor's or device probe's failure is (autotune.runners.ray.ray_failure). Unit tests: Ray's
own exception classes, with a fake in place of the cluster."""

import pytest

ray = pytest.importorskip("ray", reason="ray is not installed (pip install 'autotune[ray]'): Ray tests skipped")

from autotune.drivers import scale  # noqa: E402
from autotune.errors import AutotuneError, UsageError  # noqa: E402
from autotune.runners import ray as ray_runner  # noqa: E402


class FakeRayWhoseTaskFails:
    """What run_on_ray uses of the ray module: remote(fn).options(...).remote(...) gives a reference, and get of
    it raises ``error``."""

    exceptions = ray.exceptions

    def __init__(self, error: Exception):
        self.error = error

    def remote(self, *args):  # ray.remote(fn), then the task's .remote(kind, kwargs): a reference
        return self

    def options(self, **resources):
        return self

    def get(self, ref):
        raise self.error


def remote_error(cause: Exception):
    """A RayTaskError as Ray raises it for a task whose code raised ``cause``."""
    return ray.exceptions.RayTaskError("_call", "Traceback (most recent call last): ...", cause)


@pytest.mark.parametrize("error, expected", [
    (ray.exceptions.WorkerCrashedError(), "the campaign's Ray task failed: The worker died"),
    (ray.exceptions.TaskCancelledError(), "the campaign's Ray task failed: "),
    (remote_error(ValueError("bad value")), "the campaign's Ray task failed: ValueError: bad value"),
])
def test_a_failed_campaign_task_is_one_usage_error(monkeypatch, capsys, error, expected):
    monkeypatch.setattr(ray_runner, "_ray", lambda: FakeRayWhoseTaskFails(error))
    monkeypatch.setattr(ray_runner, "ray_init", lambda address: None)
    with pytest.raises(UsageError) as failed:
        scale.run_on_ray("parallel", {"model": "mlp-unity", "cluster": "dgx-a100-x1"}, "local")
    message = str(failed.value)
    assert message.startswith(expected) and message != "the campaign's Ray task failed: " and "\n" not in message
    assert "running the parallel campaign as a Ray task" in capsys.readouterr().err


def test_the_campaigns_own_error_is_raised_as_it_is(monkeypatch):
    own = UsageError("unknown model 'alexnet'")
    monkeypatch.setattr(ray_runner, "_ray", lambda: FakeRayWhoseTaskFails(remote_error(own)))
    monkeypatch.setattr(ray_runner, "ray_init", lambda address: None)
    with pytest.raises(AutotuneError) as failed:
        scale.run_on_ray("parallel", {"model": "alexnet", "cluster": "dgx-a100-x1"}, "local")
    assert failed.value is own


class FakeRayWithoutGpu(FakeRayWhoseTaskFails):
    """A cluster of CPUs alone, whose tasks would fail if they were ever sent."""

    def cluster_resources(self):
        return {"CPU": 2.0}


def test_a_gpu_campaign_on_a_cluster_without_a_gpu_is_refused_before_its_task_is_sent(monkeypatch, capsys):
    monkeypatch.setattr(ray_runner, "_ray", lambda: FakeRayWithoutGpu(ray.exceptions.WorkerCrashedError()))
    monkeypatch.setattr(ray_runner, "ray_init", lambda address: None)
    with pytest.raises(UsageError, match="holding a GPU, and the Ray cluster has none") as refused:
        scale.run_on_ray("graph", {"model": "m.onnx", "output": "o.onnx", "device": "cuda"}, "local")
    assert "\n" not in str(refused.value)
    assert "running the graph campaign" not in capsys.readouterr().err
