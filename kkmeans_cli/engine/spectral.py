"""Spectral starts: k-means on the leading eigenvectors of the kernel.

The trace formulation of kernel k-means:
Weighted kernel k-means minimises Σ_i w_i K_ii − tr(Zᵀ W^½ K W^½ Z) over normalised
indicators Z, so its spectral relaxation is spanned by the leading eigenvectors of
M = W^½ K W^½ = V Λ Vᵀ. The rows of A = W^{-½} V_k Λ_k^½ (AAᵀ ≈ K; for unit weights this is
the factor VΛ^½) are clustered by a small seeded weighted k-means, and its labels start the
kernel iterations. Up to ``SPECTRAL_EXACT_MAX`` points M is decomposed exactly (Lanczos,
``scipy.sparse.linalg.eigsh`` with a seeded start vector; a full ``eigh`` for tiny n). Above
it, ``SPECTRAL_LANDMARKS`` seeded landmarks L are drawn and the Nyström features
A = K_{nL} W_L^½ U Λ^{-½} of the leading eigenpairs of W_L^½ K_LL W_L^½ = UΛUᵀ are used
(AAᵀ is the Nyström approximation of K on that subspace); only m rows of K are read.

The normalized spectral start embeds the degree-normalised kernel D⁻¹KD⁻¹ instead (the
normalized cut's relaxation, Ng-Jordan-Weiss style), which lands in the basin of
manifold-shaped optima (moons). The start mix of a fit is ``optima.start_kinds``.
"""
import warnings

import numpy as np

from .elkan import elkan
from .feature_source import FeatureSpaceSource
from .ncut import degrees
from .starts import kmeans_plusplus

SPECTRAL_EXACT_MAX = 3000     # exact Lanczos up to this many points, landmarks above
SPECTRAL_LANDMARKS = 1000     # landmarks of the large-n spectral start
SPECTRAL_EIGH_MAX = 400       # up to this a full eigh is quicker than Lanczos (and its import)
SPECTRAL_EIGH_FALLBACK = 1500  # full eigh when Lanczos fails, up to this many points
LANCZOS_MAXITER = 300
EMBEDDING_N_INIT = 10         # k-means runs in the embedding; the lowest inertia wins


def spectral_embedding(source, weights, n_clusters, rng):
    """Rows A (n×k, float64) with AAᵀ ≈ K in the weighted top-k eigenspace (module docstring).

    Parameters
    ----------
    source : kernel source (``diag``, ``rows(idx)``; ``K`` when held in memory)
    weights : ndarray, shape (n,)
    n_clusters : int
    rng : numpy Generator
        Seeds the Lanczos start vector and the landmarks.

    Returns
    -------
    A : ndarray of float64, shape (n, r), r ≤ k
    how : str
        'eigh', 'lanczos', 'landmarks(m)' or 'features' (an explicit feature space, e.g.
        Nyström, gives the embedding from its m×m eigenproblem: no n×n or landmark rows).
    """
    if source.explicit_features:
        return source.spectral_embedding(weights, n_clusters), "features"
    n = source.n
    k = min(n_clusters, n)
    s = np.sqrt(weights)
    if n <= SPECTRAL_EXACT_MAX:
        K = source.K if source.holds_matrix else source.rows(np.arange(n))
        lam, V = _top_eigenpairs(K, s, k, rng)
        how = "eigh" if n <= SPECTRAL_EIGH_MAX or k >= n - 1 else "lanczos"
        with np.errstate(divide="ignore"):
            inv_s = np.where(s > 0, 1.0 / s, 0.0)
        return inv_s[:, None] * V * np.sqrt(lam)[None, :], how
    positive = np.flatnonzero(weights > 0)
    m = min(SPECTRAL_LANDMARKS, positive.size)
    idx = np.sort(rng.choice(positive, size=m, replace=False))
    rows = source.rows(idx)                       # K_{L n}, m×n (K is symmetric)
    lam, U = _top_eigenpairs(rows[:, idx], s[idx], k, rng)
    keep = lam > lam.max() * 1e-10 if lam.size and lam.max() > 0 else np.zeros(lam.size, bool)
    proj = (s[idx][:, None] * U[:, keep]) / np.sqrt(lam[keep])[None, :]
    return rows.T @ proj, f"landmarks({m})"


def _top_eigenpairs(K, s, k, rng):
    """The k largest eigenpairs of diag(s) K diag(s) (eigenvalues clipped at 0), largest first.

    Lanczos may not converge on a nearly flat spectrum (a very narrow kernel, K ≈ I); then a
    full ``eigh`` is used up to ``SPECTRAL_EIGH_FALLBACK`` points, else ``SpectralFailed`` is
    raised (the caller starts with k-means++ instead: such a spectrum carries no clusters).
    """
    n = K.shape[0]
    if n <= SPECTRAL_EIGH_MAX or k >= n - 1:
        return _eigh_top(K, s, k)
    from scipy.sparse.linalg import ArpackNoConvergence, LinearOperator, eigsh

    def matvec(v):
        v = np.asarray(v, dtype=np.float64).reshape(-1)
        return s * (K @ (s * v))

    op = LinearOperator((n, n), matvec=matvec, dtype=np.float64)
    v0 = rng.uniform(0.5, 1.5, size=n)
    try:
        lam, V = eigsh(op, k=k, which="LA", v0=v0, tol=1e-8, maxiter=LANCZOS_MAXITER)
    except ArpackNoConvergence:
        if n > SPECTRAL_EIGH_FALLBACK:
            raise SpectralFailed("Lanczos did not converge") from None
        return _eigh_top(K, s, k)
    order = np.argsort(-lam, kind="stable")
    return np.maximum(lam[order], 0.0), V[:, order]


