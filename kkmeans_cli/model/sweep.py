"""Choosing k: fit every k over one kernel matrix and measure each clustering.

:func:`sweep` computes K once, fits ``KernelKMeans(k, **params)`` for every k with
``kernel_matrix=K``, and measures each fit (inertia, exact or sampled silhouette, simplified
silhouette, Calinski-Harabasz, Davies-Bouldin; :mod:`kkmeans_cli.measures.metrics`). The chosen k is the
best by one measure:

- ``silhouette``, ``simplified_silhouette``, ``calinski_harabasz``: the largest value;
- ``davies_bouldin``: the smallest value;
- ``inertia``: the *elbow* — inertia always falls as k grows, so its minimum is the largest k
  and says nothing. With both axes scaled to [0, 1] over the swept ks, the elbow is the k whose
  point lies farthest below the straight line from the first to the last point (the "kneedle"
  rule). With fewer than three ks there is no elbow and the smallest inertia is taken.

Ties go to the smaller k. ``NaN`` values never win.

The graph kernel 'knn' (and a sparse affinity with ``kernel='precomputed'``) has no kernel
matrix: :func:`sweep` hands it to :func:`graph_sweep`, which builds the graph once and fits
every k on it (``measures.graph_sweep.sweep_graph``), each k as ``KernelKMeans(k, ...)`` fits
it with the same seed and the same graph. Its rows are :data:`GRAPH_COLUMNS`: the objective,
the normalized cut, the cut ratio ncut(k+1)/ncut(k), the graph silhouette and the eigengap
λ_{k+1} − λ_k of the normalized Laplacian (von Luxburg, "A tutorial on spectral clustering",
2007); k is chosen by ``cut_ratio`` (the default there: the largest k whose next cluster at
least triples the normalized cut, ``measures.graph_sweep.choose_by_cut_ratio``),
``silhouette`` (the largest) or ``eigengap`` (the largest gap), and the eigengap's choice is
reported either way (``SweepResult.eigengap_k``).
"""
import csv
import io
import re
import time
import warnings
from dataclasses import dataclass, field

import numpy as np

from scipy import sparse

from .. import _options, memory
from ..errors import KKMeansWarning, TooFewDistinctPointsError
from ..kernels.functions import count_distinct
from ..kernels.nystroem import NystroemFeatures
from ..measures import features as feature_measures
from ..measures import metrics as _metrics
from ..measures.graph_sweep import choose_by_cut_ratio, sweep_graph
from .checks import check_fit_values, check_graph_data, check_graph_weights, check_weights
from .estimator import KernelKMeans, fit_with_sums
from .planning import check_graph_memory, fit_threads
from .fitting import check_graph_neighbors
from .params import InvalidParameterError, check_graph_settings, fit_rngs, validate_params

COLUMNS = ("k", "inertia", "silhouette", "simplified_silhouette", "calinski_harabasz",
           "davies_bouldin", "n_iter", "seconds")
SWEEP_METRICS = _options.SWEEP_METRICS
# The fits' outer sums (k×n each) are kept for the measures up to this many bytes in all.
MAX_HELD_SUMS = 256 * 2**20
HIGHER_IS_BETTER = {"silhouette": True, "simplified_silhouette": True,
                    "calinski_harabasz": True, "davies_bouldin": False, "inertia": False,
                    "eigengap": True}
# The rows of a sweep on a graph (kernel 'knn', or a sparse affinity): the objective J (the
# fit's inertia_), the normalized cut, the cut ratio (ncut(k+1) + ε)/(ncut(k) + ε), the graph
# silhouette and the eigengap λ_{k+1} − λ_k.
GRAPH_COLUMNS = ("k", "objective", "ncut", "cut_ratio", "silhouette", "eigengap", "n_iter",
                 "seconds")
GRAPH_SWEEP_METRICS = _options.GRAPH_SWEEP_METRICS


