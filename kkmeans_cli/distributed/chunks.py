"""The per-chunk functions the Dask workers run: thin wrappers of the chunk functions of
``engine/features.py`` (the same code as a fit in one process), with nothing mutated in place
(a task's result may be recomputed after a worker is lost, so tasks are pure functions).

A chunk's features come from a *source*: ``("phi", Φ, ‖φ‖²)`` (features held on the worker),
``("x", X)`` (the rows held, features recomputed; a whole file of a glob also holds its column
names, ``("x", X, names)``) or ``("read", reader, i0, i1)`` (nothing
held: the rows are read from the file and the features recomputed at every pass, for data
larger than the workers' memory). ``fmap`` is the engine's ``FeatureMap`` (landmarks, the
m × s projection, the kernel), a future sent to each worker once.

A chunk starts at a multiple of ``features.CHUNK_ROWS`` rows of the whole data, so its blocks
and their partial sums are those of the one-process fit (see ``engine/features.py``).
"""
import numpy as np

from ..engine import _features
from ..engine import features as F
from ..errors import OptionConflictError, ValueRangeError
from ..kernels.functions import check_domain, check_range, distinct_rows
from ..kernels.nystroem import nearest as nystroem_nearest


def rows_of(src):
    """The data rows of a source (read from the file when not held)."""
    if src[0] == "x":
        return src[1]
    if src[0] == "read":
        _, reader, i0, i1 = src
        return reader.rows(i0, i1)
    raise ValueError("this chunk holds features, not rows")


def phi_of(src, fmap):
    """(Φ, ‖φ‖²) of a chunk: held, or ``features.feature_chunk`` of its rows."""
    if src[0] == "phi":
        return src[1], src[2]
    return F.feature_chunk(fmap, rows_of(src))


def persist_features(src, fmap):
    """``("phi", Φ, ‖φ‖², totals)``: the features of a chunk, to be held on the worker, and
    the chunk's :func:`feature_totals` (made while its rows are at hand)."""
    X = rows_of(src)
    Phi, x_sq = F.feature_chunk(fmap, X)
    return ("phi", Phi, x_sq, (float(np.sum(fmap.kernel.diag(X))), float(np.sum(x_sq))))


def concat_rows(pieces):
    """``("x", X)`` of consecutive row ranges of held sources: [(src, a, b), ...]."""
    return ("x", np.ascontiguousarray(np.concatenate([rows_of(s)[a:b] for s, a, b in pieces])))


def hold_file(reader):
    """``("x", X, names)``: a whole file of DATA (``readers.FileReader``) held on the worker,
    with its column names (None without a header)."""
    data = reader.read()
    return ("x", np.ascontiguousarray(data.X, dtype=np.float64),
            None if data.columns is None else list(data.columns))


def head_of(src):
    """(shape, column names or None) of a held chunk."""
    return tuple(src[1].shape), (src[2] if len(src) > 2 else None)


def n_rows(src):
    if src[0] in ("phi", "x"):
        return int(src[1].shape[0])
    return int(src[3] - src[2])


def take_rows(src, local):
    """Data rows ``local`` (indices within the chunk) of a source."""
    return np.ascontiguousarray(rows_of(src)[np.asarray(local, dtype=np.intp)])


def take_features(src, fmap, local):
    """(Φ rows, ‖φ‖²) of the points ``local`` (indices within the chunk)."""
    local = np.asarray(local, dtype=np.intp)
    Phi, x_sq = phi_of(src, fmap)
    return np.ascontiguousarray(Phi[local]), x_sq[local]


def feature_totals(src, fmap):
    """(Σ K(x, x), Σ ‖φ‖²) of a chunk, for the approximation error trace(K − K̃)/trace(K):
    kept with held features, else computed from the rows (one pass)."""
    if src[0] == "phi":
        return src[3]
    X = rows_of(src)
    _, x_sq = F.feature_chunk(fmap, X)
    return float(np.sum(fmap.kernel.diag(X))), float(np.sum(x_sq))


# -- the checks of a fit in one process, chunk by chunk ----------------------------------------
def screen(src, kernel, n_clusters):
    """A chunk's part of the data checks made before any kernel value (the rules of
    ``kernels.functions.check_domain`` and ``count_distinct``): (the chunk's first value
    outside the kernel's domain as (row, column, detail), or None; the chunk's distinct rows,
    all of them when fewer than ``n_clusters``)."""
    X = rows_of(src)
    try:
        check_domain(kernel, X)
    except ValueRangeError as exc:
        return (exc.row, exc.column, exc.detail), None
    return None, distinct_rows(X, n_clusters, kernel)


