#!/usr/bin/env python
"""A Kernel Tuner style C example: a tiled matrix multiply, as a void function that autotune times.

Kernel Tuner's C backend expects the function to return its own time in ms; a void function is timed
by autotune's runner (tune_kernel decides from the declared return type; c_timing="runner" forces it).
Run: python matmul_c.py [DB_URL]
"""


import numpy as np

from autotune import tune_kernel

kernel_string = """
void matmul(float *C, const float *A, const float *B, int n) {
    for (int i = 0; i < n * n; i++) C[i] = 0.0f;
    for (int ii = 0; ii < n; ii += tile_i)
    for (int kk = 0; kk < n; kk += tile_k)
    for (int i = ii; i < ii + tile_i && i < n; i++)
    for (int k = kk; k < kk + tile_k && k < n; k++) {
        const float a = A[i * n + k];
        #pragma GCC unroll 4
        for (int j = 0; j < n; j++) C[i * n + j] += a * B[k * n + j];
    }
}
"""


def tune(n=96):
    A = np.random.randn(n, n).astype(np.float32)
    B = np.random.randn(n, n).astype(np.float32)
    C = np.zeros((n, n), dtype=np.float32)
    args = [C, A, B, np.int32(n)]
    tune_params = {"tile_i": [8, 16, 32], "tile_k": [8, 32, 96]}
    restrictions = ["tile_i <= tile_k"]
    expected = (A.astype(np.float64) @ B.astype(np.float64)).astype(np.float32)
    return tune_kernel("matmul", kernel_string, (n, n), args, tune_params, restrictions=restrictions,
                       answer=[expected, None, None, None], atol=1e-3, lang="C",
                       compiler_options=["-O2"])


if __name__ == "__main__":
    results, env = tune()
    print(f"{len(results)} configurations on {env['device_name']}; campaign {env['campaign']}")
