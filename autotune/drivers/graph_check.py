"""The end-to-end check of a graph search's result: the rewritten model checked numerically against the original
on random inputs and timed against it, interleaved, on the backend's device; the model kept (the rewritten one only
when it passes the check and is faster beyond measurement noise, confirmed on fresh rounds) is written whole or
not at all."""

from __future__ import annotations

import math

from autotune.errors import UsageError, argument
from autotune.progress import Progress
from autotune.runners.graph import first_line
from autotune.runners.timing import faster_beyond_noise, summary
from autotune.search_spaces.graphs.ir import Graph

#: the numeric check's share of the end-to-end check's bar, in timing rounds: it runs both models on
#: three inputs without the runtime's optimisations, which takes about as long as three rounds
CHECK_UNITS = 3


def finalize(original_model, graph: Graph, rewritten: bool, backend, rounds: int = 25, tolerance: float = 1e-3,
             progress: Progress | None = None):
    """Numeric check and interleaved end-to-end timing of ``graph`` against the original on the backend's
    device; returns (the model to keep, report). The original is kept unless the new graph is faster.

    ``progress``: its current phase counts ``CHECK_UNITS`` for the numeric check and one unit per round
    of each timing (a confirming timing adds ``rounds`` to the total when it runs)."""
    from autotune.search_spaces.graphs.onnx_io import to_onnx

    bar = progress or Progress("finalize", enabled=False)
    new_model = to_onnx(graph)
    bar.update(description="end-to-end check: numeric check")
    try:
        check = backend.max_errors(original_model, new_model)
    except Exception as exc:  # noqa: BLE001 - the backend's own errors (onnxruntime's, torch's) are data here
        backend.check_runs(original_model)  # if the original does not run either, the model is the problem
        check = {"max_abs_error": math.inf, "max_rel_error": math.inf,  # the original is kept
                 "error": f"the exported model does not run: {first_line(exc)}"}
    check["passed"] = check["max_rel_error"] <= tolerance
    bar.advance(CHECK_UNITS)
    bar.update(description=f"end-to-end check: timing {rounds} rounds")
    if rewritten:
        lat = backend.compare_latency([original_model, new_model], rounds=rounds)
    else:
        lat = backend.compare_latency([original_model], rounds=rounds) * 2
    bar.advance(rounds)
    before, after = lat[0], lat[1]
    faster, p_value = faster_beyond_noise(before["times"], after["times"])
    if faster and rewritten and check["passed"]:
        # confirm on fresh rounds: load drift on a shared machine can fake one significant run
        total = bar.phases[-1].total if bar.phases else None
        bar.update(total=None if total is None else total + rounds,
                   description=f"end-to-end check: confirming on {rounds} fresh rounds")
        again = backend.compare_latency([original_model, new_model], rounds=rounds)
        bar.advance(rounds)
        faster, p2 = faster_beyond_noise(again[0]["times"], again[1]["times"])
        p_value = max(p_value, p2)
        if faster:
            before, after = ({"times": a["times"] + b["times"], **summary(a["times"] + b["times"])}
                             for a, b in ((lat[0], again[0]), (lat[1], again[1])))
    kept = rewritten and check["passed"] and faster
    reason = ("faster beyond noise" if kept else "no rewrite found" if not rewritten else
              "numeric check failed" if not check["passed"] else "not faster beyond noise")
    return (new_model if kept else original_model), {
        "check": check, "kept": kept, "reason": reason,
        "latency_before": {k: v for k, v in before.items() if k != "times"},
        "latency_after": {k: v for k, v in after.items() if k != "times"},
        "measured_speedup": before["median_s"] / after["median_s"] if kept else 1.0, "sign_test_p": p_value,
        "candidate_speedup": before["median_s"] / after["median_s"],
    }


def write_model(model, path: str, campaign: str | None = None) -> None:
    """Write the ONNX ``model`` to ``path`` whole or not at all (``write_whole``: a write that fails half-way
    leaves the file there as it was, the input model too where ``path`` is the input's). The format is onnx's
    for the name's suffix (binary, or text for .onnxtxt, .textproto, .json). UsageError naming the file when it
    cannot be written, and ``campaign``, whose trials stay stored, when given."""
    from autotune.files import write_whole
    from autotune.search_spaces.graphs.onnx_io import _onnx

    try:
        write_whole(path, lambda name: _onnx().save(model, name))
    except (OSError, ValueError) as exc:  # ValueError: a model beyond protobuf's 2 GB
        stored = (f"; the search is stored as campaign {campaign!r}: the same command with a {argument('output', '-o')} "
                  "that can be written resumes it and writes the model") if campaign else ""
        raise UsageError(f"cannot write the output model {str(path)!r}: "
                         f"{getattr(exc, 'strerror', None) or exc}{stored}") from None
