"""The Dask route of a Nyström fit, driven from the client.

The steps and the numbers are those of a fit in one process on the explicit-feature engine
(``engine/features.py``, ``engine/restarts.py``, ``nystroem.FeatureEngine``), with every pass
over the data split into chunks that the workers run (``chunks.py``):

1. gamma from the seeded sample of pairs of ``functions.resolve_gamma`` (only the sampled rows
   come to the client; ``'scale'`` from per-chunk moments);
2. the m landmarks (the rows ``nystroem.choose_landmarks`` draws) and the feature map
   (``features.feature_map``: the m × s projection), on the client;
3. the features of each chunk (``features.feature_chunk``), held on the workers when they fit
   in half the workers' memory, else recomputed from the data at every pass (out of core);
4. the restarts of ``restarts.sampled_restarts``: every candidate start drawn and iterated on
   the seeded sample, whose features are brought to the client (a few MB), the best few
   completed on all the data by Lloyd passes (``features.step_chunk`` on every chunk, the
   partial sums of every block of ``CHUNK_ROWS`` rows reduced on the client in row order by
   ``features.reduce_steps``). Chunks start at multiples of ``CHUNK_ROWS``, so the blocks
   and the order of the sums are those of one process: the same labels and objective.

Faults: every held array (features, labels) is a Dask future with its lineage (a task that
reads the rows from the file), so when a worker dies the scheduler recomputes what was lost
on the others and the run ends with the same result.
"""
import time

import numpy as np

from ..engine import features as F
from ..engine.lloyd import warn_not_converged, warn_relocated
from ..engine.optima import start_kinds
from ..engine.records import FitResult, NystroemState
from ..engine.restarts import default_sample_size, sampled_restarts
from ..errors import OptionConflictError, TooFewDistinctPointsError, ValueRangeError
from ..kernels.functions import (CENTRED_KERNELS, GAMMA_KERNELS, Kernel, distinct_rows,
                                 median_gamma, pair_distances, pair_sample, resolve_gamma,
                                 variance_gamma)
from ..kernels.nystroem import (choose_landmarks, engine_stats, landmark_rng,
                                resolve_landmarks)
from . import chunks
from .cluster import worker_memory_total
from .readers import ChunkedData, chunk_rows, from_array

#: Features are held on the workers when they take at most this fraction of their memory.
PERSIST_FRACTION = 0.5


