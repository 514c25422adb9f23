"""Screened restarts on the exact route without the kernel matrix (``storage='blocked'``).

Each of ``n_init`` exact runs on n points costs at least the own outer sums Σ_c n_c² kernel
values (Elkan's start and end, ``elkan.py``), so twenty of them at n = 100,000 cost minutes.
The restarts are screened on a seeded sample (Bradley & Fayyad, "Refining initial points for
k-means clustering"), and the candidate that stands out is completed on all the data; where
none stands out (data without clusters, where the sample cannot tell the basins apart) the
full restarts run instead, so screening never loses the full restarts' optimum there:

- a candidate is the fit's own start of that number (spectral, normalized spectral,
  k-means++; ``optima.start_kinds``) drawn on the sample, iterated on the sample's kernel
  values in blocks (or on its s×s kernel matrix, for ``storage='auto'`` where K would fit),
  then Hartigan's refinement there; its objective on the sample ranks it;
- a completion starts all n points at the nearest centre of that sample solution (kernel sums
  against at most ``ASSIGN_POINTS`` of the sample's points, fused for rbf:
  ``Kernel.fused_outer_sums``), then runs the fit's own iterations and refinement on
  the blocked kernel of all points.

``benchmarks/bench_exact.py`` measures it against full restarts.
"""
import copy
import time

import numpy as np

from . import _lloyd
from .iterate import iterate
from .hartigan import refine
from .optima import OptimaState
from .restarts import Restarts, distinct_best, sample_indices

#: Sample points whose clusters give the completion's starting assignment.
ASSIGN_POINTS = 4000
#: The sample: max(SAMPLE_MIN, SAMPLE_PER_CLUSTER·k) points. A candidate on s points costs
#: ~s²/k kernel values (its own outer sums); 500 points per cluster place the clusters'
#: centres to ~1/√500 of their spread, enough to tell basins apart.
SAMPLE_MIN = 5000
SAMPLE_PER_CLUSTER = 500
#: The sample's solutions separate when only one distinct solution has a sample objective
#: within this relative distance of the best (:func:`promising`).
PROMISING_RTOL = 0.01
#: The screening stops early once this many distinct candidates lie within
#: ``PROMISING_RTOL`` of the best so far, after at least ``SCREEN_STOP_AFTER`` candidates:
#: the solutions will not separate unless a later one ends 1% below all of them, and the full
#: restarts that follow do not depend on how many candidates ran (on clustered data every
#: candidate so far is one solution: ``benchmarks/bench_route.py``'s blobs and moons).
SCREEN_STOP_DISTINCT = 3
SCREEN_STOP_AFTER = 5


def sample_size(n, n_clusters):
    """min(n, max(``SAMPLE_MIN``, ``SAMPLE_PER_CLUSTER``·k))."""
    return int(min(n, max(SAMPLE_MIN, SAMPLE_PER_CLUSTER * int(n_clusters))))


def applies(source, init_labels, n_init, n_clusters):
    """Whether ``fit`` screens its restarts: several starts of its own on a kernel computed
    in blocks with more points than the sample."""
    return (init_labels is None and n_init >= 2 and source.computes_rows
            and source.n > 2 * sample_size(source.n, n_clusters))


def nearest_sample_centres(source, weights, sample, sample_labels, n_clusters, rng,
                           n_threads):
    """Labels of all points: the nearest centre of the clusters ``sample_labels`` of
    ``sample``, estimated from at most ``ASSIGN_POINTS`` of its points (seeded)."""
    if sample.size > ASSIGN_POINTS:
        pick = np.sort(rng.choice(sample.size, size=ASSIGN_POINTS, replace=False))
        sample, sample_labels = sample[pick], sample_labels[pick]
    labels_s = np.ascontiguousarray(sample_labels, dtype=np.int32)
    w = np.ascontiguousarray(weights[sample])
    sub = source.subset(sample, n_threads)
    own = sub.own_outer_sums(labels_s, w, n_clusters)
    g = np.bincount(labels_s, weights=w * own, minlength=n_clusters)
    W = np.bincount(labels_s, weights=w, minlength=n_clusters)
    F = source.outer_sums_against(sample, labels_s, w, n_clusters)
    labels = np.empty(source.n, dtype=np.int32)
    _lloyd.assign(F, g, W, source.diag, labels, np.empty(source.n), n_threads)
    return labels


