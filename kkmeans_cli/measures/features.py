"""The quality measures of a clustering under the kernel Φ Φᵀ of explicit features Φ (n×m,
e.g. Nyström's, ``kernels/nystroem.py``), never forming the n×n matrix: the silhouette from
kernel rows made in blocks (or on a stratified sample), the centre-based measures from the
cluster sums S = Σ w φ (F = S Φᵀ, C = S Sᵀ; O(n·m·k)). Same names and same silhouette rule as
``metrics.scores``."""
import numpy as np

from ..engine.feature_source import FeatureSpaceSource, sq_norms, times_rows_t
from ..engine.threads import effective_n_threads
from ..kernels.nystroem import features
from .. import memory
from . import _silhouette
from . import metrics as quality
from .metrics import (FeatureSums, SilhouetteScore, check_labels, check_weights, silhouette,
                      stacked, stratified_sample)


def silhouette_samples(Phi, labels, n_threads=1):
    """Exact silhouette of every point under the kernel Φ Φᵀ, rows of it made in blocks (never
    the n×n matrix): memory one block of rows."""
    n = Phi.shape[0]
    codes, counts = stacked([labels], n)
    diag = sq_norms(Phi)
    out = np.empty((1, n))
    step = max(1, memory.BLOCK_BYTES // (8 * n))
    for i0 in range(0, n, step):
        i1 = min(n, i0 + step)
        rows = times_rows_t(Phi[i0:i1], Phi, np.empty((i1 - i0, n)), n_threads)
        _silhouette.silhouette_rows(rows, i0, diag, codes, counts, out, n_threads)
    return out[0]


def silhouette_score(Phi, labels, *, max_exact=20_000, sample_size=10_000, random_state=0,
                     n_threads=1):
    """The silhouette under Φ Φᵀ: exact up to ``max_exact`` points (rows in blocks), else on
    the stratified sample of ``metrics.stratified_sample`` (an s×s matrix)."""
    n = Phi.shape[0]
    if max_exact is not None and n > max_exact:
        s = stratified_sample(labels, sample_size, random_state)
        sub = Phi[s]
        Ks = times_rows_t(sub, sub, np.empty((sub.shape[0], sub.shape[0])), n_threads)
        score = silhouette(Ks, np.asarray(labels)[s], n_threads)
        return SilhouetteScore(score=score, n_used=int(s.size), exact=s.size == n, indices=s)
    score = float(np.mean(silhouette_samples(Phi, labels, n_threads)))
    return SilhouetteScore(score=score, n_used=n, exact=True)


def feature_sums(Phi, labels, sample_weight=None, n_threads=1):
    """``metrics.FeatureSums`` under Φ Φᵀ: F = S Φᵀ, C = S Sᵀ (O(n·m·k), no n×n matrix)."""
    n = Phi.shape[0]
    codes, k = check_labels(labels, n, min_clusters=1)
    w = check_weights(sample_weight, n)
    src = FeatureSpaceSource(Phi, n_threads)
    F = np.empty((k, n))
    src.full_outer_sums(codes, w, F)
    C = src.S @ src.S.T
    C = 0.5 * (C + C.T)
    W = np.bincount(codes, weights=w, minlength=k)
    if np.any(W <= 0):
        raise ValueError("every cluster needs a point of positive sample_weight")
    return FeatureSums(diag=src.diag, weights=w, labels=codes, F=F, C=C, g=np.diagonal(C).copy(),
                       W=W, sizes=np.bincount(codes, minlength=k))


def scores(Phi, labels, metrics=("silhouette", "simplified_silhouette", "calinski_harabasz",
                                 "davies_bouldin"), sample_weight=None, n_threads=None, *,
           max_exact=20_000, sample_size=10_000, random_state=0):
    """``metrics.scores`` for the Nyström kernel Φ Φᵀ (same names, same silhouette rule)."""
    n_threads = effective_n_threads(n_threads)

    def silhouette():
        res = silhouette_score(Phi, labels, max_exact=max_exact, sample_size=sample_size,
                               random_state=random_state, n_threads=n_threads)
        return res.score, res.n_used, None

    return quality.scores_with(metrics, silhouette,
                               lambda: feature_sums(Phi, labels, sample_weight, n_threads))


def fit_silhouette(X, labels, landmarks, transform, kernel, *, max_exact=20_000,
                   sample_size=10_000, random_state=0, n_threads=None):
    """The silhouette of a Nyström clustering (``labels``) of its training data X under the
    Nyström kernel of the map (``landmarks``, ``transform``, resolved ``kernel``): exact up
    to ``max_exact`` points (features of all rows, kernel rows in blocks), else on the
    stratified sample of ``metrics.stratified_sample`` (features of the sample)."""
    n_threads = effective_n_threads(n_threads)
    n = labels.shape[0]
    X = np.ascontiguousarray(X, dtype=np.float64)

    def phi(rows):
        return features(rows, landmarks, transform, kernel, n_threads)

    if max_exact is not None and n > max_exact:
        s = stratified_sample(labels, sample_size, random_state)
        sub = phi(X[s])
        Ks = times_rows_t(sub, sub, np.empty((s.size, s.size)), n_threads)
        return SilhouetteScore(score=silhouette(Ks, labels[s], n_threads), n_used=int(s.size),
                               exact=s.size == n, indices=s)
    return silhouette_score(phi(X), labels, max_exact=None, n_threads=n_threads)
