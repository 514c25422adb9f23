/* Fused rbf kernel rows and outer sums for predict: exp(−γ‖a − b‖²) is never stored.
 *
 * kk_rbf_sums computes, for R ≤ KK_ROWS rows a_r of new points,
 *     out[r·k + c] = Σ_{j ∈ cluster c} w_j exp(−γ s_rj),   s_rj = ‖a_r‖² + ‖b_j‖² − 2 a_r·b_j,
 * with s = 0 below the rounding noise 4ε(‖a_r‖² + ‖b_j‖²) (as kernels.rbf_exponent does, so
 * K(x, x) = 1 exactly). The training points b_j are sorted by cluster (cluster c is
 * j ∈ [starts[c], starts[c+1])) and stored transposed, Bt[t·n + j] = b_j[t], so the dot
 * products vectorise over j; each row's sums are float64 and made in a fixed order (per
 * instruction set: the vector lanes are fixed), so results do not depend on the thread count.
 *
 * kk_rbf_replay adds to one row's outer sums the change made by moved points (Elkan's log
 * replayed for one point): each kernel value computed once (vectorised), then summed per
 * cluster in a fixed order.
 *
 * kk_exp: exp(x) for x ≤ 0 (the rbf exponent): x = n·ln2 + r, |r| ≤ ln2/2, exp(r) by its
 * degree-13 Taylor polynomial (truncation < 1e-17 relative), 2^n put into the exponent bits;
 * x < −708 gives 0 (below the smallest normal number). Written to vectorise: the function
 * is cloned for AVX-512, AVX2 and the baseline (GCC's target_clones, chosen at load time).
 */
#ifndef KKMEANS_RBF_SUMS_H
#define KKMEANS_RBF_SUMS_H
#include <stdint.h>
#include <string.h>
#include <float.h>
#include <stddef.h>

#define KK_ROWS 4

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define KK_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define KK_CLONES
#endif

static inline double kk_exp(double x)
{
    const double log2e = 1.4426950408889634, ln2_hi = 0.6931471803691238,
                 ln2_lo = 1.9082149292705877e-10, shifter = 6755399441055744.0; /* 1.5·2^52 */
    double t = x * log2e + shifter;
    double n = t - shifter;
    double r = (x - n * ln2_hi) - n * ln2_lo;
    double p = 1.0 / 6227020800.0;
    p = p * r + 1.0 / 479001600.0;
    p = p * r + 1.0 / 39916800.0;
    p = p * r + 1.0 / 3628800.0;
    p = p * r + 1.0 / 362880.0;
    p = p * r + 1.0 / 40320.0;
    p = p * r + 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    int64_t bits;
    memcpy(&bits, &t, sizeof bits);
    int64_t e = (bits + 1023) << 52;      /* low bits of t hold n */
    double scale;
    memcpy(&scale, &e, sizeof scale);
    return x < -708.0 ? 0.0 : p * scale;
}

/* exp(−γ s), s = ‖a‖² + ‖b‖² − 2 a·b from the squared norms sa, sb and the product dot, with
 * s = 0 below the rounding noise 4ε(‖a‖² + ‖b‖²) (so K(x, x) = 1 exactly). */
static inline double kk_rbf_value(double sa, double sb, double dot, double gamma)
{
    double na = sa + sb;
    double v = na - 2.0 * dot;
    v = v <= 4.0 * DBL_EPSILON * na ? 0.0 : v;
    return kk_exp(-gamma * v);
}

#define KK_REPLAY_PASSES 32

/* One row a (‖a‖² = sa) against the moved points j ∈ [j0, m): o[c·stride] (c < k) gets
 * Σ_{j: dst_j = c} w_j exp(−γ s_j) − Σ_{j: src_j = c} w_j exp(−γ s_j) added, in a fixed
 * order; buf holds m − j0 values. Elkan's replay of its log for a point stamped at j0. */
KK_CLONES
static void kk_rbf_replay(const double *a, ptrdiff_t d, double sa, const double *Bt,
                          const double *sq_b, const double *w, const int *src, const int *dst,
                          ptrdiff_t m, ptrdiff_t j0, double gamma, double *buf, double *o,
                          ptrdiff_t stride, ptrdiff_t k)
{
    ptrdiff_t t, j, c, len = m - j0;
    for (j = 0; j < len; j++)
        buf[j] = 0.0;
    for (t = 0; t < d; t++) {
        const double *bt = Bt + t * m + j0;
        double at = a[t];
        for (j = 0; j < len; j++)
            buf[j] += at * bt[j];
    }
#pragma omp simd
    for (j = 0; j < len; j++)
        buf[j] = w[j0 + j] * kk_rbf_value(sa, sq_b[j0 + j], buf[j], gamma);
    if (k > KK_REPLAY_PASSES) {
        for (j = 0; j < len; j++) {
            o[dst[j0 + j] * stride] += buf[j];
            o[src[j0 + j] * stride] -= buf[j];
        }
        return;
    }
    /* few clusters: one vectorised pass per cluster beats a scatter, whose read-modify-
       writes of the same k sums wait on each other */
    for (c = 0; c < k; c++) {
        double s = 0.0;
        const int *dj = dst + j0, *sj = src + j0;
#pragma omp simd reduction(+:s)
        for (j = 0; j < len; j++)
            s += buf[j] * (double)((dj[j] == c) - (sj[j] == c));
        o[c * stride] += s;
    }
}

KK_CLONES
static void kk_rbf_sums(const double *A, ptrdiff_t R, ptrdiff_t d, const double *sq_a,
                        const double *Bt, const double *sq_b, const double *w, ptrdiff_t n,
                        const ptrdiff_t *starts, ptrdiff_t k, double gamma, double *dots,
                        double *out)
{
    ptrdiff_t r, t, j, c;
    for (r = 0; r < R; r++)
        for (j = 0; j < n; j++)
            dots[r * n + j] = 0.0;
    for (t = 0; t < d; t++) {
        const double *bt = Bt + t * n;
        if (R == KK_ROWS) {
            double a0 = A[t], a1 = A[d + t], a2 = A[2 * d + t], a3 = A[3 * d + t];
            double *d0 = dots, *d1 = dots + n, *d2 = dots + 2 * n, *d3 = dots + 3 * n;
            for (j = 0; j < n; j++) {
                double b = bt[j];
                d0[j] += a0 * b;
                d1[j] += a1 * b;
                d2[j] += a2 * b;
                d3[j] += a3 * b;
            }
        } else {
            for (r = 0; r < R; r++) {
                double a = A[r * d + t];
                double *dr = dots + r * n;
                for (j = 0; j < n; j++)
                    dr[j] += a * bt[j];
            }
        }
    }
    for (r = 0; r < R; r++) {
        const double *dr = dots + r * n;
        double sa = sq_a[r];
        for (c = 0; c < k; c++) {
            double s = 0.0;
#pragma omp simd reduction(+:s)
            for (j = starts[c]; j < starts[c + 1]; j++)
                s += w[j] * kk_rbf_value(sa, sq_b[j], dr[j], gamma);
            out[r * k + c] = s;
        }
    }
}
#endif
