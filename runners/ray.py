"""RayRunner: a campaign's measurements dispatched over a Ray cluster (``pip install 'autotune[ray]'``).

Each measuring actor holds one runner, made in the actor by ``make_runner`` (a picklable
function), and measures one candidate at a time on the device it is pinned to (``num_gpus=1``
for CUDA, a set of cores for C). A runner whose work splits into a build and a run
(``Runner.build_stage``) has its builds sent to Ray's CPU workers as tasks, and the build's
result goes straight to the actor, so compiles run beside the measurements instead of before them
(where the actors leave a CPU of the cluster for them; else each actor builds what it measures).

Results come back as they complete (``collect``), so the campaign asks for more while others run.
Ray handles faults: an actor that dies is restarted (``max_restarts``) and its unfinished calls
are run again (``max_task_retries``); a candidate whose calls all fail is recorded as a
RUNTIME_ERROR that says why, so no trial is lost silently.
"""

from __future__ import annotations

import atexit
import os
import signal
import threading
import time
from collections.abc import Callable

from autotune.errors import AutotuneError, MissingDependencyError, UsageError, argument
from autotune.runners.base import Built, Runner, StreamingRunner
from autotune.types import Candidate, Measurement, Status, Task

LOCAL_ADDRESSES = ("local", "", None)


def _ray():
    try:
        import ray
    except ImportError:
        raise MissingDependencyError(f"{argument('ray')} needs the package 'ray'; pip install 'autotune[ray]'") from None
    return ray


def ray_init(address: str | None = "local") -> None:
    """Connect this process to Ray once: ``local`` starts a cluster on this machine, ``auto`` joins
    the one this machine belongs to, anything else is a cluster address (ray://HOST:10001, HOST:6379)."""
    ray = _ray()
    if ray.is_initialized():
        return
    kwargs = {"include_dashboard": False, "log_to_driver": False}
    main = threading.current_thread() is threading.main_thread()
    # a SIGTERM handler of the program's own (the command line takes SIGTERM as Ctrl-C, which interrupts the
    # campaigns on the cluster and lets each store what it measured) is kept: ray.init sets one that exits at once
    term = signal.getsignal(signal.SIGTERM) if main else None
    try:
        if address in LOCAL_ADDRESSES:
            ray.init(**kwargs)
        else:
            try:
                ray.init(address=address, **kwargs)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise UsageError(f"cannot reach the Ray cluster at {address!r}: {exc}") from None
    finally:
        if callable(term):
            signal.signal(signal.SIGTERM, term)
    # registered after Ray's own exit handler (at its import), so it runs first, and Ray's then has nothing to do
    atexit.register(shutdown_holding_ctrl_c, ray)