@dataclass
class SweepResult:
    """The outcome of :func:`sweep`.

    Attributes
    ----------
    rows : list of dict
        One per k, keys :data:`COLUMNS` in that order; ``seconds`` is the wall time of the k:
        its fit and an equal share of the measures (computed for every k in one pass over K).
    metric : str
        The measure k was chosen by.
    best_k : int
    best_estimator : KernelKMeans
        The fitted estimator of ``best_k``.
    silhouette_n_used : list of int
        Per row, the points the silhouette averages (n when exact, the sample size otherwise).
    fit_seconds : list of float
        Per row, the seconds of the fit alone.
    kernel_seconds : float
        Seconds spent computing the shared kernel matrix.
    random_state : int or None
        The seed used for every fit (drawn once when none was given, so the sweep can be
        reproduced).
    skipped_ks : list of int
        The ks above the number of distinct points: not fitted, not scored, never chosen.
    columns : tuple of str
        The keys of the rows (:data:`COLUMNS`, or :data:`GRAPH_COLUMNS` on a graph).
    graph : GraphInfo or None
        On a graph: the one graph every k was fitted on (its neighbours, nodes, nnz, ...).
    eigengap_k : int or None
        On a graph: the k of the largest eigengap among the ks swept (None when the
        eigenvalues were not computed).
    labels : list of ndarray
        On a graph: the labels of every k, in the order of ``rows``.
    """

    rows: list
    metric: str
    best_k: int
    best_estimator: object
    silhouette_n_used: list = field(default_factory=list)
    fit_seconds: list = field(default_factory=list)
    kernel_seconds: float = 0.0
    random_state: object = None
    skipped_ks: list = field(default_factory=list)
    columns: tuple = COLUMNS
    graph: object = None
    eigengap_k: object = None
    labels: list = field(default_factory=list)

    @property
    def best_row(self):
        return next(r for r in self.rows if r["k"] == self.best_k)

    def to_csv(self, path_or_file=None):
        """The rows as CSV (see :func:`to_csv`)."""
        return to_csv(self.rows, path_or_file, self.columns)


def parse_k_ranges(text, minimum=1):
    """The ranges of a ``--k`` text as (lo, hi) pairs (inclusive), not expanded, so that
    ``2..99999999999`` costs nothing until it is checked against the number of rows.
    Raises ``ValueError`` with the bad part, or when a k is below ``minimum``."""
    ranges = []
    for part in str(text).split(","):
        part = part.strip()     # spaces around a part or its '..' only: '2 3' is no 23
        m = re.fullmatch(r"(\d+)(?:\s*(?:\.\.|-)\s*(\d+))?", part)
        if not m:
            raise ValueError(f"invalid k {part!r}: use e.g. 2..10 or 2,3,5")
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) is not None else lo
        if hi < lo:
            raise ValueError(f"invalid k range {part!r}: the end is below the start")
        ranges.append((lo, hi))
    if not ranges or min(lo for lo, _ in ranges) < minimum:
        raise ValueError(f"every k must be at least {minimum}")
    return ranges


def parse_ks(text, max_k=None):
    """Parse the ks of a sweep: ``"2..10"`` (inclusive), ``"2,3,5"``, or a mix ``"2..4,8"``.

    Returns a sorted list of distinct ints ≥ 1; raises ``ValueError`` with the bad part, or
    when a k exceeds ``max_k`` (checked before any range is expanded).
    """
    ranges = parse_k_ranges(text)
    top = max(hi for _, hi in ranges)
    if max_k is not None and top > max_k:
        raise ValueError(f"k = {top} is above the largest k possible here, {max_k}")
    ks = set()
    for lo, hi in ranges:
        ks.update(range(lo, hi + 1))
    return sorted(ks)


