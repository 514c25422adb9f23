"""Starting labels for kernel k-means: k-means++ and random centres, in feature space.

Centres start as single training points. The squared feature-space distance of point x to the
point c is D²(x, c) = K_xx − 2 K_xc + K_cc, read from row c of K (K is symmetric). Each point
starts in the cluster of its nearest centre, ties to the lowest centre.
"""
import numpy as np


def _sq_dist_to_points(source, idx):
    """D²(x, c) for every x and every c in idx, shape (len(idx), n), clamped at 0."""
    idx = np.asarray(idx)
    rows = source.rows(idx)
    d2 = source.diag[None, :] - 2.0 * rows + source.diag[idx][:, None]
    np.maximum(d2, 0.0, out=d2)
    return d2


def kmeans_plusplus(source, weights, n_clusters, rng, n_local_trials=None):
    """Greedy k-means++ in feature space (as scikit-learn's ``_kmeans_plusplus``).

    The first centre is drawn with probability ∝ w; each next one from 2 + ⌊ln k⌋ candidates
    drawn with probability ∝ w·D²(x), keeping the candidate that lowers the potential
    Σ w·min D² most.

    Returns
    -------
    labels : ndarray of int32, shape (n,)
        Each point's nearest centre.
    centres : ndarray of intp, shape (k,)
        Indices of the points chosen as centres.
    """
    n = source.n
    if n_local_trials is None:
        n_local_trials = 2 + int(np.log(n_clusters))
    centres = np.empty(n_clusters, dtype=np.intp)
    labels = np.zeros(n, dtype=np.int32)
    centres[0] = rng.choice(n, p=weights / weights.sum())
    closest = _sq_dist_to_points(source, centres[:1])[0]
    potential = float(closest @ weights)
    for c in range(1, n_clusters):
        draws = rng.uniform(size=n_local_trials) * potential
        candidates = np.searchsorted(np.cumsum(weights * closest), draws)
        np.minimum(candidates, n - 1, out=candidates)
        d2 = _sq_dist_to_points(source, candidates)
        pots = np.minimum(closest[None, :], d2) @ weights
        best = int(np.argmin(pots))
        centres[c] = candidates[best]
        closer = d2[best] < closest
        labels[closer] = c
        closest = np.where(closer, d2[best], closest)
        potential = float(pots[best])
    return labels, centres


def random_centres(source, weights, n_clusters, rng):
    """k distinct points with positive weight, uniformly, as centres; labels by nearest."""
    candidates = np.flatnonzero(weights > 0)
    centres = np.sort(rng.choice(candidates, size=n_clusters, replace=False))
    d2 = _sq_dist_to_points(source, centres)
    labels = np.argmin(d2, axis=0).astype(np.int32)
    return labels, centres
