"""A user kernel's arguments and how its outputs are checked (Kernel Tuner's conventions).

- ``describe_arguments``: the arguments (numpy arrays and numpy scalars) validated and described, one
  JSON entry each, for the task's identity;
- ``check_answer``: the reference outputs validated against the arguments (None where not checked);
- ``check_identity``: how outputs are checked (a digest of the answer, the tolerance, the verify
  function), as task parameters;
- ``verify_outputs``: a configuration's outputs compared with the answer (numpy.allclose, or the
  user's verify function).

The kernel itself (its knob space, sources and launch dimensions) is ``user_kernel.UserKernel``.
"""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from autotune.errors import UsageError
from autotune.types import callable_identity

# numpy dtype name -> C scalar type name (what ctypes and the GPU launch pass by value)
SCALAR_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32", "float64")
ARRAY_DTYPES = (*SCALAR_DTYPES, "bool", "float16", "complex64", "complex128")


def describe_arguments(arguments: Sequence) -> list[dict]:
    """One JSON description per kernel argument ({"kind": "array"|"scalar", "dtype", "shape"}), or
    UsageError naming the first argument Kernel Tuner would not accept either."""
    if not isinstance(arguments, (list, tuple)):
        raise UsageError(f"arguments must be a list of numpy arrays and numpy scalars, not {type(arguments).__name__}")
    out = []
    for i, a in enumerate(arguments):
        if isinstance(a, np.ndarray):
            if a.dtype.name not in ARRAY_DTYPES:
                raise UsageError(f"argument {i} is an array of dtype {a.dtype.name}, which cannot be passed to a "
                                 f"kernel; supported dtypes: {', '.join(ARRAY_DTYPES)}")
            out.append({"kind": "array", "dtype": a.dtype.name, "shape": list(a.shape)})
        elif isinstance(a, np.generic):
            if a.dtype.name not in SCALAR_DTYPES:
                raise UsageError(f"argument {i} is a numpy scalar of dtype {a.dtype.name}, which cannot be passed "
                                 f"by value; supported: {', '.join(SCALAR_DTYPES)}")
            out.append({"kind": "scalar", "dtype": a.dtype.name, "shape": []})
        else:
            raise UsageError(f"argument {i} is a {type(a).__name__}; kernel arguments must be numpy arrays or numpy "
                             "scalars such as np.int32(n) or np.float32(x), in the order of the kernel's parameters")
    return out


def check_answer(answer: Sequence | None, arguments: Sequence) -> list | None:
    """``answer`` validated against the arguments: as long as them, None where not checked, and each
    checked entry a numpy array of the same dtype and size as its argument (or a matching scalar)."""
    if answer is None:
        return None
    if not isinstance(answer, (list, tuple)):
        raise UsageError(f"answer must be a list as long as the arguments, with None where not checked, "
                         f"not a {type(answer).__name__}")
    if len(answer) != len(arguments):
        raise UsageError(f"answer has {len(answer)} entries but there are {len(arguments)} arguments; give one per "
                         "argument, None where the output is not checked")
    out = []
    for i, (ans, arg) in enumerate(zip(answer, arguments)):
        if ans is None:
            out.append(None)
            continue
        if not isinstance(arg, np.ndarray):
            raise UsageError(f"answer[{i}] is given but argument {i} is a scalar, which the kernel cannot change; "
                             "use None there")
        if not isinstance(ans, np.ndarray):
            raise UsageError(f"answer[{i}] is a {type(ans).__name__}; expected a numpy array like argument {i}")
        if ans.dtype != arg.dtype:
            raise UsageError(f"answer[{i}] has dtype {ans.dtype.name} but argument {i} has dtype {arg.dtype.name}")
        if ans.size != arg.size:
            raise UsageError(f"answer[{i}] has {ans.size} elements (shape {ans.shape}) but argument {i} has {arg.size} "
                             f"(shape {arg.shape})")
        out.append(ans)
    return out


def _answer_digest(answer: Sequence) -> str:
    """A digest of the reference outputs: each entry's dtype, shape and bytes (None where not checked)."""
    h = hashlib.sha1()
    for a in answer:
        if a is None:
            h.update(b"none;")
            continue
        arr = np.ascontiguousarray(a)
        h.update(f"{arr.dtype.str}{arr.shape};".encode())
        h.update(arr.reshape(-1).view(np.uint8))
    return h.hexdigest()


def check_identity(answer: Sequence | None, atol: float, verify: Callable | None) -> dict | None:
    """How outputs are checked, as task parameters (None when nothing is checked): a digest of ``answer``,
    ``atol``, and the verify function's name and code digest. Results checked one way are no evidence
    for another, so a different check is a different task; the same check in a rerun is the same task."""
    if answer is None:
        return None
    return {"answer_sha1": _answer_digest(answer), "atol": float(atol),
            "verify": callable_identity(verify) if verify is not None else None}


def verify_outputs(answer: list | None, outputs: Mapping[int, np.ndarray], atol: float,
                   verify: Callable | None = None) -> str:
    """'' when the kernel's outputs match ``answer`` (Kernel Tuner's check: numpy.allclose with ``atol``,
    element by element over the flattened arrays, or ``verify(answer, results, atol=atol)``), else why not."""
    if answer is None:
        return ""
    results = [outputs.get(i) for i in range(len(answer))]
    if verify is not None:
        try:
            takes_atol = "atol" in inspect.signature(verify).parameters
        except (TypeError, ValueError):
            takes_atol = False
        try:
            ok = verify(answer, results, atol=atol) if takes_atol else verify(answer, results)
        except Exception as exc:  # noqa: BLE001 - the user's function: its failure is this candidate's
            return f"the verify function raised {type(exc).__name__}: {exc}"
        return "" if ok else "the verify function rejected the output"
    for i, expected in enumerate(answer):
        if expected is None:
            continue
        got = results[i]
        if got is None:
            return f"argument {i} was not copied back"
        e, g = np.ravel(expected), np.ravel(got)
        if e.dtype.kind in "fc" and not np.isfinite(g).all():
            return f"argument {i}: {int((~np.isfinite(g)).sum())} values are not finite"
        if not np.allclose(g, e, atol=atol):
            bad = ~np.isclose(g, e, atol=atol)
            j = int(np.argmax(np.abs(g.astype(np.float64) - e.astype(np.float64)) * bad))
            return (f"argument {i}: {int(bad.sum())} of {bad.size} values differ from the answer beyond "
                    f"atol={atol:g} (rtol 1e-5); e.g. index {j}: {g[j].item()!r} vs {e[j].item()!r}")
    return ""