def sweep(X, ks, *, metric=None, sample_weight=None, progress=None,
          max_exact=_metrics.MAX_EXACT, sample_size=_metrics.SAMPLE_SIZE,
          kernel_matrix=None, **params):
    """Fit every k in ``ks`` over one kernel matrix and choose the best k by ``metric``.

    Parameters
    ----------
    X : array-like (n, d), or the n×n kernel matrix with ``kernel='precomputed'``
    ks : iterable of int or str
        The ks to try (a string is parsed by :func:`parse_ks`); each 2 ≤ k ≤ n − 1 (the
        measures are undefined for one cluster or one point per cluster).
    metric : {'silhouette', 'simplified_silhouette', 'calinski_harabasz', 'davies_bouldin',
              'inertia'} or None
        The measure that chooses k (see the module docstring for the direction and the elbow);
        None: 'silhouette' (on a graph: :func:`graph_sweep`'s 'cut_ratio').
    sample_weight : array-like (n,), optional
        Passed to every fit and to the centre-based measures.
    progress : callable, optional
        Called as ``progress(done, total, row)`` after each k (``row`` the dict just made), e.g.
        to advance a progress bar.
    max_exact, sample_size : int
        The silhouette is exact up to ``max_exact`` points, else computed on a seeded,
        stratified sample of ``sample_size`` points (:func:`metrics.silhouette_score`).
    kernel_matrix : ndarray (n, n), optional
        K(X, X) already computed for these params (else computed once here).
    **params
        ``KernelKMeans`` parameters other than ``n_clusters``, the same for every k (the
        kernel is the estimator's default, the graph kernel 'knn', unless given: it, or a
        sparse X with 'precomputed', goes to :func:`graph_sweep`; a dense kernel such as
        'rbf' is swept over one kernel matrix here). When
        ``random_state`` is None or a Generator, one int seed is drawn from it and used for
        the kernel and every fit (``SweepResult.random_state``).

    Returns
    -------
    SweepResult
    """
    if "n_clusters" in params:
        raise TypeError("sweep() sets n_clusters itself; give the ks instead")
    # The estimator's default kernel, 'knn', unless another is named: the graph kernel (and a
    # sparse affinity) has no kernel matrix, one graph serves every k; a dense kernel's one
    # kernel matrix does.
    params.setdefault("kernel", _options.DEFAULTS["kernel"])
    if params["kernel"] in _options.GRAPH_KERNELS or (params["kernel"] == "precomputed"
                                                      and sparse.issparse(X)):
        return graph_sweep(X, ks, metric="cut_ratio" if metric is None else metric,
                           sample_weight=sample_weight, progress=progress, **params)
    metric = "silhouette" if metric is None else metric
    if metric not in SWEEP_METRICS:
        raise ValueError(f"unknown metric {metric!r}; choose from {list(SWEEP_METRICS)}")
    ks = _sorted_ks(ks, len(X))
    if not isinstance(params.get("random_state"), (int, np.integer)):
        # One int seed for the kernel and every fit: a shared Generator would advance between
        # the fits, and the best fit could not be reproduced by a direct fit.
        params["random_state"] = int(np.random.default_rng(params.get("random_state"))
                                     .integers(2 ** 31 - 1))
    n_threads = params.get("n_threads")
    ks, skipped = _distinct_ks(X, ks, sample_weight, params.get("kernel", "rbf"))

    t0 = time.perf_counter()
    if params.get("approx") == "nystroem" and params.get("n_landmarks") is None:
        # One set of landmarks for every k: the default count of the largest k.
        params["n_landmarks"] = memory.default_landmarks(len(X), max(ks))
    # With approx='nystroem', K is the NystroemFeatures of X (features shared by every k).
    K = (KernelKMeans(ks[0], **params).kernel_matrix(X) if kernel_matrix is None
         else kernel_matrix)
    kernel_seconds = time.perf_counter() - t0
    n = K.shape[0]
    bad = [k for k in ks if not 2 <= k <= n - 1]
    if bad:
        raise ValueError(f"every k must be between 2 and n_samples - 1 = {n - 1}; got {bad}")

    rows, fits, fit_seconds = [], [], []
    held = 0  # bytes of the fits' outer sums kept for the measures
    outer_sums = []  # per k: F of its labels on K from the fit's final pass, or None
    for done, k in enumerate(ks, start=1):
        t_start = time.perf_counter()
        est = KernelKMeans(k, **params)
        F = fit_with_sums(est, X, sample_weight, kernel_matrix=K)
        fit_seconds.append(time.perf_counter() - t_start)
        if F is not None:
            held += F.nbytes
            if held > MAX_HELD_SUMS:  # past it, the measures' pass computes the sums itself
                F = None
        outer_sums.append(F)
        row = dict.fromkeys(COLUMNS, float("nan"))
        row.update(k=k, inertia=float(est.inertia_), n_iter=int(est.n_iter_),
                   seconds=fit_seconds[-1])
        rows.append(row)
        fits.append(est)
        if progress is not None:
            progress(done, len(ks), row)

    # The measures of every k: with K in memory, one pass over K for all of them.
    t_start = time.perf_counter()
    options = dict(sample_weight=sample_weight, n_threads=n_threads, max_exact=max_exact,
                   sample_size=sample_size, random_state=params["random_state"])
    labelings = [est.labels_ for est in fits]
    if isinstance(K, NystroemFeatures):
        measured = [feature_measures.scores(K.Phi, labels, **options) for labels in labelings]
    else:  # the fits' own final outer sums, when they were made on K itself
        measured = _metrics.scores_many(K, labelings, outer_sums=outer_sums, **options)
    del outer_sums
    share = (time.perf_counter() - t_start) / len(ks)
    n_used = []
    for row, m in zip(rows, measured):
        row.update({name: m[name] for name in ("silhouette", "simplified_silhouette",
                                                "calinski_harabasz", "davies_bouldin")})
        row["seconds"] += share
        n_used.append(m["silhouette_n_used"])

    best_k = choose_k(rows, metric)
    best_est = fits[ks.index(best_k)]
    return SweepResult(rows=rows, metric=metric, best_k=best_k, best_estimator=best_est,
                       silhouette_n_used=n_used, fit_seconds=fit_seconds,
                       kernel_seconds=kernel_seconds, random_state=params["random_state"],
                       skipped_ks=skipped)


