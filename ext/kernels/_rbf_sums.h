/* Fused rbf kernel rows and outer sums for predict: exp(−γ‖a − b‖²) is never stored.
 *
 * kk_rbf_sums computes, for R ≤ KK_ROWS rows a_r of new points,
 *     out[r·k + c] = Σ_{j ∈ cluster c} w_j exp(−γ s_rj),   s_rj = ‖a_r‖² + ‖b_j‖² − 2 a_r·b_j,
 * with s = 0 below the rounding noise 4ε(‖a_r‖² + ‖b_j‖²) (as kernels.rbf_exponent does, so
 * K(x, x) = 1 exactly). The training points b_j are sorted by cluster (cluster c is
 * j ∈ [starts[c], starts[c+1])) and stored transposed, Bt[t·n + j] = b_j[t], so the dot
 * products vectorise over j, in tiles of KK_TILE points whose products stay in L1 (a whole
 * row of products was 25% slower: it went to L2 once per feature); each row's sums are
 * float64 and made in a fixed order (per instruction set: the vector lanes are fixed), so
 * results do not depend on the thread count.
 *
 * kk_rbf_replay adds to the outer sums of up to KK_ROWS rows the change made by moved points
 * (Elkan's log replayed for points stamped alike): each kernel value computed once
 * (vectorised), then summed per cluster in a fixed order.
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

#define KK_TILE 512

/* The buffer of products aliases no input: without the promise GCC versions the loops on a
 * runtime overlap test, and the two versions round differently (FMA contraction), so a sum
 * depended on where the heap had put the buffer, from run to run and between thread counts
 * (-ffp-contract=off made the results stable too; this keeps the FMAs). */
#if defined(__GNUC__) || defined(__clang__) || defined(_MSC_VER)
#define KK_RESTRICT __restrict
#else
#define KK_RESTRICT
#endif

#define KK_SCATTER_ABOVE 32

/* d·a_r·b_j for R ≤ KK_ROWS rows a_r (row-major, d columns) and the moved or training points
 * j ∈ [j0, j0 + len) of Bt (transposed, row length ld): dots[r·KK_TILE + j − j0]. */
static inline void kk_dots(const double *A, ptrdiff_t R, ptrdiff_t d,
                           const double *KK_RESTRICT Bt, ptrdiff_t ld, ptrdiff_t j0,
                           ptrdiff_t len, double *KK_RESTRICT dots)
{
    ptrdiff_t r, t, j;
    if (R == KK_ROWS) {
        double *KK_RESTRICT d0 = dots, *KK_RESTRICT d1 = dots + KK_TILE,
               *KK_RESTRICT d2 = dots + 2 * KK_TILE, *KK_RESTRICT d3 = dots + 3 * KK_TILE;
        const double *KK_RESTRICT bt = Bt + j0;
        double a0 = A[0], a1 = A[d], a2 = A[2 * d], a3 = A[3 * d];
        for (j = 0; j < len; j++) {
            double b = bt[j];
            d0[j] = a0 * b;
            d1[j] = a1 * b;
            d2[j] = a2 * b;
            d3[j] = a3 * b;
        }
        for (t = 1; t < d; t++) {
            bt = Bt + t * ld + j0;
            a0 = A[t], a1 = A[d + t], a2 = A[2 * d + t], a3 = A[3 * d + t];
            for (j = 0; j < len; j++) {
                double b = bt[j];
                d0[j] += a0 * b;
                d1[j] += a1 * b;
                d2[j] += a2 * b;
                d3[j] += a3 * b;
            }
        }
        return;
    }
    for (r = 0; r < R; r++) {
        double *KK_RESTRICT dr = dots + r * KK_TILE;
        const double *KK_RESTRICT bt = Bt + j0;
        double a = A[r * d];
        for (j = 0; j < len; j++)
            dr[j] = a * bt[j];
        for (t = 1; t < d; t++) {
            bt = Bt + t * ld + j0;
            a = A[r * d + t];
            for (j = 0; j < len; j++)
                dr[j] += a * bt[j];
        }
    }
}

/* R ≤ KK_ROWS rows a_r that share the log suffix [j0, m) of moved points (Elkan's replay
 * for points stamped at j0): o[r][c·stride] gets Σ_j exp(−γ s_rj)·coef[c·m + j] added, where
 * coef[c·m + j] = w_j([dst_j = c] − [src_j = c]); above KK_SCATTER_ABOVE clusters the values
 * are scattered to dst_j and src_j instead (coef unused). Tiles of KK_TILE moves keep the
 * values in L1; each row's sums are made in a fixed order. dots: KK_ROWS·KK_TILE doubles;
 * zero: KK_TILE zeros (the coefficients of the padding clusters). */