def promising(objectives, rtol=PROMISING_RTOL):
    """The candidates worth completing, best first: the distinct sample solutions (one per
    objective equal to ``restarts.SAME_RTOL``) within ``rtol`` of the best."""
    order = distinct_best(objectives, len(objectives))
    bound = objectives[order[0]] + rtol * abs(objectives[order[0]])
    return [c for c in order if objectives[c] <= bound]


def adaptive_restarts(source, weights, rng, spec, n_init, full_restarts):
    """The restarts of a fit on kernel values computed in blocks (``storage='blocked'``, or
    ``storage='auto'`` when its cost model chose screening: route 'blocked' of
    ``model/planning.py``): every start a candidate on a seeded sample, then

    - the sample's solutions *separate* (one distinct solution within ``PROMISING_RTOL`` of
      the best; the others are other basins, not sampling noise): it is completed on kernel
      values in blocks;
    - they do not (the candidates' objectives are within the sampling noise of each other, as
      on data without clusters, where the sample cannot tell the basins apart; the screening
      stops once ``SCREEN_STOP_DISTINCT`` distinct candidates are within ``PROMISING_RTOL``
      of the best, after ``SCREEN_STOP_AFTER``):
      ``full_restarts(source, generator, state)`` runs the full restarts on kernel values in
      blocks, with the generator as it was before the screening: the very runs of
      ``storage='matrix'``, the same moves without the kernel matrix, so the objective is
      theirs.

    ``source`` is the blocked kernel, or (``storage='auto'`` where the kernel matrix would
    fit) a ``LazyKernel`` whose blocked kernel is used: then the candidates run on the
    sample's s×s kernel matrix instead of its values in blocks.

    Returns the :class:`~restarts.Restarts` and the
    :class:`~kkmeans_cli.engine.optima.OptimaState` whose starts and refinements they are.
    """
    k, n_threads = spec.n_clusters, spec.n_threads
    blocked = source.blocked if source.lazy else source
    before = copy.deepcopy(rng)
    state = OptimaState(spec, n_init)
    t0 = time.process_time()
    sample = sample_indices(source.n, sample_size(source.n, k), rng)
    # the sample's s×s kernel matrix where K of all points would fit (the memory plan of a
    # blocked fit does not count it), else its values in blocks
    sub = (blocked.sample_matrix(sample, n_threads) if source.lazy
           else blocked.subset(sample, n_threads))
    w = np.ascontiguousarray(weights[sample])
    objectives, solutions = [], []
    for restart in range(n_init):
        result = iterate(sub, w, state.start(sub, w, rng, restart), spec)
        if state.do_refine:
            result, _ = refine(sub, w, result, k,
                               lambda labels: iterate(sub, w, labels, spec), n_threads)
        objectives.append(float(result.inertia))
        solutions.append(result.labels)
        if (restart + 1 >= SCREEN_STOP_AFTER
                and len(promising(objectives)) >= SCREEN_STOP_DISTINCT):
            break
    del sub
    kinds = list(state.kinds[:len(objectives)])
    candidates = promising(objectives)
    separate = len(candidates) == 1
    seconds = {"sample": time.process_time() - t0, "complete": 0.0}
    stats = {"screened_start_kinds": kinds, "sample_size": int(sample.size),
             "sample_objectives": objectives, "screen_separated": separate,
             "screen_cpu_seconds": seconds}
    t1 = time.process_time()
    if separate:
        c = candidates[0]
        state.kinds, state.records = [kinds[c]], []
        start = nearest_sample_centres(blocked, weights, sample, solutions[c], k, rng,
                                       n_threads)
        best = state.refine(blocked, weights, iterate(blocked, weights, start, spec), start)
        best_index, inertias = 0, [best.inertia]
        stats["completed"] = [int(c)]
    else:
        state = OptimaState(spec, n_init)
        full = full_restarts(blocked, before, state)
        best, best_index, inertias = full.best, full.winner, list(full.inertias)
        stats["completed"] = []
        stats["screen_full_restarts"] = n_init
    seconds["complete"] = time.process_time() - t1
    return Restarts(best, inertias, stats, best_index=best_index), state
