"""Screened restarts on the exact route without the kernel matrix (``storage='blocked'``).

Each of ``n_init`` exact runs on n points costs at least the own outer sums Σ_c n_c² kernel
values (Elkan's start and end, ``elkan.py``), so twenty of them at n = 100,000 cost minutes.
The generic screener (``engine/restarts.py``: candidates solved on a seeded sample, the best
few completed on all the data; Bradley & Fayyad, "Refining initial points for k-means
clustering") is used with kernel sources:

- a candidate is the estimator's own start of that number (spectral, normalized spectral,
  k-means++; ``optima.start_kinds``) drawn on the sample, Elkan on the sample's kernel values
  in blocks, then Hartigan's refinement there; its objective on the sample ranks it;
- a completion starts all n points at the nearest centre of that sample solution (kernel sums
  against at most ``ASSIGN_POINTS`` of the sample's points, fused for rbf:
  ``Kernel.fused_outer_sums``), then runs the estimator's own iterations and refinement on
  the blocked kernel of all points.

``benchmarks/bench_exact.py`` measures it against full restarts.
"""
import time

import numpy as np

from . import _lloyd
from ..kernels.sources import BlockedKernel
from .restarts import Restarts, sampled_restarts

#: Sample points whose clusters give the completion's starting assignment.
ASSIGN_POINTS = 4000
#: The sample: max(SAMPLE_MIN, SAMPLE_PER_CLUSTER·k) points. A candidate on s points costs
#: ~s²/k kernel values (its own outer sums); 500 points per cluster place the clusters'
#: centres to ~1/√500 of their spread, enough to tell basins apart.
SAMPLE_MIN = 5000
SAMPLE_PER_CLUSTER = 500
#: Candidates completed: the best distinct ones whose sample objective is within this
#: relative distance of the best (engine/restarts.py).
PROMISING_RTOL = 0.01


def sample_size(n, n_clusters):
    """min(n, max(``SAMPLE_MIN``, ``SAMPLE_PER_CLUSTER``·k))."""
    return int(min(n, max(SAMPLE_MIN, SAMPLE_PER_CLUSTER * int(n_clusters))))


def applies(est, source, init_labels, n_init):
    """Whether ``fit`` screens its restarts: several starts of its own on a blocked kernel
    with more points than the sample."""
    return (init_labels is None and n_init >= 2 and type(source) is BlockedKernel
            and source.n > 2 * sample_size(source.n, est.n_clusters))


def nearest_sample_centres(source, weights, sample, sample_labels, n_clusters, rng,
                           n_threads):
    """Labels of all points: the nearest centre of the clusters ``sample_labels`` of
    ``sample``, estimated from at most ``ASSIGN_POINTS`` of its points (seeded)."""
    if sample.size > ASSIGN_POINTS:
        pick = np.sort(rng.choice(sample.size, size=ASSIGN_POINTS, replace=False))
        sample, sample_labels = sample[pick], sample_labels[pick]
    labels_s = np.ascontiguousarray(sample_labels, dtype=np.int32)
    Y, w = source.X[sample], np.ascontiguousarray(weights[sample])
    sub = BlockedKernel(source.kernel, Y, dtype=source.dtype, n_threads=n_threads)
    own = sub.own_outer_sums(labels_s, w, n_clusters)
    g = np.bincount(labels_s, weights=w * own, minlength=n_clusters)
    W = np.bincount(labels_s, weights=w, minlength=n_clusters)
    F = source.kernel.fused_outer_sums(source.X, Y, labels_s, w, n_clusters, n_threads)
    if F is None:
        F = np.empty((n_clusters, source.n))
        for i0, _, Kb in source.kernel.cross_blocks(source.X, Y, dtype=source.dtype,
                                                    n_threads=n_threads):
            _lloyd.outer_sums_rows(Kb, i0, labels_s, w, F, n_threads)
    labels = np.empty(source.n, dtype=np.int32)
    _lloyd.assign(F, g, W, source.diag, labels, np.empty(source.n), n_threads)
    return labels


def screened_restarts(est, source, weights, rng, n_threads, n_init):
    """The restarts of ``fit`` on a blocked kernel, screened on a sample.

    Returns the :class:`~restarts.Restarts`: the best result, the full-data objectives of
    the completed candidates (in the order completed) and the screening statistics.
    """
    from .optima import refine

    k = est.n_clusters
    state = est._optima
    kinds = list(state.kinds)
    sample_source = {}

    seconds = {"sample": 0.0, "complete": 0.0}

    def solve_sample(sample, restart, r):
        t0 = time.process_time()
        try:
            return _solve_sample(sample, restart, r)
        finally:
            seconds["sample"] += time.process_time() - t0

    def _solve_sample(sample, restart, r):
        if "source" not in sample_source:
            sample_source["source"] = BlockedKernel(source.kernel, source.X[sample],
                                                    dtype=source.dtype, n_threads=n_threads)
        src = sample_source["source"]
        w = np.ascontiguousarray(weights[sample])
        start = est._start(src, w, r, restart)
        kinds[restart] = state.kinds[restart]      # a spectral start may become k-means++
        result = est._iterate(src, w, start, n_threads)
        if state.do_refine:
            result, _ = refine(src, w, result, k,
                               lambda labels: est._iterate(src, w, labels, n_threads),
                               n_threads)
        return result.inertia, (sample, result.labels)

    completed_kinds = []

    def complete(candidate):
        t0 = time.process_time()
        try:
            return _complete(candidate)
        finally:
            seconds["complete"] += time.process_time() - t0

    def _complete(candidate):
        sample, labels_s = candidate
        start = nearest_sample_centres(source, weights, sample, labels_s, k, rng, n_threads)
        result = est._iterate(source, weights, start, n_threads)
        return est._refine(source, weights, result, n_threads, start)

    out = sampled_restarts(source.n, n_init, rng, solve_sample, complete,
                           sample_size=sample_size(source.n, k),
                           promising_rtol=PROMISING_RTOL)
    completed_kinds = [kinds[c] for c in out.completed]
    state.kinds = completed_kinds
    stats = {"screened_start_kinds": kinds, "sample_size": int(out.sample.size),
             "sample_objectives": [float(v) for v in out.sample_objectives],
             "completed": [int(c) for c in out.completed],
             "screen_cpu_seconds": seconds}
    return Restarts(out.best, list(out.full_objectives), stats)
