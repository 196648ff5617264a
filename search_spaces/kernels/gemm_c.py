"""C code for gemm (C = A.B, fp32, row-major), BLIS-like.

Three cache-block levels (NC over columns of B, KC over the shared dimension, MC over
rows of A); B's KC x NC block is packed into NR-wide panels, A's MC x KC block into
MR-tall panels (zero-padded at the edges, so any M, N, K works); an MR x NR register
micro-kernel (MR rows x NV vectors of VW floats) written either with gcc vector
extensions or with AVX2/AVX-512 FMA intrinsics; OpenMP over the MC loop.
Every value spliced into the text is a validated integer or enumerated choice.
"""

from __future__ import annotations

HEADER = """#include <stdlib.h>
#include <string.h>
#include <immintrin.h>
#include <omp.h>
"""


def _vec_types(vw: int) -> str:
    return (f"typedef float vf __attribute__((vector_size({vw * 4}), aligned({vw * 4})));\n"
            f"typedef float vfu __attribute__((vector_size({vw * 4}), aligned(4), may_alias));\n")


def _microkernel(mr: int, nv: int, vw: int, simd: str, unroll: int) -> str:
    nr = nv * vw
    lines = [("static inline __attribute__((always_inline)) void ukernel(long kc, const float *restrict a, "
              "const float *restrict b, float *restrict c, long ldc, int first) {")]
    if simd == "intrin":
        t, p = ("__m512", "_mm512") if vw == 16 else ("__m256", "_mm256")
        for i in range(mr):
            lines.append("  " + " ".join(f"{t} c{i}_{j} = {p}_setzero_ps();" for j in range(nv)))
        lines.append(f"  #pragma GCC unroll {unroll}")
        lines.append("  for (long p = 0; p < kc; ++p) {")
        for j in range(nv):
            lines.append(f"    {t} b{j} = {p}_load_ps(b + p * {nr} + {j * vw});")
        for i in range(mr):
            lines.append(f"    {{ {t} ai = {p}_set1_ps(a[p * {mr} + {i}]); "
                         + " ".join(f"c{i}_{j} = {p}_fmadd_ps(ai, b{j}, c{i}_{j});" for j in range(nv)) + " }")
        lines.append("  }")
        for i in range(mr):
            for j in range(nv):
                ptr = f"c + {i} * ldc + {j * vw}"
                lines.append(f"  if (first) {p}_storeu_ps({ptr}, c{i}_{j}); "
                             f"else {p}_storeu_ps({ptr}, {p}_add_ps({p}_loadu_ps({ptr}), c{i}_{j}));")
    else:
        for i in range(mr):
            lines.append("  " + " ".join(f"vf c{i}_{j} = {{0}};" for j in range(nv)))
        lines.append(f"  #pragma GCC unroll {unroll}")
        lines.append("  for (long p = 0; p < kc; ++p) {")
        for j in range(nv):
            lines.append(f"    vf b{j} = *(const vf *)(b + p * {nr} + {j * vw});")
        for i in range(mr):
            lines.append(f"    {{ float ai = a[p * {mr} + {i}]; "
                         + " ".join(f"c{i}_{j} += ai * b{j};" for j in range(nv)) + " }")
        lines.append("  }")
        for i in range(mr):
            for j in range(nv):
                ptr = f"(vfu *)(c + {i} * ldc + {j * vw})"
                lines.append(f"  if (first) *{ptr} = c{i}_{j}; else *{ptr} += c{i}_{j};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def gemm_c_source(M: int, N: int, K: int, cfg: dict) -> str:
    mr, nv, vw = int(cfg["MR"]), int(cfg["NV"]), int(cfg["VW"])
    nr = nv * vw
    mc, nc, kc = int(cfg["MC"]), int(cfg["NC"]), int(cfg["KC"])
    threads, unroll = int(cfg["threads"]), int(cfg["unroll"])
    simd, order = str(cfg["simd"]), str(cfg["loop_order"])
    assert simd in ("vecext", "intrin") and order in ("jr_ir", "ir_jr")
    nc_pad = (min(nc, N) + nr - 1) // nr * nr
    mc_pad = (min(mc, M) + mr - 1) // mr * mr
    omp = f"#pragma omp parallel for num_threads({threads}) schedule(static)" if threads > 1 else ""
    omp_dyn = f"#pragma omp parallel for num_threads({threads}) schedule(dynamic, 1)" if threads > 1 else ""
    if order == "jr_ir":
        loops = (f"      for (long jr = 0; jr < nc; jr += {nr}) {{\n"
                 f"        for (long ir = 0; ir < mc; ir += {mr}) {{\n")
    else:
        loops = (f"      for (long ir = 0; ir < mc; ir += {mr}) {{\n"
                 f"        for (long jr = 0; jr < nc; jr += {nr}) {{\n")
    return HEADER + _vec_types(vw) + f"""
#define M {M}L
#define N {N}L
#define K {K}L
#define MR {mr}L
#define NR {nr}L
#define MC {mc}L
#define NC {nc}L
#define KC {kc}L
""" + _microkernel(mr, nv, vw, simd, unroll) + f"""
static void pack_b(const float *restrict B, float *restrict bp, long pc, long kc, long jc, long nc) {{
  {omp}
  for (long jr = 0; jr < nc; jr += NR) {{
    float *dst = bp + jr * kc;
    long nr = nc - jr < NR ? nc - jr : NR;
    for (long p = 0; p < kc; ++p) {{
      const float *src = B + (pc + p) * N + jc + jr;
      if (nr == NR) {{ for (long j = 0; j < NR; ++j) dst[p * NR + j] = src[j]; }}
      else {{ for (long j = 0; j < NR; ++j) dst[p * NR + j] = j < nr ? src[j] : 0.0f; }}
    }}
  }}
}}

static void pack_a(const float *restrict A, float *restrict ap, long ic, long mc, long pc, long kc) {{
  for (long ir = 0; ir < mc; ir += MR) {{
    float *dst = ap + ir * kc;
    long mr = mc - ir < MR ? mc - ir : MR;
    for (long i = 0; i < MR; ++i) {{
      if (i < mr) {{ const float *src = A + (ic + ir + i) * K + pc; for (long p = 0; p < kc; ++p) dst[p * MR + i] = src[p]; }}
      else {{ for (long p = 0; p < kc; ++p) dst[p * MR + i] = 0.0f; }}
    }}
  }}
}}

void kernel(const float *restrict A, const float *restrict B, float *restrict C) {{
  float *bp = aligned_alloc(64, sizeof(float) * {nc_pad} * KC);
  float *ap_all = aligned_alloc(64, sizeof(float) * {mc_pad} * KC * {threads});
  for (long jc = 0; jc < N; jc += NC) {{
    long nc = N - jc < NC ? N - jc : NC;
    for (long pc = 0; pc < K; pc += KC) {{
      long kc = K - pc < KC ? K - pc : KC;
      int first = pc == 0;
      pack_b(B, bp, pc, kc, jc, nc);
      {omp_dyn}
      for (long ic = 0; ic < M; ic += MC) {{
        long mc = M - ic < MC ? M - ic : MC;
        float *ap = ap_all + {mc_pad} * KC * {"omp_get_thread_num()" if threads > 1 else "0"};
        pack_a(A, ap, ic, mc, pc, kc);
{loops}          float *c = C + (ic + ir) * N + jc + jr;
          const float *a = ap + ir * kc, *b = bp + jr * kc;
          if (mc - ir >= MR && nc - jr >= NR) {{
            ukernel(kc, a, b, c, N, first);
          }} else {{
            float tmp[MR * NR] __attribute__((aligned(64)));
            ukernel(kc, a, b, tmp, NR, 1);
            long mr = mc - ir < MR ? mc - ir : MR, nr = nc - jr < NR ? nc - jr : NR;
            for (long i = 0; i < mr; ++i)
              for (long j = 0; j < nr; ++j)
                c[i * N + j] = first ? tmp[i * NR + j] : c[i * N + j] + tmp[i * NR + j];
          }}
        }}
      }}
      }}
    }}
  }}
  free(ap_all);
  free(bp);
}}
"""
