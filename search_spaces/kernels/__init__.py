"""Kernel templates whose schedules are knob spaces: gemm, conv2d, softmax, for C (cpu) and CUDA.

    from autotune.search_spaces.kernels import kernel_problem
    space, template = kernel_problem("gemm", "1024,1024,1024", "cpu")
    print(template.source(template.default_config()))
"""

from __future__ import annotations

from collections.abc import Mapping

from autotune.errors import UsageError
from autotune.search_spaces.kernels.base import KernelTemplate, cpu_props, cpu_props_from
from autotune.search_spaces.kernels.conv2d import Conv2d
from autotune.search_spaces.kernels.gemm import Gemm
from autotune.search_spaces.kernels.softmax import Softmax
from autotune.search_spaces.knobs import KnobSpace

TEMPLATES: dict[str, type[KernelTemplate]] = {"gemm": Gemm, "conv2d": Conv2d, "softmax": Softmax}


def kernel_problem(name: str, shape: Mapping | str, target: str = "cpu", device_props: Mapping | None = None,
                   threads: int | None = None) -> tuple[KnobSpace, KernelTemplate]:
    """The knob space and the template of one kernel for one shape and target."""
    if name not in TEMPLATES:
        raise UsageError(f"unknown kernel {name!r}; valid: {', '.join(TEMPLATES)}")
    template = TEMPLATES[name](shape, target, device_props, threads=threads)
    return template.space(), template


def space_for_task(task, device_props: Mapping | None = None) -> KnobSpace:
    """The knob space of a stored kernel task on the device whose stored properties are ``device_props`` (for
    ranking configurations with a model trained there): a GPU's as stored, a CPU's cores, vector units and
    caches from its stored description (autotune.runners.c.cpu_device), not this host's."""
    p = task.params
    props = dict(device_props) if device_props else None
    if props and p["target"] == "cpu":
        props = cpu_props_from(int(props.get("cores") or 1), props.get("flags"), int(props.get("l1d_bytes") or 0),
                               int(props.get("l2_bytes") or 0))
    return kernel_problem(task.name, p["shape"], p["target"], device_props=props, threads=p.get("threads"))[0]


KERNEL_SHAPE_HELP = ("gemm: M,N,K; conv2d: N,C,H,W,K,R,S[,stride=1,pad=0]; softmax: rows,cols "
                     "(also name=value pairs, e.g. M=512,N=256,K=128)")

__all__ = ["KERNEL_SHAPE_HELP", "TEMPLATES", "Conv2d", "Gemm", "KernelTemplate", "Softmax", "cpu_props", "kernel_problem", "space_for_task"]