class ClusterRun:
    """One fit's data and features on the cluster."""

    def __init__(self, client, data, progress=None, per_chunk_sums=False):
        self.client = client
        self.data = data
        self.progress = progress or (lambda stage, **info: None)
        self.per_chunk_sums = per_chunk_sums
        self.fmap = None
        self.phi = None          # per chunk: a future of ("phi", Φ, ‖φ‖²) or the data source
        self.persisted = False
        self.bytes_per_pass = 0  # bytes of partial sums the client received in the last pass
        self.pass_seconds = []   # wall time of every Lloyd pass on all data

    def submit(self, fn, *args):
        return self.client.submit(fn, *args, pure=False)

    def gather(self, futures):
        return self.client.gather(futures)

    # -- rows and features of given points ----------------------------------------------------
    def take_rows(self, idx):
        """Data rows ``idx`` (global indices, any order), fetched from their chunks."""
        return self._take(idx, lambda src, local: self.submit(chunks.take_rows, src, local),
                          self.data.sources)[0]

    def take_features(self, idx):
        """(Φ rows, ‖φ‖²) of the points ``idx``."""
        return self._take(idx, lambda src, local: self.submit(chunks.take_features, src,
                                                              self.fmap, local), self.phi)

    def _take(self, idx, submit, sources):
        idx = np.asarray(idx, dtype=np.intp)
        starts = np.array([b[0] for b in self.data.bounds])
        which = np.searchsorted(starts, idx, side="right") - 1
        groups = [(j, np.flatnonzero(which == j)) for j in np.unique(which)]
        found = self.gather([submit(sources[j], idx[sel] - starts[j]) for j, sel in groups])
        outs = []
        for part in range(len(found[0]) if isinstance(found[0], tuple) else 1):
            first = found[0][part] if isinstance(found[0], tuple) else found[0]
            out = np.empty((idx.size,) + first.shape[1:], dtype=first.dtype)
            for (j, sel), got in zip(groups, found):
                out[sel] = got[part] if isinstance(got, tuple) else got
            outs.append(out)
        return outs

    # -- features ------------------------------------------------------------------------------
    def build_features(self, fmap, persist="auto"):
        """Send the feature map to the workers; hold the features there when they fit."""
        self.fmap = self.submit(_identity, fmap)
        item = np.dtype(fmap.dtype).itemsize
        need = float(self.data.n) * (fmap.rank * item + 8)
        total = worker_memory_total(self.client)
        if persist == "auto":
            persist = total == 0 or need <= PERSIST_FRACTION * total
        self.persisted = bool(persist)
        if self.persisted:
            self.phi = [self.submit(chunks.persist_features, s, self.fmap)
                        for s in self.data.sources]
            self.gather([self.submit(chunks.n_rows, f) for f in self.phi])
        else:
            self.phi = list(self.data.sources)

    # -- the checks of a fit in one process ------------------------------------------------
    def screen(self, kernel, n_clusters):
        """The checks made before any kernel value, as one process makes them on all of X:
        the kernel's domain (``kernels.functions.check_domain``: chi2 needs non-negative
        data) and at least ``n_clusters`` distinct points (``count_distinct``), from each
        chunk's distinct rows united on the client."""
        found = self.gather([self.submit(chunks.screen, src, kernel, n_clusters)
                             for src in self.data.sources])
        for (i0, _), (problem, _) in zip(self.data.bounds, found):
            if problem is not None:
                row, column, detail = problem
                raise ValueRangeError(i0 + row, column, detail)
        union = distinct_rows(np.concatenate([rows for _, rows in found]), n_clusters)
        if union.shape[0] < n_clusters:
            raise TooFewDistinctPointsError(union.shape[0], n_clusters)

    def check_range(self, kernel, gamma_from=None):
        """``kernels.functions.check_range`` on every chunk with the whole data's total
        weight and the resolved kernel (gamma, the offset): the first chunk's first row that
        breaks it."""
        found = self.gather([self.submit(chunks.range_problem, src, kernel.name,
                                         float(self.data.n), kernel, gamma_from)
                             for src in self.data.sources])
        for (i0, _), problem in zip(self.data.bounds, found):
            if problem is None:
                continue
            if problem[0] == "options":
                raise OptionConflictError(problem[1])
            _, row, column, detail = problem
            raise ValueRangeError(i0 + row, column, detail)

    def approximation_error(self):
        """trace(K − K̃)/trace(K) over all points (``features.approximation_error``)."""
        parts = self.gather([self.submit(chunks.feature_totals, src, self.fmap)
                             for src in self.phi])
        diag = sum(p[0] for p in parts)
        x_sq = sum(p[1] for p in parts)
        return float(diag - x_sq) / diag if diag > 0 else 0.0

    # -- Lloyd ---------------------------------------------------------------------------------
    def lloyd(self, means, max_iter, dtype, restart=0):
        """``features.lloyd`` from the centres ``means`` (k × s), each pass a map over the
        chunks and the reduction of their parts in row order."""
        mu = np.array(means, dtype=np.float64)
        states = [None] * len(self.phi)
        trace, n_iter, relocated, converged = [], 0, 0, False
        while True:
            t0 = time.perf_counter()
            centres = F.centres_from(mu, dtype)
            results = [self.submit(chunks.step, src, self.fmap, st, centres,
                                   self.per_chunk_sums)
                       for src, st in zip(self.phi, states)]
            got = self.gather([self.submit(chunks.parts_of, r) for r in results])
            self.bytes_per_pass = sum(p.sums.nbytes + p.weights.nbytes + p.inertia.nbytes
                                      + p.moved.nbytes for p, _ in got)
            step = F.reduce_steps([p for p, _ in got])
            wx = _sum_in_order([x for _, x in got])
            self.pass_seconds.append(time.perf_counter() - t0)
            states = results
            S, W = step.S, step.W
            if step.moved == 0:
                converged = True
                break
            if np.any(W <= 0):
                moved, states = self._relocate(states, S, W)
                relocated += moved
            trace.append(_objective(wx, S, W))
            self.progress("iteration", restart=restart, iteration=n_iter + 1,
                          objective=trace[-1], moved=step.moved)
            if n_iter == max_iter:
                break
            n_iter += 1
            mu = F.centres_from_sums(S, W, mu)
        if converged:
            inertia = _objective_at(wx, S, W, mu)
        else:
            inertia = _sum_in_order(self.gather([self.submit(chunks.weighted_dist, st)
                                                 for st in states]))
            warn_not_converged("Lloyd", False, max_iter)
        return F.FeatureResult(labels=states, centres=mu, S=S, W=W, inertia=inertia,
                               n_iter=n_iter + 1 if converged else n_iter,
                               converged=converged, n_relocated=relocated,
                               objective_trace=trace)

    def _relocate(self, states, S, W):
        """``features._relocate`` over the chunks: points by decreasing distance (ties by
        index) moved into the clusters of no weight, each only if its cluster keeps another
        point; S and W updated in the same order. Returns the moves and the new states."""
        k = W.size
        empty = np.flatnonzero(W <= 0)
        want = empty.size + k   # a skipped point is the last one of its cluster: at most k
        found = self.gather([self.submit(chunks.farthest, st, want) for st in states])
        members = np.sum(self.gather([self.submit(chunks.member_counts, st, k)
                                      for st in states]), axis=0)
        cand = sorted(((-float(d), self.data.bounds[j][0] + int(i), j, int(i), int(lab))
                       for j, (idx, dists, labs) in enumerate(found)
                       for i, d, lab in zip(idx, dists, labs)), key=lambda t: (t[0], t[1]))
        chosen = []
        for _, g, j, i, a in cand:
            if len(chosen) == empty.size:
                break
            if members[a] < 2:
                continue
            members[a] -= 1
            chosen.append((g, j, i, a, int(empty[len(chosen)])))
        if chosen:
            rows, _ = self.take_features([c[0] for c in chosen])
            for (_, _, _, a, c), row in zip(chosen, rows):
                row = 1.0 * row.astype(np.float64)
                S[a] -= row
                W[a] -= 1.0
                S[c] += row
                W[c] += 1.0
            per_chunk = {}
            for _, j, i, _, c in chosen:
                per_chunk.setdefault(j, ([], []))
                per_chunk[j][0].append(i)
                per_chunk[j][1].append(c)
            states = [self.submit(chunks.relabel, st, *per_chunk[j]) if j in per_chunk else st
                      for j, st in enumerate(states)]
            warn_relocated(len(chosen), stacklevel=3)
        return len(chosen), states