class SpectralFailed(Exception):
    """No spectral embedding could be computed (the start falls back to k-means++)."""


def _eigh_top(K, s, k):
    """Top-k eigenpairs of diag(s) K diag(s) by a full ``eigh``."""
    M = s[:, None] * np.asarray(K, dtype=np.float64) * s[None, :]
    lam, V = np.linalg.eigh(M)
    return np.maximum(lam[::-1][:k], 0.0), V[:, ::-1][:, :k]


def embedding_kmeans(A, weights, n_clusters, rng, n_init=EMBEDDING_N_INIT, max_iter=100,
                     n_threads=1):
    """Weighted k-means on the rows of A, best of ``n_init`` k-means++ starts by inertia: the
    engine itself on the explicit features A (``feature_source.FeatureSpaceSource``, Elkan's
    iterations), so a million-row embedding costs seconds, not minutes. Its warnings (a
    cluster refilled, max_iter reached) are about this inner problem, not the user's fit,
    and are not shown.

    Returns
    -------
    ndarray of int32, shape (n,)
    """
    source = FeatureSpaceSource(A, n_threads=n_threads)
    best = None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(n_init):
            start = kmeans_plusplus(source, weights, n_clusters, rng)[0]
            result = elkan(source, weights, start, n_clusters, max_iter=max_iter, tol=0,
                           n_threads=n_threads)
            if best is None or result.inertia < best.inertia:
                best = result
    return best.labels.astype(np.int32)


def normalized_embedding(source, weights, n_clusters, rng):
    """The spectral embedding of the degree-normalised kernel D⁻¹KD⁻¹ with weights w·d
    (d = K w, the normalized-cut relaxation, Ng-Jordan-Weiss style), or None when
    n > ``SPECTRAL_EXACT_MAX``, a degree is not positive, or the source is an explicit
    feature space (Nyström, which has its own ``spectral_embedding``).

    K is the matrix in memory, or for a kernel recomputed in blocks (``storage='blocked'``,
    the lazy route) its rows, the values the matrix would hold: every storage route gets
    the same start (n ≤ ``SPECTRAL_EXACT_MAX``, so at most 72 MB, as for
    :func:`spectral_embedding`).

    Returns (A, cluster weights w·d) or None.
    """
    n = source.n
    if n > SPECTRAL_EXACT_MAX or source.explicit_features:
        return None
    K = source.K if source.holds_matrix else source.rows(np.arange(n))
    d = degrees(K, weights)
    if not np.all((d > 0) & np.isfinite(d)):
        return None
    wd = weights * d
    lam, V = _top_eigenpairs(K, np.sqrt(weights / d), min(n_clusters, n), rng)
    with np.errstate(divide="ignore"):
        inv = np.where(wd > 0, 1.0 / np.sqrt(wd), 0.0)
    return inv[:, None] * V * np.sqrt(lam)[None, :], wd


class SpectralStarts:
    """Spectral starting labels; each eigendecomposition is made once per fit and reused by
    every spectral restart (each one reruns the embedding k-means with new draws).

    'spectral': the embedding of K itself (:func:`spectral_embedding`); 'normalized-spectral':
    that of D⁻¹KD⁻¹ (:func:`normalized_embedding`), which lands in the basin of manifold-shaped
    optima (moons) where the plain embedding's eigenvalues are nearly flat.
    """

    def __init__(self, n_threads=1):
        self.n_threads = n_threads
        self.embedding = None
        self.normalized = None
        self.how = None

    def labels(self, source, weights, n_clusters, rng, kind="spectral"):
        """Labels (int32), or None when a normalized start is not possible. BLAS stays on
        one thread (as set by ``fit``), so the result does not depend on ``n_threads``."""
        try:
            if kind == "normalized-spectral":
                if self.normalized is None:
                    self.normalized = normalized_embedding(source, weights, n_clusters,
                                                           rng) or ()
                if not self.normalized:
                    return None
                A, wd = self.normalized
                return embedding_kmeans(A, wd, n_clusters, rng, n_threads=self.n_threads)
            if self.embedding is None:
                self.embedding, self.how = spectral_embedding(source, weights, n_clusters,
                                                              rng)
        except SpectralFailed:
            if kind == "normalized-spectral":
                self.normalized = ()
                return None
            self.embedding, self.how = np.empty((0, 0)), "failed"
        if self.embedding.shape[1] == 0 or not np.all(np.isfinite(self.embedding)):
            return None
        return embedding_kmeans(self.embedding, weights, n_clusters, rng,
                                n_threads=self.n_threads)