def graph_sweep(X, ks, *, metric="cut_ratio", sample_weight=None, progress=None,
                eigengap="auto", refit_best=True, **params):
    """Fit every k in ``ks`` on one graph and choose the best k by ``metric`` (module
    docstring): the k-nearest-neighbour graph of X (``kernel='knn'``, the default here), or
    X itself, a sparse affinity, with ``kernel='precomputed'``.

    Each k is fitted as ``KernelKMeans(k, **params).fit(X)`` fits it (the same starts, passes
    and seed, without a whitened refit: ``whiten='auto'`` fits each k once, as
    ``whiten=False``; ``whiten=True`` is refused) on the one graph: with
    ``n_neighbors=None`` that graph has the default
    neighbours of the smallest k (``kernels.graph.default_neighbors``; ``SweepResult.graph``
    names them), so a longer range of ks changes neither the graph nor the rows of the ks it
    shares; it is the default graph of every k when the data have more than 21·max(ks)
    distinct points. A k above the distinct points is refused
    (:class:`~kkmeans_cli.errors.TooFewDistinctPointsError`), not skipped.

    Parameters
    ----------
    X : array-like (n, d), or a sparse (n, n) affinity with ``kernel='precomputed'``
    ks : iterable of int or str, each 2 ≤ k ≤ n (a k of every node has no cut ratio: it is
        chosen only when it is the one k swept)
    metric : {'cut_ratio', 'silhouette', 'eigengap'}
        'cut_ratio': the largest k whose next cluster at least triples the normalized cut
        (``measures.graph_sweep.choose_by_cut_ratio``; k + 1 is fitted for the largest k
        swept, and for every k whose k + 1 is not swept)
    sample_weight : None or n equal weights (a graph fit weighs points by their degrees)
    progress : callable, optional; ``progress(done, total, row)`` after each k (row None
        after a k+1 fitted for a cut ratio alone; total counts those too)
    eigengap : 'auto' (up to ``measures.graph_sweep.EIGENGAP_MAX_NODES`` nodes), True or
        False; True whenever ``metric='eigengap'``
    refit_best : bool
        Fit ``best_k`` with ``KernelKMeans`` for ``SweepResult.best_estimator`` (its labels
        are the sweep's; None when False).
    **params
        ``KernelKMeans`` parameters other than ``n_clusters``.

    Returns
    -------
    SweepResult with rows of :data:`GRAPH_COLUMNS`
    """

    if metric not in GRAPH_SWEEP_METRICS:
        raise ValueError(f"unknown metric {metric!r} for a graph sweep; choose from "
                         f"{list(GRAPH_SWEEP_METRICS)}")
    if "n_clusters" in params:
        raise TypeError("sweep() sets n_clusters itself; give the ks instead")
    params.setdefault("kernel", "knn")
    given = params["kernel"] == "precomputed" and sparse.issparse(X)
    if params["kernel"] not in _options.GRAPH_KERNELS and not given:
        raise ValueError(f"graph_sweep() sweeps kernel='knn' or a sparse affinity with "
                         f"kernel='precomputed', not kernel={params['kernel']!r}")
    if not isinstance(params.get("random_state"), (int, np.integer)):
        params["random_state"] = int(np.random.default_rng(params.get("random_state"))
                                     .integers(2 ** 31 - 1))
    validate_params(KernelKMeans(2, **params))
    if params.get("whiten") and not isinstance(params["whiten"], str):
        raise InvalidParameterError(
            "whiten=True is not swept: each k would whiten the points by its own clusters, "
            "where one graph serves every k (sweep without it, then fit the chosen k with "
            "whiten=True)")
    if given:
        check_graph_settings(KernelKMeans(2, **params).get_params(),
                             "kernel='precomputed' with a sparse X", "that affinity graph")
    if not isinstance(ks, (str, range)):
        ks = list(ks)               # read twice below: an iterator once
    planned = _sorted_ks(ks, X.shape[0], X.shape[0]) if given and X.ndim == 2 else []
    if planned and 2 <= planned[0] and planned[-1] <= X.shape[0]:
        # planned before the checks of the affinity, which copy it
        check_graph_memory(X.shape[0], 0, planned, nnz=X.nnz,
                           memory_limit=params.get("memory_limit"),
                           init=params.get("init", "k-means++"), sweep=True, refit=refit_best,
                           eigengap=True if metric == "eigengap" else eigengap)
    data = X                        # the best k is fitted on it as given (a DataFrame's names)
    X, affinity = check_graph_data(X, given)
    n = (affinity if given else X).shape[0]
    ks = _sorted_ks(ks, n, n)
    bad = [k for k in ks if not 2 <= k <= n]
    if bad:     # of points, n counts the rows (the distinct ones are checked when fitted)
        bound = f"the graph's {n} nodes" if given else f"n_samples = {n}"
        raise ValueError(f"every k must be between 2 and {bound}; got {bad}")
    weights = check_weights(sample_weight, n, ks[0])
    check_graph_weights(weights, params["kernel"])
    if not given:
        check_graph_neighbors(params.get("n_neighbors"), n)
        check_fit_values(X, "knn", weights, ks[-1])
        # the search that fits ('auto' may take the exact one), for the refit too
        params["neighbor_search"] = check_graph_memory(
            n, X.shape[1], ks, n_neighbors=params.get("n_neighbors"),
            memory_limit=params.get("memory_limit"), init=params.get("init", "k-means++"),
            weighting=params.get("weighting", _options.DEFAULTS["weighting"]), sweep=True,
            refit=refit_best, eigengap=True if metric == "eigengap" else eigengap,
            neighbor_search=params.get("neighbor_search", "auto"))
    # The seed of the starts as KernelKMeans draws it (fit_rngs): every k's generator equals
    # the one a direct fit with this random_state uses.
    fit_seed = fit_rngs(params["random_state"])[1].bit_generator.seed_seq

    def advance(done, total, record):
        if progress is not None:    # record None: a k+1 fitted for a cut ratio alone
            progress(done, total, None if record is None else _graph_row(record))

    t0 = time.perf_counter()
    records = sweep_graph(X, ks, affinity=affinity, n_neighbors=params.get("n_neighbors"),
                          weighting=params.get("weighting", _options.DEFAULTS["weighting"]),
                          random_state=fit_seed,
                          n_threads=fit_threads(params.get("n_threads"), n),
                          eigengap=True if metric == "eigengap" else eigengap,
                          start="spectral" if params.get("init") == "spectral" else "auto",
                          n_init=int(params.get("n_init", _options.DEFAULTS["n_init"])),
                          max_iter=int(params.get("max_iter", _options.DEFAULTS["max_iter"])),
                          progress=advance,
                          neighbor_search=params.get("neighbor_search", "auto"))
    total = time.perf_counter() - t0
    rows = [_graph_row(r) for r in records]
    best_k = choose_k(rows, metric)
    eigengap_k = next((r.k for r in records if r.eigengap_choice), None)
    best_est = None
    if refit_best:
        best_params = dict(params)
        info = records[0].fit.graph.info
        # the sweep's graph: the neighbours of the smallest k's default rule (but on two
        # distinct points the rule's least value, 2, which no n_neighbors given may be: the
        # rule again, which gives it for every k)
        if not given and info.n_neighbors < info.n_nodes:
            best_params["n_neighbors"] = info.n_neighbors
        best_params["whiten"] = False   # the sweep's own fit of best_k, on its one graph
        best_est = KernelKMeans(best_k, **best_params).fit(affinity if given else data,
                                                             sample_weight=sample_weight)
    return SweepResult(rows=rows, metric=metric, best_k=best_k, best_estimator=best_est,
                       silhouette_n_used=[n] * len(rows),
                       fit_seconds=[r.seconds for r in records],
                       kernel_seconds=total - sum(r.seconds for r in records),
                       random_state=params["random_state"], columns=GRAPH_COLUMNS,
                       graph=records[0].fit.graph.info, eigengap_k=eigengap_k,
                       labels=[r.labels for r in records])