def _identity(x):
    return x


def _sum_in_order(values):
    total = 0.0
    for v in values:
        total += v
    return float(total)


def _objective(wx, S, W):
    """``features.objective`` with Σ w‖φ‖² given (added chunk by chunk)."""
    full = W > 0
    return float(wx - np.sum(np.einsum("ij,ij->i", S[full], S[full]) / W[full]))


def _objective_at(wx, S, W, mu):
    """``features.objective_at`` with Σ w‖φ‖² given."""
    return float(wx - 2.0 * np.sum(S * mu) + np.sum(W * np.einsum("ij,ij->i", mu, mu)))


# -- gamma -------------------------------------------------------------------------------------
def resolve_gamma_on_cluster(run, params, gamma_rng):
    """``functions.resolve_gamma`` with only the sampled rows brought to the client, and the
    offset of ``functions.data_offset`` (the column means) from sums chained through the
    chunks in order (``params``: the estimator's)."""
    kernel, gamma, n = params["kernel"], params["gamma"], run.data.n
    if kernel not in GAMMA_KERNELS or not isinstance(gamma, str):
        value = resolve_gamma(kernel, gamma, np.zeros((1, 1)), gamma_rng)
    elif gamma == "scale" or kernel in ("poly", "sigmoid"):
        value = variance_gamma(_variance(run.gather([run.submit(chunks.moments, s)
                                                     for s in run.data.sources])), run.data.d)
    else:
        i, j = pair_sample(n, gamma_rng)
        wanted = np.union1d(i, j)
        rows = run.take_rows(wanted)
        value = median_gamma(pair_distances(kernel, rows[np.searchsorted(wanted, i)],
                                            rows[np.searchsorted(wanted, j)]))
    offset = None
    if kernel in CENTRED_KERNELS and (kernel != "linear" or params["objective"] == "kmeans"):
        carry = None
        for src in run.data.sources:   # a chain of tasks: chunk j adds onto chunk j − 1
            carry = run.submit(chunks.column_sums, src, carry)
        offset = np.asarray(run.gather(carry), dtype=np.float64) / n
        offset.flags.writeable = False
    return Kernel(kernel, value, int(params["degree"]), float(params["coef0"]), offset)