KK_CLONES
static void kk_rbf_replay(const double *A, ptrdiff_t R, ptrdiff_t d, const double *sq_a,
                          const double *Bt, const double *sq_b, const double *coef,
                          const double *w, const int *src, const int *dst, ptrdiff_t m,
                          ptrdiff_t j0, double gamma, double *dots, const double *zero,
                          double *const *o, ptrdiff_t stride, ptrdiff_t k)
{
    ptrdiff_t r, j, c, t0, t1;
    for (t0 = j0; t0 < m; t0 = t1) {
        ptrdiff_t len;
        t1 = t0 + KK_TILE < m ? t0 + KK_TILE : m;
        len = t1 - t0;
        kk_dots(A, R, d, Bt, m, t0, len, dots);
        for (r = 0; r < R; r++) {
            double *KK_RESTRICT dr = dots + r * KK_TILE;
            const double *KK_RESTRICT sb = sq_b + t0;
            double sa = sq_a[r];
#pragma omp simd
            for (j = 0; j < len; j++)
                dr[j] = kk_rbf_value(sa, sb[j], dr[j], gamma);
            if (k > KK_SCATTER_ABOVE)
                for (j = 0; j < len; j++) {
                    double v = w[t0 + j] * dr[j];
                    o[r][dst[t0 + j] * stride] += v;
                    o[r][src[t0 + j] * stride] -= v;
                }
        }
        if (k > KK_SCATTER_ABOVE)
            continue;
        /* few clusters: vectorised passes, 4 clusters each, beat a scatter, whose
           read-modify-writes of the same k sums wait on each other */
        for (c = 0; c < k; c += 4) {
            const double *c0 = coef + c * m + t0;
            const double *c1 = c + 1 < k ? c0 + m : zero, *c2 = c + 2 < k ? c0 + 2 * m : zero,
                         *c3 = c + 3 < k ? c0 + 3 * m : zero;
            for (r = 0; r < R; r++) {
                const double *dr = dots + r * KK_TILE;
                double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
#pragma omp simd reduction(+:s0, s1, s2, s3)
                for (j = 0; j < len; j++) {
                    double v = dr[j];
                    s0 += v * c0[j];
                    s1 += v * c1[j];
                    s2 += v * c2[j];
                    s3 += v * c3[j];
                }
                o[r][c * stride] += s0;
                if (c + 1 < k)
                    o[r][(c + 1) * stride] += s1;
                if (c + 2 < k)
                    o[r][(c + 2) * stride] += s2;
                if (c + 3 < k)
                    o[r][(c + 3) * stride] += s3;
            }
        }
    }
}

/* out[r·k + c] = Σ_{j ∈ cluster c} w_j exp(−γ s_rj) for R ≤ KK_ROWS rows, the training points
 * sorted by cluster; tiles of KK_TILE points keep the products in L1, each row's sums are made
 * in a fixed order. dots: KK_ROWS·KK_TILE doubles. */
KK_CLONES
static void kk_rbf_sums(const double *A, ptrdiff_t R, ptrdiff_t d, const double *sq_a,
                        const double *Bt, const double *sq_b, const double *w, ptrdiff_t n,
                        const ptrdiff_t *starts, ptrdiff_t k, double gamma, double *dots,
                        double *out)
{
    ptrdiff_t r, j, c, t0, t1;
    for (r = 0; r < R * k; r++)
        out[r] = 0.0;
    for (c = 0; c < k; c++)
        for (t0 = starts[c]; t0 < starts[c + 1]; t0 = t1) {
            ptrdiff_t len;
            t1 = t0 + KK_TILE < starts[c + 1] ? t0 + KK_TILE : starts[c + 1];
            len = t1 - t0;
            kk_dots(A, R, d, Bt, n, t0, len, dots);
            for (r = 0; r < R; r++) {
                const double *KK_RESTRICT dr = dots + r * KK_TILE,
                             *KK_RESTRICT sb = sq_b + t0, *KK_RESTRICT wj = w + t0;
                double sa = sq_a[r], s = 0.0;
#pragma omp simd reduction(+:s)
                for (j = 0; j < len; j++)
                    s += wj[j] * kk_rbf_value(sa, sb[j], dr[j], gamma);
                out[r * k + c] += s;
            }
        }
}
#endif