def _sorted_ks(ks, n_rows, largest=None):
    """The ks of a sweep of ``n_rows`` rows as a sorted list of distinct ints: a string parsed
    (:func:`parse_ks`), a range checked before it is expanded, against ``largest`` (n_rows − 1
    by default: a silhouette needs a cluster of two points; a graph sweep takes n_rows)."""
    largest, bound = (n_rows - 1, f"n_samples - 1 = {n_rows - 1}") if largest is None else \
        (largest, f"{largest}")
    if isinstance(ks, str):
        ks = parse_ks(ks, max_k=largest)
    elif isinstance(ks, range) and len(ks) and max(ks[0], ks[-1]) > largest:
        raise ValueError(f"every k must be between 2 and {bound}; "
                         f"got up to {max(ks[0], ks[-1])}")
    else:
        ks = sorted({_whole(k) for k in ks})
    if not ks:
        raise ValueError("no k to sweep")
    return ks


def _whole(k):
    """k as an int: an integer, a float of a whole value or a string of digits; anything else
    a ``ValueError`` (``int`` would cut 2.9 to 2)."""
    if isinstance(k, str) and re.fullmatch(r"\s*[+-]?[0-9]+\s*", k):
        return int(k)
    if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer, float,
                                                               np.floating)) \
            or (isinstance(k, (float, np.floating)) and not float(k).is_integer()):
        raise ValueError(f"every k must be a whole number of clusters; got {k!r}")
    return int(k)


