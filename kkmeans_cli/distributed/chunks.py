"""The per-chunk functions the Dask workers run (pure NumPy; no Dask imported here).

A chunk's features come from a *source*: ``("phi", Φ)`` (features persisted on the worker),
``("x", X)`` (the rows held, features recomputed) or ``("read", reader, i0, i1)`` (nothing
held: the rows are read from the file and the features recomputed, for data larger than the
workers' memory). ``ctx`` is the :class:`FeatureMap` (landmarks, transform, kernel), sent to
every worker once.

Every function returns small summaries for the client (k × m partial sums, k weights, scalars)
and, where the next pass needs them, per-point arrays that stay on the worker (labels,
distances, k-means++ potentials). The client adds the summaries in chunk order.
"""
from dataclasses import dataclass

import numpy as np

from ..nystroem import features


@dataclass
class FeatureMap:
    """φ(x) = K(x, L) T: the landmarks L (m × d), the transform T (m × m), the kernel."""

    landmarks: np.ndarray
    transform: np.ndarray
    kernel: object

    def __call__(self, X):
        from .._threads import blas_threads

        with blas_threads(1):
            return features(X, self.landmarks, self.transform, self.kernel, n_threads=1)


def rows_of(src):
    """The data rows of a source (read from the file when not held)."""
    if src[0] == "x":
        return src[1]
    if src[0] == "read":
        _, reader, i0, i1 = src
        return reader.rows(i0, i1)
    raise ValueError("this chunk holds features, not rows")


def phi_of(src, fmap):
    """The features Φ of a chunk (computed unless persisted)."""
    if src[0] == "phi":
        return src[1]
    return fmap(rows_of(src))


def persist_features(src, fmap):
    """``("phi", Φ)``: the features of a chunk, to be held on the worker."""
    return ("phi", phi_of(src, fmap))


def hold_rows(src):
    """``("x", X)``: the rows of a chunk, held on the worker (features recomputed per pass)."""
    return ("x", np.ascontiguousarray(rows_of(src), dtype=np.float64))


def n_rows(src):
    return int(src[1].shape[0]) if src[0] in ("phi", "x") else int(src[3] - src[2])


def _sq_norms(A):
    return np.einsum("ij,ij->i", A, A)


def take_rows(src, local):
    """Data rows ``local`` (indices within the chunk) of a source."""
    return np.ascontiguousarray(rows_of(src)[np.asarray(local, dtype=np.intp)])


def take_features(src, fmap, local):
    """Feature rows ``local`` (indices within the chunk)."""
    return np.ascontiguousarray(phi_of(src, fmap)[np.asarray(local, dtype=np.intp)])


def moments(src):
    """(rows, Σx, Σ(x − mean)²) of a chunk over all its entries, for a variance (Chan's
    parallel update on the client)."""
    X = rows_of(src)
    mean = float(X.mean())
    return X.size, float(X.sum()), float(((X - mean) ** 2).sum())


def _weights(w, n):
    return np.ones(n) if w is None else w


# -- k-means++ (as ``initialization.kmeans_plusplus``, the sums split by chunk) --------------
def kpp_first(src, fmap, w, centre):
    """D² of every point to the first centre (m-vector of features); returns
    (closest, labels) kept on the worker."""
    Phi = phi_of(src, fmap)
    c = np.asarray(centre, dtype=np.float64)[None, :]
    d2 = _sq_norms(Phi) - 2.0 * (c @ Phi.T)[0] + _sq_norms(c)[0]
    np.maximum(d2, 0.0, out=d2)
    return d2, np.zeros(Phi.shape[0], dtype=np.int32)


def kpp_mass(state, w):
    """(Σ w·closest, the last entry of its running sum) of a chunk."""
    closest = state[0]
    wc = _weights(w, closest.shape[0]) * closest
    return float(wc @ np.ones(wc.shape[0])), float(np.cumsum(wc)[-1])


def kpp_locate(state, w, offset, draws):
    """Indices within the chunk of ``draws`` on the running sum of w·closest started at
    ``offset`` (``np.searchsorted`` as on the whole data)."""
    closest = state[0]
    cs = np.cumsum(np.concatenate([[offset], _weights(w, closest.shape[0]) * closest]))[1:]
    return np.searchsorted(cs, np.asarray(draws, dtype=np.float64))


def kpp_locate_rows(src, fmap, state, w, offset, draws):
    """:func:`kpp_locate` and the feature rows of the points found."""
    local = kpp_locate(state, w, offset, draws)
    local = np.minimum(local, state[0].shape[0] - 1)
    return local, np.ascontiguousarray(phi_of(src, fmap)[local])


def kpp_candidates(src, fmap, state, w, cand):
    """D² of the chunk to each candidate (t × m features) and each candidate's partial
    potential Σ w·min(closest, D²). Returns (potentials, d2); d2 stays on the worker."""
    Phi = phi_of(src, fmap)
    cand = np.asarray(cand, dtype=np.float64)
    d2 = _sq_norms(Phi)[None, :] - 2.0 * (cand @ Phi.T) + _sq_norms(cand)[:, None]
    np.maximum(d2, 0.0, out=d2)
    closest = state[0]
    pots = np.minimum(closest[None, :], d2) @ _weights(w, closest.shape[0])
    return pots, d2