def shutdown_holding_ctrl_c(ray) -> None:
    """Shut Ray down (at exit: a cluster ``local`` started takes a few seconds to stop) with Ctrl-C and SIGTERM
    held off until it is done. Either there, the work of the command long stored and reported, would cut Ray's
    shutdown short: a traceback, then often a segmentation fault. The signal is dropped; the process exits
    as the command ended."""
    if not ray.is_initialized():
        return
    if threading.current_thread() is not threading.main_thread():  # only the main thread sets handlers
        ray.shutdown()
        return
    held = {sig: signal.signal(sig, lambda signum, frame: None) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        ray.shutdown()
    finally:
        for sig, handler in held.items():
            signal.signal(sig, handler)


def cluster_resources() -> dict:
    return dict(_ray().cluster_resources())


def ray_failure(exc: Exception, what: str) -> AutotuneError:
    """The error to raise for ``exc``, a Ray error (any: a task's or actor's, a worker that died, a cancelled
    task): the error of autotune's own that the remote code raised, else a UsageError ``what: why`` in one line."""
    cause = getattr(exc, "cause", None)
    return cause if isinstance(cause, AutotuneError) else UsageError(f"{what}: {_why(exc)}")


def _why(exc: Exception) -> str:
    """A Ray error in one line: what the remote code raised, without its traceback."""
    cause = getattr(exc, "cause", None)  # a RayTaskError's: what the remote code raised
    if isinstance(cause, Exception):
        return f"{type(cause).__name__}: {cause}"
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


class _Actor:
    """Made remote in RayRunner: one runner, measuring one candidate at a time.

    The runner is made on the first call, from the function every call carries: a reference inside a list,
    which Ray passes as it is, owned by the RayRunner. An actor Ray restarts makes it again on its next call
    (the call Ray runs again), and the constructor takes nothing from the object store, which Ray reports as
    an error line for an actor it may restart."""

    def __init__(self):
        self.runner: Runner | None = None

    def _runner(self, factory: list) -> Runner:
        if self.runner is None:
            self.runner = _ray().get(factory[0])()
        return self.runner

    def ready(self, factory: list) -> tuple:
        runner = self._runner(factory)
        return runner.device, runner.build_stage(), os.getpid()

    def measure(self, factory: list, task: Task, candidate: Candidate) -> Measurement:
        return self._runner(factory).measure(task, [candidate])[0]

    def run_built(self, factory: list, task: Task, candidate: Candidate, built: Built) -> Measurement:
        return self._runner(factory).run_built(task, candidate, built)


def _build(stage, task: Task, candidate: Candidate) -> Built:
    return stage(task, candidate)


def check_ray_args(ray: str | None, actors: int | None) -> None:
    """UsageError for a number of actors without a cluster to run them on, or fewer than one."""
    if actors is not None and ray is None:
        raise UsageError(f"{argument('ray_actors')} needs {argument('ray')} (the address of the Ray cluster to measure on)")
    if actors is not None and actors < 1:
        raise UsageError(f"{argument('ray_actors')} must be at least 1, not {actors}")


class RayRunner(StreamingRunner):
    """Measure with ``actors`` copies of the runner ``make_runner()`` makes, on a Ray cluster.

    ``num_gpus``/``num_cpus``: what each actor holds (its device). ``depth``: candidates queued per
    actor (with a build stage, 2 keeps an actor busy while the next candidate compiles).
    """

    def __init__(self, make_runner: Callable[[], Runner], actors: int | None = None, *, address: str | None = "local",
                 num_gpus: float = 0, num_cpus: float = 0, build_cpus: float = 1, depth: int | None = None,
                 max_restarts: int = 3, max_task_retries: int = 3, start_timeout_s: float = 600.0):
        ray = _ray()
        ray_init(address)
        # where the campaign measures, as given (a resume command says it again)
        self.ray_address, self.ray_actors_asked = address or "local", actors
        if actors is None:
            res = cluster_resources()
            actors = int(res.get("GPU", 0)) if num_gpus else int(res.get("CPU", 1) // max(num_cpus, 1))
            if actors < 1:
                raise UsageError(f"the Ray cluster has no {'GPU' if num_gpus else 'CPU'} for a measuring actor "
                                 f"(resources: {res})")
        if int(actors) < 1:
            raise UsageError(f"a Ray runner needs at least one actor, not {actors}")
        remote = ray.remote(num_gpus=num_gpus, num_cpus=num_cpus, max_restarts=max_restarts,
                            max_task_retries=max_task_retries)(_Actor)
        # held here for the runner's life, and carried by every call: an actor that Ray restarts makes its
        # runner again from it
        self.factory = [ray.put(make_runner)]
        self._refs: dict = {}  # ObjectRef -> (candidate, actor index)
        self.actors = [remote.remote() for _ in range(int(actors))]
        t0 = time.perf_counter()
        ready, pending = ray.wait([a.ready.remote(self.factory) for a in self.actors], num_returns=len(self.actors),
                                  timeout=start_timeout_s)
        if pending:
            self.close()
            raise UsageError(f"{len(pending)} of {len(self.actors)} Ray actors did not start within "
                             f"{start_timeout_s:g} s: the cluster lacks the resources they ask for "
                             f"(num_gpus={num_gpus}, num_cpus={num_cpus}; cluster: {cluster_resources()})")
        try:
            infos = ray.get(ready)
        except ray.exceptions.RayError as exc:
            self.close()
            raise ray_failure(exc, "a Ray actor could not make its runner") from None
        self.start_s = time.perf_counter() - t0
        devices = {d.name for d, _, _ in infos}
        if len(devices) > 1:
            self.close()
            raise UsageError(f"one campaign measures one kind of device; the actors run on {sorted(devices)}: "
                             "run one campaign per device (autotune tune many)")
        self.device, self.stage = infos[0][0], infos[0][1]
        self.pids = [pid for _, _, pid in infos]
        # builds go to the cluster's spare CPUs; where the actors hold them all (C actors, one per core), a
        # build task would never be scheduled, so each actor builds its own candidates
        spare = cluster_resources().get("CPU", 0) - len(self.actors) * num_cpus
        builds = self.stage is not None and spare >= build_cpus
        self._build = ray.remote(num_cpus=build_cpus, max_retries=3)(_build) if builds else None
        self.slots = len(self.actors) * int(depth or (2 if builds else 1))
        self._load = [0] * len(self.actors)

    def submit(self, task: Task, candidates: list[Candidate]) -> None:
        for c in candidates:
            i = min(range(len(self.actors)), key=self._load.__getitem__)
            actor = self.actors[i]
            if self._build is not None:
                ref = actor.run_built.remote(self.factory, task, c, self._build.remote(self.stage, task, c))
            else:
                ref = actor.measure.remote(self.factory, task, c)
            self._refs[ref] = (c, i)
            self._load[i] += 1

    def collect(self, timeout_s: float | None = None) -> list[Measurement]:
        """See StreamingRunner.collect. Ctrl-C while it waits leaves in ``partial`` the measurements that
        completed and were not collected yet, which the campaign stores before it stops."""
        ray = _ray()
        self.partial: list[Measurement] = []
        if not self._refs:
            return []
        refs = list(self._refs)
        try:
            done, _ = ray.wait(refs, num_returns=1, timeout=timeout_s)
            if not done:
                return []
            done, _ = ray.wait(refs, num_returns=len(refs), timeout=0)  # everything else finished by now too
            return self._take(done)
        except KeyboardInterrupt:
            try:
                ready, _ = ray.wait(list(self._refs), num_returns=len(self._refs), timeout=0)
                self._take(ready)
            except BaseException:  # noqa: BLE001 - a second Ctrl-C, or Ray gone: the first interrupt is raised
                pass
            raise

    def _take(self, done: list) -> list[Measurement]:
        """The measurements of these finished references, taken out of those in flight; each is added to
        ``partial`` as it is taken, so that Ctrl-C part-way loses none taken before it."""
        ray = _ray()
        out = []
        for ref in done:
            cand, i = self._refs[ref]
            try:
                m = ray.get(ref)
            except ray.exceptions.RayError as exc:
                why = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                m = Measurement(cand, Status.RUNTIME_ERROR, error=f"Ray gave up on the candidate: {why}",
                                meta={"runner": "ray"})
            # taken out of those in flight only once it is in hand: Ctrl-C before that leaves it to ``partial``
            del self._refs[ref]
            self._load[i] -= 1
            out.append(m)
            self.partial.append(m)
        return out

    @property
    def in_flight(self) -> int:
        return len(self._refs)

    def close(self) -> None:
        ray = _ray()
        for ref in self._refs:  # what is in flight is cancelled first: killed with its actor, Ray would retry it
            ray.cancel(ref)     # and say so on standard output
        for a in self.actors:
            ray.kill(a, no_restart=True)
        self.actors, self._refs = [], {}


def _probe(target: str, backend: str) -> dict:
    if target == "cuda":
        from autotune.runners.cuda import probe_cuda_device

        return probe_cuda_device(0, backend)
    from autotune.runners.c import check_compiler, compiler_command
    from autotune.search_spaces.kernels.base import cpu_props

    check_compiler(compiler_command())  # where the actors build: one message, not a failed trial each
    return cpu_props()


def probe_device(target: str, backend: str = "auto", address: str | None = "local") -> dict:
    """The properties of a device the cluster's actors will run on (a GPU for ``cuda``, a CPU else),
    read by a Ray task there: a kernel's knob ranges are those of the device that measures it. On a CPU the
    task also checks that the C compiler there ($CC, default gcc) builds (``check_compiler``): a missing or
    broken one is a UsageError before the campaign starts, as it is without Ray."""
    ray = _ray()
    ray_init(address)
    task = ray.remote(num_gpus=1 if target == "cuda" else 0, num_cpus=0)(_probe)
    try:
        return ray.get(task.remote(target, backend), timeout=600)
    except ray.exceptions.GetTimeoutError:
        raise UsageError(f"no {'GPU' if target == 'cuda' else 'CPU'} of the Ray cluster took the device probe "
                         f"within 600 s (cluster: {cluster_resources()})") from None
    except ray.exceptions.RayError as exc:
        raise ray_failure(exc, "the device probe failed on the Ray cluster") from None