def _graph_row(record):
    """A row of :data:`GRAPH_COLUMNS` from a ``GraphSweepRecord`` (None as NaN), and
    ``next_ncut``, the normalized cut of k + 1 behind the cut ratio (not a column)."""
    def number(value):
        return float("nan") if value is None else float(value)

    return {"k": record.k, "objective": float(record.objective), "ncut": float(record.ncut),
            "cut_ratio": number(record.cut_ratio), "next_ncut": number(record.next_ncut),
            "silhouette": number(record.silhouette), "eigengap": number(record.eigengap),
            "n_iter": int(record.fit.n_iter), "seconds": float(record.seconds)}


def _distinct_ks(X, ks, sample_weight, kernel):
    """The ks up to the number of distinct points of positive weight, and those skipped (with
    a ``KKMeansWarning``): above it clusters would share points, and their measures mean
    nothing. None left: :class:`~kkmeans_cli.errors.TooFewDistinctPointsError`."""
    distinct = count_distinct(X, ks[-1], sample_weight, kernel)
    kept = [k for k in ks if k <= distinct]
    skipped = [k for k in ks if k > distinct]
    if not kept:
        raise TooFewDistinctPointsError(distinct, ks[0])
    if skipped:
        warnings.warn(f"k = {_format_ks(skipped)} skipped: the data have only {distinct} "
                      f"distinct points (of positive weight)", KKMeansWarning, stacklevel=3)
    return kept, skipped


