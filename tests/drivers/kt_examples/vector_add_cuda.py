#!/usr/bin/env python
"""Kernel Tuner's minimal CUDA example, switched to autotune by its import line (needs an NVIDIA GPU
with CuPy or pycuda; nvcc compiles it anywhere). Run: python vector_add_cuda.py [DB_URL]"""


import numpy

from autotune import tune_kernel

kernel_string = """
__global__ void vector_add(float *c, float *a, float *b, int n) {
    int i = blockIdx.x * block_size_x + threadIdx.x;
    if (i < n) {
        c[i] = a[i] + b[i];
    }
}
"""

size = 1_000_000

a = numpy.random.randn(size).astype(numpy.float32)
b = numpy.random.randn(size).astype(numpy.float32)
c = numpy.zeros_like(b)
n = numpy.int32(size)

args = [c, a, b, n]

tune_params = {}
tune_params["block_size_x"] = [32, 64, 128, 256, 512, 1024]

if __name__ == "__main__":
    results, env = tune_kernel("vector_add", kernel_string, size, args, tune_params, answer=[a + b, None, None, None])
    print(f"{len(results)} configurations on {env['device_name']}; campaign {env['campaign']}")