def range_problem(src, name, total_weight, kernel, gamma_from):
    """A chunk's rows against ``kernels.functions.check_range`` with the whole data's total
    weight, resolved kernel and offset: None, ``("row", row, column, detail)`` or
    ``("options", message)`` when the kernel's parameters are at fault."""
    try:
        check_range(name, rows_of(src), total_weight, kernel=kernel, offset=kernel.offset,
                    gamma_from=gamma_from)
    except ValueRangeError as exc:
        return "row", exc.row, exc.column, exc.detail
    except OptionConflictError as exc:
        return "options", str(exc)
    return None


def moments(src):
    """(entries, Σx, Σ(x − mean)²) of a chunk, for the variance of all entries."""
    X = rows_of(src)
    mean = float(X.mean())
    return X.size, float(X.sum()), float(((X - mean) ** 2).sum())


def _state(state, n):
    if state is None:
        return np.full(n, -1, dtype=np.int32), np.empty(n)
    return state[0], state[1]


# -- Lloyd (``features.lloyd`` with the passes split by chunk) ----------------------------------
def step(src, fmap, state, centres, per_chunk_sums=False):
    """One assignment of a chunk: ``features.step_chunk`` on copies of its labels.

    Returns (labels, dist, parts, Σ‖φ‖²): labels and distances stay on the worker; the client
    fetches the parts (:func:`parts_of`). With ``per_chunk_sums`` the chunk's blocks are
    added here, in order, so the client gets k × s sums per chunk instead of per block of
    ``CHUNK_ROWS`` rows (fewer bytes; the result then equals the one-process fit up to the
    rounding of the additions).
    """
    Phi, x_sq = phi_of(src, fmap)
    n = Phi.shape[0]
    labels, dist = _state(state, n)
    labels, dist = labels.copy(), np.empty(n)
    parts = F.step_chunk(Phi, x_sq, np.ones(n), centres, labels, dist)
    if per_chunk_sums:
        parts = _sum_parts(parts)
    return labels, dist, parts, float(np.sum(x_sq))


def _sum_parts(parts):
    t, k, s = parts.sums.shape
    S, W, tot = np.empty(k * s), np.empty(k), np.empty(1)
    _features.sum_in_order(np.ascontiguousarray(parts.sums.reshape(t, k * s)), S)
    _features.sum_in_order(np.ascontiguousarray(parts.weights), W)
    _features.sum_in_order(np.ascontiguousarray(parts.inertia.reshape(t, 1)), tot)
    return F.StepParts(sums=S.reshape(1, k, s), weights=W.reshape(1, k), inertia=tot,
                       moved=np.array([int(parts.moved.sum())], dtype=np.intp))


def parts_of(result):
    """The client's share of a :func:`step`: (parts, Σ‖φ‖²)."""
    return result[2], result[3]


def farthest(state, count):
    """Up to ``count`` points by decreasing distance (ties by index), for refilling empty
    clusters: (local indices, distances, labels)."""
    labels, dist = state[0], state[1]
    order = np.argsort(-dist, kind="stable")[:count]
    return order, dist[order], labels[order]


def member_counts(state, k):
    return np.bincount(state[0], minlength=k)


def relabel(state, local, new):
    """Labels with ``labels[local] = new`` and their distances 0 (``features._relocate``)."""
    labels, dist = state[0].copy(), state[1].copy()
    local = np.asarray(local, dtype=np.intp)
    labels[local] = new
    dist[local] = 0.0
    return labels, dist


def labels_of(state):
    return state[0]


def weighted_dist(state):
    return float(np.sum(state[1]))


# -- predict -----------------------------------------------------------------------------------
def nearest(src, model, i0=0):
    """Labels (int32) of a chunk's rows: ``nystroem.nearest`` of the fitted model (a
    ``NystroemModel``), the code of a predict in one process, on one thread. A value out of
    range is located by its row in the whole data (the chunk starts at row ``i0``)."""
    try:
        labels, _ = nystroem_nearest(model, rows_of(src), want_distances=False, n_threads=1)
    except ValueRangeError as exc:
        raise ValueRangeError(exc.row + i0, exc.column, exc.detail, exc.what) from None
    return labels.astype(np.int32)


def column_sums(src, carry):
    """Σ of the rows of all chunks so far, added row after row onto ``carry`` (the previous
    chunks' sums; None for the first): the order of NumPy's ``X.sum(axis=0)`` over the whole
    array, so ``X.mean(axis=0)`` comes out bitwise the same."""
    X = rows_of(src)
    if carry is None:
        return np.add.reduce(X, axis=0)
    return np.add.reduce(np.vstack([carry[None, :], X]), axis=0)