def _format_ks(ks):
    return f"{ks[0]}..{ks[-1]}" if len(ks) > 2 and ks[-1] - ks[0] == len(ks) - 1 else \
        ", ".join(str(k) for k in ks)


def choose_k(rows, metric):
    """The best k of sweep ``rows`` by ``metric`` (rules in the module docstring)."""
    ks = np.array([r["k"] for r in rows], dtype=float)
    v = np.array([r[metric] for r in rows], dtype=float)
    ok = np.isfinite(v)
    if metric == "cut_ratio":
        chosen = choose_by_cut_ratio(ks, v)    # the one k swept wins without a ratio
        if chosen is not None:
            return chosen
    if not ok.any():
        hint = ("; λ_(k+1) − λ_k needs a graph of more than k nodes: sweep smaller ks or "
                "choose k by the silhouette" if metric == "eigengap" else
                "; ncut(k+1)/ncut(k) needs a graph of more than k nodes: sweep smaller ks or "
                "choose k by the silhouette" if metric == "cut_ratio" else "")
        raise ValueError(f"no k has a finite {metric.replace('_', ' ')}{hint}")
    ks, v = ks[ok], v[ok]
    if metric == "eigengap" and not np.any(v > 0):
        raise ValueError("every eigengap λ_(k+1) − λ_k of the ks swept is 0 (more than k "
                         "connected components, or a repeated eigenvalue), so it chooses "
                         "none: sweep other ks, or choose k by the cut ratio or the "
                         "silhouette")
    if metric == "inertia":
        if ks.size < 3 or v.max() == v.min():
            return int(ks[np.argmin(v)])
        x = (ks - ks[0]) / (ks[-1] - ks[0])
        y = (v - v.min()) / (v.max() - v.min())
        chord = y[0] + (y[-1] - y[0]) * x
        return int(ks[np.argmax(chord - y)])  # argmax: ties to the smaller k
    i = np.argmax(v) if HIGHER_IS_BETTER[metric] else np.argmin(v)
    return int(ks[i])


def to_csv(rows, path_or_file=None, columns=COLUMNS):
    """Write sweep rows as CSV with the header ``columns``; floats with full precision (repr).

    ``path_or_file`` a path or an open text file; None returns the CSV text.
    """
    def fmt(v):
        return repr(float(v)) if isinstance(v, (float, np.floating)) else str(v)

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(columns)
    for r in rows:
        w.writerow([fmt(r[c]) for c in columns])
    text = buf.getvalue()
    if path_or_file is None:
        return text
    if hasattr(path_or_file, "write"):
        path_or_file.write(text)
    else:
        with open(path_or_file, "w", newline="") as f:
            f.write(text)
    return None
