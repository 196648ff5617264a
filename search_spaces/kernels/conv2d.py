"""conv2d: NCHW fp32 direct convolution with stride and padding (weights KCRS, no bias).

C: the padded input is copied once per call; a KB x WB register tile (output channels x
output columns) accumulates over input-channel blocks of CB, loop order "c_rs" or "rs_c",
OpenMP over (image, channel block). CUDA: a thread computes TK channels x TW columns of
one output row; optionally the block stages its weights in shared memory per CB channels.
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from autotune.errors import UsageError
from autotune.search_spaces.kernels.base import KernelTemplate


def _next_pow2(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


class Conv2d(KernelTemplate):
    name = "conv2d"
    shape_names = ("N", "C", "H", "W", "K", "R", "S")
    shape_optional: ClassVar[dict[str, int]] = {"stride": 1, "pad": 0}
    rtol = 1e-4
    memory_also = "; also the zero-padded input, which the reference and the C kernel copy"

    def check_shape(self):
        s = self.shape
        if self.out_hw[0] < 1 or self.out_hw[1] < 1:
            raise UsageError(f"conv2d shape {s} gives an empty output; check H, W, R, S, stride and pad")
        # past the padded input every stride gives the same one-window output, and the generated code
        # (which strides over a padded copy) would overflow its index arithmetic
        widest = max(s["H"], s["W"]) + 2 * s["pad"]
        if s["stride"] > widest:
            raise UsageError(f"conv2d stride={s['stride']} is larger than the padded input (max(H, W) + 2 * pad = "
                             f"{widest}); a stride of {widest} gives the same output")

    def memory_needed(self) -> dict[str, int]:
        """The base's, and the zero-padded input: a float64 copy in the reference, a float32 copy in the C kernel."""
        need = super().memory_needed()
        s = self.shape
        padded = s["N"] * s["C"] * (s["H"] + 2 * s["pad"]) * (s["W"] + 2 * s["pad"])
        return {**need, "host": need["host"] + 12 * padded}

    @property
    def atol(self) -> float:
        s = self.shape
        return 1e-4 * max(4, s["C"] * s["R"] * s["S"]) ** 0.5

    @property
    def out_hw(self) -> tuple[int, int]:
        s = self.shape
        return ((s["H"] + 2 * s["pad"] - s["R"]) // s["stride"] + 1, (s["W"] + 2 * s["pad"] - s["S"]) // s["stride"] + 1)

    def input_shapes(self):
        s = self.shape
        return [(s["N"], s["C"], s["H"], s["W"]), (s["K"], s["C"], s["R"], s["S"])]

    def output_shape(self):
        return (self.shape["N"], self.shape["K"], *self.out_hw)

    def reference(self, inputs):
        """One product per filter tap (r, s), accumulated: memory of the order of the padded input and
        the output, never of an unfolded N x C x OH x OW x R x S window array."""
        x, w = (a.astype(np.float64) for a in inputs)
        s = self.shape
        st, p = s["stride"], s["pad"]
        xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)))
        oh, ow = self.out_hw
        out = np.zeros((s["K"], s["N"], oh, ow))
        for r in range(s["R"]):
            for q in range(s["S"]):
                tap = xp[:, :, r:r + (oh - 1) * st + 1:st, q:q + (ow - 1) * st + 1:st]  # N C OH OW
                out += np.tensordot(w[:, :, r, q], tap, axes=([1], [1]))               # K N OH OW
        return out.transpose(1, 0, 2, 3)

    @property
    def flops(self) -> int:
        s = self.shape
        oh, ow = self.out_hw
        return 2 * s["N"] * s["K"] * oh * ow * s["C"] * s["R"] * s["S"]

    def knobs(self):
        s = self.shape
        ow = self.out_hw[1]
        if self.target == "cpu":
            cores = int(self.props.get("cores", 1))
            threads = [self.threads] if self.threads else sorted({1, cores})
            knobs = {"KB": [1, 2, 4, 8, 16], "WB": [4, 8, 16, 32, 64], "CB": [1, 4, 16, 64],
                     "order": ["c_rs", "rs_c"], "unroll": [1, 2, 4], "threads": threads}
            constraints = ["KB * WB <= 256", f"WB <= {max(4, _next_pow2(ow))}", f"KB <= {max(1, _next_pow2(s['K']))}",
                           f"CB <= {max(1, _next_pow2(s['C']))}"]
            # The default (the baseline of speedup_over_default) is single-threaded, as gemm's: a threaded
            # baseline measured on a busy machine is slowed by the other load and inflates the speed-up.
            default = {"KB": 1, "WB": 4, "CB": 1, "order": "c_rs", "unroll": 1, "threads": threads[0]}
        else:
            knobs = {"BX": [4, 8, 16, 32, 64], "BY": [1, 2, 4, 8, 16], "TW": [1, 2, 4, 8], "TK": [1, 2, 4, 8],
                     "CB": [1, 4, 8, 16], "SMEM": [0, 1], "UNROLL": [1, 2, 4]}
            max_t = int(self.props.get("max_threads_per_block", 1024))
            max_smem = min(int(self.props.get("max_shared_per_block", 48 * 1024)), 48 * 1024)
            constraints = [f"BX * BY % 32 == 0 and BX * BY <= {max_t}", "TW * TK <= 64",
                           f"SMEM == 0 or CB * {s['R'] * s['S']} * BY * TK * 4 <= {max_smem}",
                           f"BX * TW <= {max(32, _next_pow2(ow))}", f"CB <= {max(1, _next_pow2(s['C']))}"]
            default = {"BX": 32, "BY": 1, "TW": 1, "TK": 1, "CB": 1, "SMEM": 0, "UNROLL": 1}
        return knobs, constraints, default

    # -- C -----------------------------------------------------------------------------
    def c_source(self, cfg):
        s = self.shape
        oh, ow = self.out_hw
        kb, wb, cb, unroll, threads = (int(cfg[k]) for k in ("KB", "WB", "CB", "unroll", "threads"))
        order = str(cfg["order"])
        st, p = s["stride"], s["pad"]
        ow_pad = (ow + wb - 1) // wb * wb
        k_pad = (s["K"] + kb - 1) // kb * kb
        hp = s["H"] + 2 * p
        wp = max(s["W"] + 2 * p, (ow_pad - 1) * st + s["S"])
        loops = ("for (long c = c0; c < c1; ++c) for (long r = 0; r < R; ++r) for (long q = 0; q < S; ++q) {"
                 if order == "c_rs" else
                 "for (long r = 0; r < R; ++r) for (long q = 0; q < S; ++q) for (long c = c0; c < c1; ++c) {")
        omp = f"#pragma omp parallel for collapse(2) num_threads({threads}) schedule(static)" if threads > 1 else ""
        return f"""#include <stdlib.h>
#include <string.h>
#define NB {s['N']}L
#define C {s['C']}L
#define H {s['H']}L
#define W {s['W']}L
#define K {s['K']}L
#define R {s['R']}L
#define S {s['S']}L
#define ST {st}L
#define PAD {p}L
#define OH {oh}L
#define OW {ow}L
#define HP {hp}L
#define WP {wp}L
#define KP {k_pad}L
#define KB {kb}
#define WB {wb}
#define CB {cb}L

void kernel(const float *restrict x, const float *restrict w, float *restrict y) {{
  float *xp = calloc((size_t)NB * C * HP * WP, sizeof(float));
  float *wt = calloc((size_t)C * R * S * KP, sizeof(float));   /* weights as [c][r][s][k], zero-padded k */
  for (long n = 0; n < NB; ++n) for (long c = 0; c < C; ++c) for (long h = 0; h < H; ++h)
    memcpy(xp + ((n * C + c) * HP + h + PAD) * WP + PAD, x + ((n * C + c) * H + h) * W, W * sizeof(float));
  for (long k = 0; k < K; ++k) for (long c = 0; c < C; ++c) for (long r = 0; r < R; ++r) for (long q = 0; q < S; ++q)
    wt[((c * R + r) * S + q) * KP + k] = w[((k * C + c) * R + r) * S + q];
  {omp}
  for (long n = 0; n < NB; ++n) for (long k0 = 0; k0 < KP; k0 += KB) {{
    for (long oh = 0; oh < OH; ++oh) for (long ow0 = 0; ow0 < OW; ow0 += WB) {{
      float acc[KB][WB];
      for (int kk = 0; kk < KB; ++kk) for (int j = 0; j < WB; ++j) acc[kk][j] = 0.0f;
      for (long c0 = 0; c0 < C; c0 += CB) {{
        long c1 = c0 + CB < C ? c0 + CB : C;
        {loops}
          const float *xr = xp + ((n * C + c) * HP + oh * ST + r) * WP + ow0 * ST + q;
          const float *wr = wt + ((c * R + r) * S + q) * KP + k0;
          #pragma GCC unroll {unroll}
          for (int kk = 0; kk < KB; ++kk) {{
            const float wv = wr[kk];
            for (int j = 0; j < WB; ++j) acc[kk][j] += wv * xr[j * ST];
          }}
        }}
      }}
      for (int kk = 0; kk < KB; ++kk) {{
        if (k0 + kk >= K) break;
        float *yr = y + ((n * K + k0 + kk) * OH + oh) * OW + ow0;
        for (int j = 0; j < WB && ow0 + j < OW; ++j) yr[j] = acc[kk][j];
      }}
    }}
  }}
  free(wt);
  free(xp);
}}
"""

    # -- CUDA --------------------------------------------------------------------------
    def cuda_source(self, cfg):
        s = self.shape
        oh, ow = self.out_hw
        bx, by, tw, tk, cb, smem, unroll = (int(cfg[k]) for k in ("BX", "BY", "TW", "TK", "CB", "SMEM", "UNROLL"))
        rs = s["R"] * s["S"]
        if smem:
            stage = f"""    __shared__ float ws[{cb} * {rs} * {by * tk}];
    __syncthreads();
    for (int i = threadIdx.y * {bx} + threadIdx.x; i < {cb * rs * by * tk}; i += {bx * by}) {{
      const int kk = i % {by * tk}, crs = i / {by * tk}, cc = c0 + crs / {rs};
      const int kg = blockIdx.y * {by * tk} + kk;
      ws[i] = (cc < C && kg < K) ? w[((long)kg * C + cc) * {rs} + crs % {rs}] : 0.0f;
    }}
    __syncthreads();
"""
            wv = f"ws[((c - c0) * {rs} + r * S + q) * {by * tk} + threadIdx.y * {tk} + t]"
        else:
            stage = ""
            wv = "(k0 + t < K ? __ldg(&w[((long)(k0 + t) * C + c) * R * S + r * S + q]) : 0.0f)"
        return f"""#define C {s['C']}
#define H {s['H']}
#define W {s['W']}
#define K {s['K']}
#define R {s['R']}
#define S {s['S']}
#define ST {s['stride']}
#define PAD {s['pad']}
#define OH {oh}
#define OW {ow}

extern "C" __global__ void __launch_bounds__({bx * by}) kernel(const float *__restrict__ x, const float *__restrict__ w,
                                                              float *__restrict__ y) {{
  const int n = blockIdx.z / OH, oh = blockIdx.z % OH;
  const int ow0 = (blockIdx.x * {bx} + threadIdx.x) * {tw};
  const int k0 = (blockIdx.y * {by} + threadIdx.y) * {tk};
  float acc[{tk}][{tw}];
#pragma unroll
  for (int t = 0; t < {tk}; ++t)
#pragma unroll
    for (int j = 0; j < {tw}; ++j) acc[t][j] = 0.0f;
  for (int c0 = 0; c0 < C; c0 += {cb}) {{
{stage}    for (int c = c0; c < min(c0 + {cb}, C); ++c) {{
#pragma unroll {unroll}
      for (int r = 0; r < R; ++r) {{
        const int ih = oh * ST + r - PAD;
        if (ih < 0 || ih >= H) continue;
        for (int q = 0; q < S; ++q) {{
          float xv[{tw}];
#pragma unroll
          for (int j = 0; j < {tw}; ++j) {{
            const int iw = (ow0 + j) * ST + q - PAD;
            xv[j] = (iw >= 0 && iw < W) ? __ldg(&x[(((long)n * C + c) * H + ih) * W + iw]) : 0.0f;
          }}
#pragma unroll
          for (int t = 0; t < {tk}; ++t) {{
            const float wt = {wv};
#pragma unroll
            for (int j = 0; j < {tw}; ++j) acc[t][j] = fmaf(wt, xv[j], acc[t][j]);
          }}
        }}
      }}
    }}
  }}
#pragma unroll
  for (int t = 0; t < {tk}; ++t)
#pragma unroll
    for (int j = 0; j < {tw}; ++j)
      if (k0 + t < K && ow0 + j < OW) y[(((long)n * K + k0 + t) * OH + oh) * OW + ow0 + j] = acc[t][j];
}}
"""

    def launch(self, config):
        cfg = self.validate(config)
        s = self.shape
        oh, ow = self.out_hw
        bx, by, tw, tk = (int(cfg[k]) for k in ("BX", "BY", "TW", "TK"))
        grid = ((ow + bx * tw - 1) // (bx * tw), (s["K"] + by * tk - 1) // (by * tk), s["N"] * oh)
        return grid, (bx, by, 1), 0