def _variance(parts):
    """Chan, Golub & LeVeque's pairwise update of (count, sum, M2) of the chunks, in order."""
    n, total, m2 = 0, 0.0, 0.0
    for nb, sb, m2b in parts:
        if n == 0:
            n, total, m2 = nb, sb, m2b
            continue
        delta = sb / nb - total / n
        m2 += m2b + delta * delta * n * nb / (n + nb)
        n += nb
        total += sb
    return m2 / n


# -- a fit on a cluster -------------------------------------------------------------------------
def check_params(params):
    """The options the cluster route runs (ValueError otherwise); ``params``: the
    estimator's validated parameters (``get_params()``)."""
    if params["approx"] != "nystroem":
        raise ValueError("a fit on a Dask cluster runs the Nyström route; use "
                         "approx='nystroem' (--approx nystroem)")
    if params["kernel"] in ("precomputed", "precomputed-distance"):
        raise ValueError("a fit on a Dask cluster needs the data, not a precomputed kernel")
    if not isinstance(params["init"], str):
        raise ValueError("a fit on a Dask cluster draws its starts; initial labels need the "
                         "whole data on one machine")
    if params["objective"] != "kmeans" or params["refine"] == "hartigan":
        raise ValueError("a fit on a Dask cluster runs the explicit-feature engine: "
                         "objective='kmeans' and refine 'auto' or 'none'")


