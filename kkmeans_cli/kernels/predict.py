"""Predictions of an exact model: the nearest centre of new points from their kernel rows
against the training points, never the training kernel matrix.

d(x, c) = K(x, x) − 2 F[c, x]/W_c + g_c/W_c² with F[c, x] = Σ_{j∈c} w_j K(x, x_j) over the
training points in row blocks (or fused with the kernel values for rbf,
``Kernel.fused_outer_sums``), and the stored inner sums g_c and cluster weights W_c. The rows
are changed as the training kernel was (the PSD repair, ``psd.transform_rows``; the
normalized cut, ``engine.ncut.ncut_rows``), so ``predict(X_fit) == labels_``. Everything a
prediction needs is one :class:`ExactModel` record and the call's arguments: nothing is
written, so one model may serve several threads at once.
"""
from dataclasses import dataclass

import numpy as np

from ..engine import _lloyd
from ..engine.ncut import ncut_rows
from ..engine.threads import blas_threads
from .functions import check_range
from .psd import PRECOMPUTED, transform_rows


@dataclass(frozen=True)
class ExactModel:
    """What predicting with a fitted exact model needs.

    ``kernel`` (resolved), ``X_fit`` (the training rows; None for a precomputed kernel),
    ``labels`` (int32), ``sample_weight``, ``inner_sums``, ``cluster_weights``, ``n_features``,
    ``dtype`` (the storage type of the kernel values), ``psd`` (``psd.PSDState`` or None),
    ``ncut`` (``engine.records.NcutState``, None for the objective 'kmeans').
    """

    kernel: object
    X_fit: object
    labels: object
    sample_weight: object
    inner_sums: object
    cluster_weights: object
    n_features: int
    dtype: object
    psd: object = None
    ncut: object = None


def transform_new_rows(model, Kb, diag, X_rows):
    """Kernel rows K(new, train) and K(new, new) (``diag``, None when unknown) of the points
    ``X_rows`` (rows of the kernel matrix itself for a precomputed kernel), changed as the
    training kernel was (the PSD repair, the normalized cut). Returns Kb, diag."""
    Kb, diag = transform_rows(Kb, diag, model.psd, model.kernel.name,
                              X_new=X_rows if model.X_fit is not None else None,
                              X_fit=model.X_fit)
    if model.ncut is not None:
        Kb, diag = ncut_rows(model.ncut, Kb, diag)
    return Kb, diag


def nearest(model, X, kernel_diag, want_distances, n_threads=1):
    """Labels (intp) of the nearest centre of each row of X, and the squared distances to
    every centre when ``want_distances`` (else None). For a precomputed kernel X holds the
    kernel rows K(new, train) and ``kernel_diag`` K(new, new), needed for the distances
    only."""
    name = model.kernel.name
    n_fit = model.labels.shape[0]
    expected = n_fit if name in PRECOMPUTED else model.n_features
    if X.shape[1] != expected:
        what = {"precomputed": "kernel column", "precomputed-distance": "distance column"
                }.get(name, "feature")
        raise ValueError(f"X has {X.shape[1]} {what}{'s' * (X.shape[1] != 1)}, the model "
                         f"expects {expected}")
    # Kernel values of new rows against the training points, summed over them.
    check_range(name, X, max(n_fit, float(np.sum(model.sample_weight))),
                kernel=model.kernel, offset=model.kernel.offset)
    g, W = model.inner_sums, model.cluster_weights
    k = W.shape[0]
    labels = np.empty(X.shape[0], dtype=np.int32)
    dist = np.empty((X.shape[0], k)) if want_distances else None
    row_dist = np.empty(X.shape[0])
    with blas_threads(1):
        F = _fused_outer_sums(model, X, n_threads)
        if F is not None:   # the kernel values never stored (rbf; Kernel.fused_outer_sums)
            diag = model.kernel.diag(X)
            _lloyd.assign(F, g, W, diag, labels, row_dist, n_threads)
            if want_distances:
                _lloyd.distances(F, g, W, diag, dist, n_threads)
            return labels.astype(np.intp), dist
        for i0, i1, Kb, diag in _kernel_row_blocks(model, X, kernel_diag, n_threads):
            F = np.empty((k, i1 - i0))
            _lloyd.outer_sums_rows(Kb, 0, model.labels, model.sample_weight, F, n_threads)
            if diag is None:
                # K(x, x) unknown: the labels do not need it, the distances would.
                lin = np.where(W > 0, -2.0 / W, 0)
                shift = np.where(W > 0, g / W ** 2, np.inf)
                rel = lin[:, None] * F + shift[:, None]
                labels[i0:i1] = np.argmin(rel, axis=0)
                if want_distances:
                    raise ValueError("distances of a precomputed model need kernel_diag, "
                                     "K(x, x) of the new points")
                continue
            _lloyd.assign(F, g, W, diag, labels[i0:i1], row_dist[i0:i1], n_threads)
            if want_distances:
                _lloyd.distances(F, g, W, diag, dist[i0:i1], n_threads)
    return labels.astype(np.intp), dist


def _fused_outer_sums(model, X, n_threads):
    """F (k×m) of new points from fused kernel values and sums, where the training kernel is
    the kernel function itself (no PSD repair, objective 'kmeans') and the storage float64
    (a float32 model rounds its kernel values first); None otherwise."""
    if (model.kernel.name in PRECOMPUTED or model.ncut is not None
            or model.dtype != np.float64
            or (model.psd is not None and model.psd.repair != "none")):
        return None
    return model.kernel.fused_outer_sums(X, model.X_fit, model.labels, model.sample_weight,
                                         model.cluster_weights.shape[0], n_threads)


def _kernel_row_blocks(model, X, kernel_diag, n_threads):
    """Yield (i0, i1, K(X[i0:i1], X_fit), K(x, x) or None) in row blocks, transformed as the
    training kernel was (:func:`transform_new_rows`)."""
    dtype = model.dtype
    if model.kernel.name in PRECOMPUTED:
        diag = None if kernel_diag is None else np.ascontiguousarray(kernel_diag,
                                                                dtype=np.float64)
        blocks = [(0, X.shape[0], np.ascontiguousarray(X, dtype=dtype), diag)]
    else:
        blocks = ((i0, i1, Kb, model.kernel.diag(X[i0:i1])) for i0, i1, Kb in
                  model.kernel.cross_blocks(X, model.X_fit, dtype=dtype, n_threads=n_threads))
    for i0, i1, Kb, diag in blocks:
        # X[i0:i1]: which points the rows belong to (a Lingoes shift needs to know when a
        # new point is a training point, psd.py).
        Kb, diag = transform_new_rows(model, Kb, diag, X[i0:i1])
        yield i0, i1, np.ascontiguousarray(Kb, dtype=dtype), diag
