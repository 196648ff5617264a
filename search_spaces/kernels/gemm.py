"""gemm: C = A.B in fp32, row-major, any M, N, K; C (BLIS-like) and CUDA (tiled) schedules."""

from __future__ import annotations

import numpy as np

from autotune.search_spaces.kernels.base import KernelTemplate
from autotune.search_spaces.kernels.gemm_c import gemm_c_source
from autotune.search_spaces.kernels.gemm_cuda import gemm_cuda_launch, gemm_cuda_source


class Gemm(KernelTemplate):
    name = "gemm"
    shape_names = ("M", "N", "K")

    @property
    def rtol(self) -> float:
        return 1e-4

    @property
    def atol(self) -> float:
        # fp32 sums of K products of standard normals: the error grows with K
        return 2e-5 * max(16, self.shape["K"]) ** 0.5 * 4

    def input_shapes(self):
        s = self.shape
        return [(s["M"], s["K"]), (s["K"], s["N"])]

    def output_shape(self):
        return (self.shape["M"], self.shape["N"])

    def reference(self, inputs):
        a, b = inputs
        return a.astype(np.float64) @ b.astype(np.float64)

    @property
    def flops(self) -> int:
        s = self.shape
        return 2 * s["M"] * s["N"] * s["K"]

    # -- knob spaces -------------------------------------------------------------------
    def knobs(self):
        return self._cpu_knobs() if self.target == "cpu" else self._cuda_knobs()

    def _cpu_knobs(self):
        p = self.props
        vws = [4] + ([8] if p.get("avx2") or p.get("avx512") else []) + ([16] if p.get("avx512") else [])
        regs = 32 if p.get("avx512") else 16
        cores = int(p.get("cores", 1))
        threads = [self.threads] if self.threads else sorted({1, *range(2, cores + 1, max(1, cores // 4))} | {cores})
        # Register-tile knobs are derived from the host's vector register count, so every listed
        # value fits the register file with at least one partner value (16 registers on AVX2 and
        # SSE leave NV <= 3; AVX-512's 32 allow NV = 4).
        fits = lambda mr, nv: mr * nv + nv + 1 <= regs  # noqa: E731
        mrs = [m for m in (4, 6, 8, 12, 14) if fits(m, 1)]
        nvs = [n for n in (1, 2, 3, 4) if fits(min(mrs), n)]
        knobs = {
            "VW": vws,                                   # floats per vector register
            "NV": nvs,                                   # vectors per micro-tile row: NR = NV * VW
            "MR": mrs,                                   # micro-tile rows
            "KC": [64, 128, 192, 256, 384, 512],         # shared-dimension cache block (B panel in L1)
            "MC": [32, 48, 64, 96, 128, 192, 256],       # rows of A per cache block (in L2)
            "NC": [256, 512, 1024, 2048, 4096],          # columns of B per cache block (in L3)
            "unroll": [1, 2, 4, 8],                      # micro-kernel k-loop unroll
            "simd": ["vecext", "intrin"] if max(vws) >= 8 else ["vecext"],
            "loop_order": ["jr_ir", "ir_jr"],            # macro-kernel loop order
            "threads": threads,                          # OpenMP threads over the MC loop
        }
        constraints = [
            f"MR * NV + NV + 1 <= {regs}",               # accumulators + B vectors + A broadcast in registers
            f"KC * NV * VW * 4 <= {int(p.get('l1d_bytes', 32768)) * 2}",
            f"MC * KC * 4 <= {int(p.get('l2_bytes', 524288))}",
            "MC >= MR",
            lambda c: c["simd"] == "vecext" or c["VW"] >= 8,  # intrinsics exist for AVX2 / AVX-512
        ]
        vw = max(v for v in vws if v <= 8)
        # The default (the baseline of speedup_over_default) is single-threaded: a threaded baseline
        # measured on a busy machine is slowed by the other load and inflates the reported speed-up.
        default = {"VW": vw, "NV": 1, "MR": 4, "KC": 128, "MC": 64, "NC": 512, "unroll": 1,
                   "simd": "vecext", "loop_order": "jr_ir", "threads": threads[0]}
        return knobs, constraints, default

    def _cuda_knobs(self):
        p = self.props
        s = self.shape
        vecs = [v for v in (1, 2, 4) if s["K"] % v == 0 and s["N"] % v == 0]
        knobs = {
            "BM": [16, 32, 64, 128, 256],
            "BN": [16, 32, 64, 128, 256],
            "BK": [4, 8, 16, 32],
            "TM": [1, 2, 4, 8, 16],
            "TN": [1, 2, 4, 8, 16],
            "VEC": vecs,
            "SMEM": [0, 1],
            "UNROLL": [1, 2, 4],
        }
        max_threads = int(p.get("max_threads_per_block", 1024))
        max_smem = min(int(p.get("max_shared_per_block", 48 * 1024)), 48 * 1024)  # static shared memory
        constraints = [
            "BM % TM == 0 and BN % TN == 0",
            f"(BM // TM) * (BN // TN) % 32 == 0 and (BM // TM) * (BN // TN) <= {max_threads}",
            f"SMEM == 0 or (BK * (BM + 4) + BK * BN) * 4 <= {max_smem}",
            "SMEM == 0 or (BK % VEC == 0 and BN % VEC == 0)",
            "SMEM == 1 or TN % VEC == 0",
            "TM * TN <= 128",                             # accumulators fit the register file
            "SMEM == 1 or BK == 4",                       # BK means nothing without staging
            "UNROLL <= BK or SMEM == 0",
        ]
        default = {"BM": 32, "BN": 32, "BK": 8, "TM": 2, "TN": 2, "VEC": 1, "SMEM": 1, "UNROLL": 1}
        return knobs, constraints, default

    # -- code --------------------------------------------------------------------------
    def c_source(self, cfg):
        s = self.shape
        return gemm_c_source(s["M"], s["N"], s["K"], cfg)

    def cuda_source(self, cfg):
        s = self.shape
        return gemm_cuda_source(s["M"], s["N"], s["K"], cfg)

    def launch(self, config):
        cfg = self.validate(config)
        return gemm_cuda_launch(self.shape["M"], self.shape["N"], cfg)