def fit_on_cluster(data, client, params, rngs, *, persist="auto", progress=None, rows=None,
                   per_chunk_sums=False):
    """A Nyström fit of ``data`` (:class:`ChunkedData`, or a Dask or NumPy array) with
    ``client``: ``params`` are the estimator's validated parameters (``get_params()``, with
    ``approx='nystroem'``), ``rngs`` its (gamma, fit) generators. ``KernelKMeans.fit`` calls
    this (``api.py``).

    Returns the :class:`~kkmeans_cli.engine.records.FitResult` of the fit, as a fit in one
    process on the explicit-feature engine would; ``labels`` are gathered on the client (n
    integers), the data never are. ``rows``: rows per chunk (rounded up to a multiple of
    ``features.CHUNK_ROWS``); None keeps chunks that start at such multiples and cuts others
    (a whole file, files of a glob) to about 64 MB of data. ``persist``: hold the features on
    the workers (True), recompute them at every pass (False), or 'auto' (held when they take
    at most half the workers' memory). ``per_chunk_sums``: see ``chunks.step``.
    """
    check_params(params)
    if not isinstance(data, ChunkedData):
        data = from_array(client, data)
    n, k = data.n, int(params["n_clusters"])
    if k > n:
        raise ValueError(f"n_clusters={k} is larger than the number of samples ({n})")
    if rows is not None or len(data.bounds) == 1 or not data.is_aligned():
        data = data.aligned(client, chunk_rows(data.d, rows))
    run = ClusterRun(client, data, progress, per_chunk_sums)
    gamma_rng, fit_rng = rngs
    t0 = time.perf_counter()
    run.screen(params["kernel"], k)     # the checks of a fit in one process, by chunk
    kernel = resolve_gamma_on_cluster(run, params, gamma_rng)
    gamma = params["gamma"]
    run.check_range(kernel, gamma if isinstance(gamma, str) else None)
    m = resolve_landmarks(params["n_landmarks"], n, k)
    rank = params["nystroem_rank"]
    rank = F.default_rank(k, m) if rank is None else min(int(rank), m)
    idx = choose_landmarks(n, m, landmark_rng(params["random_state"]))
    fmap = F.feature_map(kernel, run.take_rows(idx), rank)
    t1 = time.perf_counter()
    run.build_features(fmap, persist)
    t2 = time.perf_counter()
    stats = {"stage_seconds": {"landmarks": t1 - t0, "features": t2 - t1},
             "approximation_error": run.approximation_error()}
    kinds = start_kinds(params["init"], params["n_init"])
    used = list(kinds)
    sample_cache = {}
    max_iter = params["max_iter"]

    def solve_sample(sample, restart, r):
        if "Y" not in sample_cache:
            sample_cache["Y"], sample_cache["ys"] = run.take_features(sample)
        Y, ys = sample_cache["Y"], sample_cache["ys"]
        ws = np.ones(sample.size)
        mu, used[restart] = F.sample_start(Y, ws, k, kinds[restart], r)
        res = F.lloyd(Y, ys, ws, mu, max_iter, 1)
        run.progress("start", done=restart + 1, total=len(kinds))
        return res.inertia, res.centres

    restart_no = [0]

    def complete(mu):
        restart_no[0] += 1
        return run.lloyd(mu, max_iter, fmap.dtype, restart_no[0] - 1)

    out = sampled_restarts(n, params["n_init"], fit_rng, solve_sample, complete,
                           sample_size=default_sample_size(n, k))
    best = out.best
    t3 = time.perf_counter()
    stats.update(start_kinds=used, best_start=used[out.best_candidate],
                 sample_size=int(out.sample.size), sample_objectives=out.sample_objectives,
                 completed=out.completed)
    stats["stage_seconds"]["restarts"] = t3 - t2
    inertias = list(out.full_objectives)
    inertias[int(np.argmin(inertias))] = best.inertia
    labels = np.concatenate(client.gather([run.submit(chunks.labels_of, st)
                                           for st in best.labels])).astype(np.intp)
    W = best.W
    workers = list(client.scheduler_info().get("workers", {}).values())
    fit_stats = {"kernel_seconds": t2 - t0, "iteration_seconds": t3 - t2,
                 "restart_inertias": inertias, "best_restart": int(np.argmin(inertias)),
                 "n_threads": 1, "storage": "features held on the workers" if run.persisted
                 else "features recomputed at every pass",
                 "cluster": {"workers": len(workers),
                             "threads": int(sum(w.get("nthreads", 1) for w in workers)),
                             "chunks": len(data.bounds),
                             "bytes_per_pass": int(run.bytes_per_pass),
                             "pass_seconds": [float(t) for t in run.pass_seconds]}}
    # (as the explicit-feature engine in one process reports its starts)
    fit_stats.update(engine_stats(stats, best.inertia))
    state = NystroemState(landmarks=fmap.landmarks, transform=fmap.projection,
                          n_landmarks=fmap.n_landmarks, rank=fmap.rank,
                          dtype=np.dtype(fmap.dtype).name, centers=best.centres, stats=stats)
    return FitResult(labels=labels, inertia=best.inertia,
                     inner_sums=W ** 2 * np.einsum("ij,ij->i", best.centres, best.centres),
                     cluster_weights=W, n_iter=best.n_iter, converged=best.converged,
                     kernel=kernel, sample_weight=np.ones(n), X_fit=None, n_features=data.d,
                     fit_stats=fit_stats, nystroem=state)


# -- predict ---------------------------------------------------------------------------------
def predict_on_cluster(model, data, client, rows=None):
    """Per-chunk futures of the labels (int32) of ``data`` (:class:`ChunkedData` or an
    array), in input order; ``nystroem.nearest`` of the fitted Nyström ``model``
    (``kernels.nystroem.NystroemModel``) runs on each chunk on the workers."""
    if not isinstance(data, ChunkedData):
        data = from_array(client, data)
    if data.d != model.n_features:
        raise ValueError(f"X has {data.d} feature{'s' * (data.d != 1)}, the model expects "
                         f"{model.n_features}")
    if rows is not None or len(data.bounds) == 1 or not data.is_aligned():
        data = data.aligned(client, chunk_rows(data.d, rows))
    future = client.submit(_identity, model, pure=False)
    return [client.submit(chunks.nearest, src, future, i0, pure=False)
            for src, (i0, _) in zip(data.sources, data.bounds)]
