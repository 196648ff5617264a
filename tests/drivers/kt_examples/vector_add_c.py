#!/usr/bin/env python
"""Kernel Tuner's minimal C example, switched to autotune by its import line.

The C function returns its own time in milliseconds (Kernel Tuner's C convention).
Run: python vector_add_c.py (the results go to sqlite:///autotune.db in the working directory)
"""

import numpy

from autotune import tune_kernel

kernel_string = """
#include <time.h>

float vector_add(float *c, const float *a, const float *b, int n) {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    #pragma omp parallel for num_threads(nthreads) schedule(static, chunk)
    for (int i = 0; i < n; i++) {
        c[i] = a[i] + b[i];
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (t1.tv_sec - t0.tv_sec) * 1e3f + (t1.tv_nsec - t0.tv_nsec) * 1e-6f;
}
"""

size = 100_000
problem_size = (size, 1)

a = numpy.random.randn(size).astype(numpy.float32)
b = numpy.random.randn(size).astype(numpy.float32)
c = numpy.zeros_like(b)
n = numpy.int32(size)

args = [c, a, b, n]

tune_params = {}
tune_params["nthreads"] = [1, 2]
tune_params["chunk"] = [256, 1024, 4096]

results, env = tune_kernel("vector_add", kernel_string, problem_size, args, tune_params, lang="C",
                           answer=[a + b, None, None, None])
print(f"{len(results)} configurations on {env['device_name']}; campaign {env['campaign']}")
