"""The user-kernel names under their former module: ``user_kernel`` (the kernel: knob space, sources,
launch dimensions) and ``user_arguments`` (its arguments and the check of its outputs) define them."""

from autotune.search_spaces.kernels.user_arguments import (
    ARRAY_DTYPES,
    SCALAR_DTYPES,
    check_answer,
    check_identity,
    describe_arguments,
    verify_outputs,
)
from autotune.search_spaces.kernels.user_kernel import (
    DEFAULT_BLOCK_SIZE_NAMES,
    FORBIDDEN_PARAMS,
    GRID_NAMES,
    LANGS,
    UserKernel,
    detect_c_timing,
    kernel_name_in_source,
)

__all__ = ["ARRAY_DTYPES", "DEFAULT_BLOCK_SIZE_NAMES", "FORBIDDEN_PARAMS", "GRID_NAMES", "LANGS", "SCALAR_DTYPES",
           "UserKernel", "check_answer", "check_identity", "describe_arguments", "detect_c_timing",
           "kernel_name_in_source", "verify_outputs"]