def kpp_update(state, cands, best, c):
    """Points closer to the chosen candidate ``best`` join cluster c."""
    closest, labels = state
    d2 = cands[1][best]
    closer = d2 < closest
    labels = labels.copy()
    labels[closer] = c
    return np.where(closer, d2, closest), labels


def first_of(pair):
    return pair[0]


def labels_of(state):
    return state[1]


def random_labels(src, fmap, centres):
    """Labels of the nearest of the given centres (k × m features), ties to the lowest."""
    Phi = phi_of(src, fmap)
    C = np.asarray(centres, dtype=np.float64)
    d2 = _sq_norms(Phi)[None, :] - 2.0 * (C @ Phi.T) + _sq_norms(C)[:, None]
    np.maximum(d2, 0.0, out=d2)
    return np.argmin(d2, axis=0).astype(np.int32)


# -- Lloyd ---------------------------------------------------------------------------------
def cluster_sums(Phi, labels, w, k):
    """S[c] = Σ_{i∈c} w_i φ_i (k × m) and W_c, of one chunk."""
    from scipy import sparse

    n = Phi.shape[0]
    A = sparse.csr_matrix((_weights(w, n), (np.asarray(labels), np.arange(n))), shape=(k, n))
    W = np.bincount(labels, weights=_weights(w, n), minlength=k)
    return np.asarray(A @ Phi), W


def sums(src, fmap, labels, w, k):
    """(S, W, Σ w‖φ‖²) of a chunk for given labels."""
    Phi = phi_of(src, fmap)
    S, W = cluster_sums(Phi, labels_of_pair(labels), w, k)
    return S, W, float(_weights(w, Phi.shape[0]) @ _sq_norms(Phi))


def assign(src, fmap, S, g, W, labels_old, w):
    """One Lloyd assignment of a chunk, as ``lloyd.lloyd`` on the whole data: the outer sums
    F = S Φᵀ of the cluster sums S (k × m), then ``_lloyd.assign`` with the inner sums g and
    weights W (d(i, c) = ‖φ_i‖² − 2 F[c, i]/W_c + g_c/W_c², empty clusters skipped, ties to the
    lowest cluster).

    Returns (labels, distances, summary), kept on the worker; the client fetches the summary
    (S, W, Σ w‖φ‖², moved, Σ w·d) of the new labels.
    ``labels_old`` may be such a triple (the previous pass's).
    """
    from .. import _lloyd

    Phi = phi_of(src, fmap)
    n, k = Phi.shape[0], S.shape[0]
    diag = _sq_norms(Phi)
    F = S @ Phi.T
    labels = np.empty(n, dtype=np.int32)
    dist = np.empty(n)
    _lloyd.assign(F, g, W, diag, labels, dist, 1)
    ww = _weights(w, n)
    S_new, W_new = cluster_sums(Phi, labels, w, k)
    moved = int(np.count_nonzero(labels != labels_of_pair(labels_old)))
    return labels, dist, (S_new, W_new, float(ww @ diag), moved, float(ww @ dist))


def farthest(state, w, count):
    """Up to ``count`` points of positive weight by decreasing distance (ties by index):
    (local indices, distances, labels), for refilling empty clusters."""
    labels, dist = state[0], state[1]
    ww = _weights(w, labels.shape[0])
    order = np.argsort(-dist, kind="stable")
    order = order[ww[order] > 0][:count]
    return order, dist[order], labels[order]


def relabel(state, local, new):
    """Labels with ``labels[local] = new`` (empty clusters refilled)."""
    labels, dist = state[0], state[1]
    labels = labels.copy()
    labels[np.asarray(local, dtype=np.intp)] = new
    return labels, dist


def member_counts(state, w, k):
    labels = state[0]
    return np.bincount(labels[_weights(w, labels.shape[0]) > 0], minlength=k)


def nearest(src, fmap, model):
    """Labels (int32) of a chunk's rows: ``nystroem.nearest`` of the model (a namespace with
    the fitted attributes it reads), the same code as a predict in one process."""
    from ..nystroem import nearest as nystroem_nearest

    labels, _ = nystroem_nearest(model, rows_of(src), want_distances=False)
    return labels.astype(np.int32)


def shape_of(src):
    return tuple(src[1].shape)


def labels_of_pair(state):
    """The labels of a chunk: an array, or the first item of a pass's result."""
    return state[0] if isinstance(state, tuple) else state


def summary_of(state):
    return state[2]


def count_moved(a, b):
    return int(np.count_nonzero(labels_of_pair(a) != labels_of_pair(b)))


def own_distances(src, fmap, S, g, W, labels, w):
    """Σ w·d(i, own centre) of a chunk (``lloyd.own_distances``: clamped at 0)."""
    from ..lloyd import own_distances as lloyd_own

    Phi = phi_of(src, fmap)
    labels = labels_of_pair(labels)
    F_own = np.einsum("ij,ij->i", Phi, S[labels])
    d = lloyd_own(_sq_norms(Phi), F_own, labels, g, W)
    return float(_weights(w, Phi.shape[0]) @ d)
