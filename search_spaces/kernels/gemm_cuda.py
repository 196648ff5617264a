"""CUDA code for gemm (C = A.B, fp32, row-major).

A block computes a BM x BN tile of C with NT = (BM/TM)*(BN/TN) threads, each thread a
TM x TN register tile. With SMEM=1 the block stages BM x BK of A (transposed) and
BK x BN of B in shared memory per K-step, loading VEC floats at a time; with SMEM=0
threads read A and B straight from global memory (through the L1 cache). Bounds are
checked everywhere, so any M, N, K works; VEC only takes values dividing K and N.
"""

from __future__ import annotations

_VT = {1: "float", 2: "float2", 4: "float4"}
_LANES = ("x", "y", "z", "w")


def _load(vec: int, ptr: str, ok: str) -> str:
    t = _VT[vec]
    if vec == 1:
        return f"float v = ({ok}) ? {ptr} : 0.0f;"
    zero = f"make_{t}({', '.join(['0.0f'] * vec)})"
    return f"{t} v = ({ok}) ? *reinterpret_cast<const {t} *>(&{ptr}) : {zero};"


def _lanes(vec: int) -> list[str]:
    return ["v"] if vec == 1 else [f"v.{_LANES[i]}" for i in range(vec)]


def gemm_cuda_source(M: int, N: int, K: int, cfg: dict) -> str:
    bm, bn, bk = int(cfg["BM"]), int(cfg["BN"]), int(cfg["BK"])
    tm, tn, vec = int(cfg["TM"]), int(cfg["TN"]), int(cfg["VEC"])
    smem, unroll = int(cfg["SMEM"]), int(cfg["UNROLL"])
    nt = (bm // tm) * (bn // tn)
    head = f"""#define M {M}
#define N {N}
#define K {K}
#define BM {bm}
#define BN {bn}
#define BK {bk}
#define TM {tm}
#define TN {tn}
#define NT {nt}

extern "C" __global__ void __launch_bounds__(NT) kernel(const float *__restrict__ A, const float *__restrict__ B,
                                                         float *__restrict__ C) {{
  const int tid = threadIdx.x;
  const int tx = tid % (BN / TN), ty = tid / (BN / TN);
  const int row0 = blockIdx.y * BM, col0 = blockIdx.x * BN;
  float acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = 0.0f;
"""
    if smem:
        a_store = " ".join(f"As[kk + {i}][r] = {x};" for i, x in enumerate(_lanes(vec)))
        b_store = " ".join(f"Bs[kk][c + {i}] = {x};" for i, x in enumerate(_lanes(vec)))
        body = f"""  __shared__ float As[BK][BM + 4];
  __shared__ float Bs[BK][BN];
  for (int k0 = 0; k0 < K; k0 += BK) {{
    for (int i = tid; i < BM * BK / {vec}; i += NT) {{
      const int r = i / (BK / {vec}), kk = (i % (BK / {vec})) * {vec};
      const int gr = row0 + r, gk = k0 + kk;
      {_load(vec, "A[(long)gr * K + gk]", "gr < M && gk < K")}
      {a_store}
    }}
    for (int i = tid; i < BK * BN / {vec}; i += NT) {{
      const int kk = i / (BN / {vec}), c = (i % (BN / {vec})) * {vec};
      const int gk = k0 + kk, gc = col0 + c;
      {_load(vec, "B[(long)gk * N + gc]", "gk < K && gc < N")}
      {b_store}
    }}
    __syncthreads();
#pragma unroll {unroll}
    for (int kk = 0; kk < BK; ++kk) {{
      float a[TM], b[TN];
#pragma unroll
      for (int i = 0; i < TM; ++i) a[i] = As[kk][ty * TM + i];
#pragma unroll
      for (int j = 0; j < TN; ++j) b[j] = Bs[kk][tx * TN + j];
#pragma unroll
      for (int i = 0; i < TM; ++i)
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
    }}
    __syncthreads();
  }}
"""
    else:
        b_loads = []
        for j0 in range(0, tn, vec):
            lanes = _lanes(vec)
            b_loads.append("{ " + _load(vec, f"B[(long)k * N + c0 + {j0}]", f"c0 + {j0} < N") + " "
                           + " ".join(f"b[{j0 + i}] = {x};" for i, x in enumerate(lanes)) + " }")
        body = f"""  const int r0 = row0 + ty * TM, c0 = col0 + tx * TN;
#pragma unroll {unroll}
  for (int k = 0; k < K; ++k) {{
    float a[TM], b[TN];
#pragma unroll
    for (int i = 0; i < TM; ++i) a[i] = (r0 + i < M) ? __ldg(&A[(long)(r0 + i) * K + k]) : 0.0f;
    {" ".join(b_loads)}
#pragma unroll
    for (int i = 0; i < TM; ++i)
#pragma unroll
      for (int j = 0; j < TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
  }}
"""
    tail = """#pragma unroll
  for (int i = 0; i < TM; ++i) {
    const int r = row0 + ty * TM + i;
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      const int c = col0 + tx * TN + j;
      if (r < M && c < N) C[(long)r * N + c] = acc[i][j];
    }
  }
}
"""
    return head + body + tail


def gemm_cuda_launch(M: int, N: int, cfg: dict) -> tuple[tuple[int, int, int], tuple[int, int, int], int]:
    bm, bn = int(cfg["BM"]), int(cfg["BN"])
    nt = (bm // int(cfg["TM"])) * (bn // int(cfg["TN"]))
    return ((N + bn - 1) // bn, (M + bm - 1) // bm, 1), (nt, 1, 1), 0
