"""The Dask route of a Nyström fit, driven from the client.

The steps are those of ``KernelKMeans.fit`` with ``approx='nystroem'`` in one process, with
every pass over the data split into chunks that the workers run (``chunks.py``):

1. gamma from a seeded sample of pairs (only the sampled rows come to the client);
2. the m landmarks (rows drawn as in one process) and T = K_mm^{-½}, on the client;
3. the features of each chunk, held on the workers when they fit in half the workers'
   memory, else recomputed from the data at every pass (out of core);
4. the restarts: k-means++ (as ``initialization.kmeans_plusplus``: each new centre is one
   map over the chunks returning every candidate's partial potential) or random centres,
   then Lloyd (as ``lloyd.lloyd``): each iteration sends S (k × m), g and W to every chunk and
   gets back the partial sums of the new labels, added in chunk order. Spectral starts need
   an n × k embedding and are replaced by k-means++ (recorded in ``start_kinds``, as one
   process does when a spectral start is not possible);
5. the winner's labels, inner sums and centres; labels stay on the workers until asked for.

Faults: every held array (features, labels) is a Dask future with its lineage (a task that
reads the rows from the file), so when a worker dies the scheduler recomputes what was lost
on the others and the run ends with the same result.
"""
import time
import warnings

import numpy as np

from ..kernels import KKMeansWarning
from . import chunks
from .readers import ChunkedData, default_chunk_rows, from_array

STALL_RTOL = 1e-13
#: Features are held on the workers when they take at most this fraction of their memory.
PERSIST_FRACTION = 0.5


class ClusterRun:
    """One fit's data and features on the cluster."""

    def __init__(self, client, data, progress=None):
        self.client = client
        self.data = data
        self.progress = progress or (lambda **info: None)
        self.fmap = None
        self.phi = None          # per chunk: a future of ("phi", Φ) or the data source
        self.persisted = False

    # -- helpers ---------------------------------------------------------------------------
    def map(self, fn, *per_chunk, shared=(), sources=None):
        """Submit fn(source_j, *shared, *per_chunk_j...) for every chunk j; futures in order."""
        sources = self.phi if sources is None else sources
        out = []
        for j, src in enumerate(sources):
            args = [a[j] for a in per_chunk]
            out.append(self.client.submit(fn, src, *shared, *args, pure=False))
        return out

    def gather(self, futures):
        return self.client.gather(futures)

    def take_rows(self, idx):
        """Data rows ``idx`` (global indices, any order), fetched from their chunks."""
        return self._take(idx, chunks.take_rows, self.data.sources, ())

    def take_features(self, idx):
        return self._take(idx, chunks.take_features, self.phi, (self.fmap,))

    def _take(self, idx, fn, sources, shared):
        idx = np.asarray(idx, dtype=np.intp)
        starts = np.array([b[0] for b in self.data.bounds])
        which = np.searchsorted(starts, idx, side="right") - 1
        order = np.argsort(which, kind="stable")
        parts, futures = [], []
        for j in np.unique(which):
            sel = order[which[order] == j]
            parts.append(sel)
            futures.append(self.client.submit(fn, sources[j], *shared, idx[sel] - starts[j],
                                              pure=False))
        rows = self.gather(futures)
        out = None
        for sel, r in zip(parts, rows):
            if out is None:
                out = np.empty((idx.size, r.shape[1]))
            out[sel] = r
        return out

    # -- features --------------------------------------------------------------------------
    def build_features(self, landmarks, transform, kernel, persist="auto"):
        from .cluster import worker_memory_total

        self.fmap = self.client.submit(chunks.FeatureMap, landmarks, transform, kernel,
                                       pure=False)
        need = 8.0 * self.data.n * landmarks.shape[0]
        total = worker_memory_total(self.client)
        if persist == "auto":
            persist = total == 0 or need <= PERSIST_FRACTION * total
        self.persisted = bool(persist)
        if self.persisted:
            self.phi = [self.client.submit(chunks.persist_features, s, self.fmap, pure=False)
                        for s in self.data.sources]
            self.gather([self.client.submit(chunks.n_rows, f, pure=False) for f in self.phi])
        else:
            self.phi = list(self.data.sources)

    # -- starts ----------------------------------------------------------------------------
    def kmeans_plusplus(self, k, rng, n_local_trials=None):
        """Labels (per-chunk futures) of k-means++ with unit weights, drawn exactly as
        ``initialization.kmeans_plusplus`` draws on the whole data."""
        n = self.data.n
        if n_local_trials is None:
            n_local_trials = 2 + int(np.log(k))
        first = _uniform_choice(n, rng)
        c0 = self.take_features([first])[0]
        states = self.map(chunks.kpp_first, shared=(self.fmap, None, c0))
        potential = _reduce_first(self.gather(self.map(chunks.kpp_mass, shared=(None,),
                                                       sources=states)))
        for c in range(1, k):
            draws = rng.uniform(size=n_local_trials) * potential
            cand = self._candidates(states, draws)
            pairs = [self.client.submit(chunks.kpp_candidates, src, self.fmap, st, None, cand,
                                        pure=False)
                     for src, st in zip(self.phi, states)]
            pots = _reduce(self.gather([self.client.submit(chunks.first_of, p, pure=False)
                                        for p in pairs]))
            best = int(np.argmin(pots))
            states = [self.client.submit(chunks.kpp_update, st, p, best, c, pure=False)
                      for st, p in zip(states, pairs)]
            potential = float(pots[best])
            self.progress(stage="start", done=c + 1, total=k)
        return [self.client.submit(chunks.labels_of, st, pure=False) for st in states]

    def _candidates(self, states, draws):
        """Features of the points np.searchsorted(cumsum(w·closest), draws) (clamped to
        n − 1) picks, with the running sum split by chunk: one map for the chunks' masses,
        one for the points in the chunks the draws fall in."""
        masses = self.gather(self.map(chunks.kpp_mass, shared=(None,), sources=states))
        ends = np.cumsum([m[1] for m in masses])
        starts = np.concatenate([[0.0], ends[:-1]])
        which = np.minimum(np.searchsorted(ends, draws, side="left"), len(states) - 1)
        # A draw past the last end (rounding) lands on the last point, as np.minimum(…, n − 1).
        groups = [(j, np.flatnonzero(which == j)) for j in np.unique(which)]
        found = self.gather([self.client.submit(chunks.kpp_locate_rows, self.phi[j], self.fmap,
                                                states[j], None, starts[j], draws[sel],
                                                pure=False) for j, sel in groups])
        cand = np.empty((len(draws), found[0][1].shape[1]))
        for (j, sel), (_, rows) in zip(groups, found):
            cand[sel] = rows
        return cand

    def random_centres(self, k, rng):
        centres = np.sort(rng.choice(self.data.n, size=k, replace=False))
        C = self.take_features(centres)
        return self.map(chunks.random_labels, shared=(self.fmap, C))

    # -- Lloyd -----------------------------------------------------------------------------
    def lloyd(self, labels, k, max_iter, tol, restart=0):
        """Lloyd's iterations from per-chunk start labels, as ``lloyd.lloyd``."""
        S, W, wdiag = self.sums_in_order(labels, k)
        g = np.einsum("ij,ij->i", S, S)
        obj = _objective(wdiag, g, W)
        trace = [obj]
        n_updates, n_relocated = 0, 0
        converged = stalled = False
        states = None
        while True:
            # (the weights are one for every point on the cluster route: None)
            pairs = [self.client.submit(chunks.assign, src, self.fmap, S, g, W, lab, None,
                                        pure=False) for src, lab in zip(self.phi, labels)]
            states = pairs
            summary = self.gather([self.client.submit(chunks.summary_of, p, pure=False)
                                   for p in pairs])
            S_new, W_new, wdiag, moved, inertia = _add_assign(summary, k)
            if np.any(W_new <= 0):
                count, states, S_new, W_new, wdiag, moved = self._relocate(states, labels,
                                                                          W_new, k)
                n_relocated += count
                if count:
                    warnings.warn(f"{count} empty cluster(s) refilled with the points "
                                  "farthest from their centres", KKMeansWarning, stacklevel=2)
            if moved == 0:
                converged = True
                dist_inertia = inertia
                break
            if n_updates == max_iter:
                break
            n_updates += 1
            labels = states
            S, W = S_new, W_new
            g = np.einsum("ij,ij->i", S, S)
            previous, obj = obj, _objective(wdiag, g, W)
            trace.append(obj)
            self.progress(stage="iteration", restart=restart, iteration=n_updates,
                          objective=obj, moved=moved)
            if abs(previous - obj) <= STALL_RTOL * abs(previous) and not n_relocated:
                stalled = True
                break
        if not converged:
            parts = self.gather([self.client.submit(chunks.own_distances, src, self.fmap,
                                                    S, g, W, lab, None, pure=False)
                                 for src, lab in zip(self.phi, labels)])
            dist_inertia = float(sum(parts))
            why = ("the objective stopped changing while tied points kept moving" if stalled
                   else f"max_iter={max_iter} was reached")
            warnings.warn(f"Lloyd did not converge ({why}); a few training points may be "
                          "closer to another centre than to their own", KKMeansWarning,
                          stacklevel=2)
        return Result(labels=labels, S=S, W=W, g=g, inertia=float(dist_inertia),
                      n_iter=n_updates + 1 if converged else n_updates, converged=converged,
                      trace=trace, n_relocated=n_relocated)

    def sums_in_order(self, labels, k):
        """(S, W, Σ w‖φ‖²) of per-chunk labels, the chunks' sums added in chunk order."""
        parts = self.gather([self.client.submit(chunks.sums, src, self.fmap, lab, None, k,
                                                pure=False)
                             for src, lab in zip(self.phi, labels)])
        return _add_sums(parts, k)

    def _relocate(self, states, old_labels, W_new, k):
        """``lloyd.relocate_empty_clusters`` over the chunks: candidates by decreasing
        distance (ties by index), each taken if its cluster keeps another point."""
        empty = np.flatnonzero(W_new <= 0)
        want = empty.size + k   # a skipped candidate is the last point of its cluster: ≤ k
        found = self.gather([self.client.submit(chunks.farthest, st, None, want, pure=False)
                             for st in states])
        members = np.sum(self.gather([self.client.submit(chunks.member_counts, st, None, k,
                                                         pure=False) for st in states]),
                         axis=0)
        cand = [(-dist, self.data.bounds[j][0] + int(i), j, int(i), int(lab))
                for j, (idx, dists, labs) in enumerate(found)
                for i, dist, lab in zip(idx, dists, labs)]
        cand.sort(key=lambda t: (t[0], t[1]))
        moves = {}
        moved = 0
        for _, _, j, i, lab in cand:
            if moved == empty.size:
                break
            if members[lab] < 2:
                continue
            members[lab] -= 1
            moves.setdefault(j, ([], []))
            moves[j][0].append(i)
            moves[j][1].append(int(empty[moved]))
            moved += 1
        states = [self.client.submit(chunks.relabel, st, *moves[j], pure=False)
                  if j in moves else st for j, st in enumerate(states)]
        labels = states
        S, W, wdiag = self.sums_in_order(labels, k)
        n_moved = int(sum(self.gather([self.client.submit(chunks.count_moved, a, b,
                                                          pure=False)
                                       for a, b in zip(labels, old_labels)])))
        return moved, states, S, W, wdiag, n_moved


class Result:
    def __init__(self, **kw):
        self.__dict__.update(kw)


def _reduce_first(parts):
    total = 0.0
    for p in parts:
        total += p[0]
    return total


def _reduce(parts):
    total = np.zeros_like(np.asarray(parts[0], dtype=np.float64))
    for p in parts:
        total += p
    return total


def _add_sums(parts, k):
    S = np.zeros_like(parts[0][0])
    W = np.zeros(k)
    wdiag = 0.0
    for s, w, wd in parts:
        S += s
        W += w
        wdiag += wd
    return S, W, wdiag


def _add_assign(parts, k):
    S = np.zeros_like(parts[0][0])
    W = np.zeros(k)
    wdiag, moved, inertia = 0.0, 0, 0.0
    for s, w, wd, mv, ine in parts:
        S += s
        W += w
        wdiag += wd
        moved += mv
        inertia += ine
    return S, W, wdiag, moved, inertia


def _objective(wdiag, g, W):
    nonempty = W > 0
    return float(wdiag - np.sum(g[nonempty] / W[nonempty]))


def _uniform_choice(n, rng, block=1 << 20):
    """``rng.choice(n, p=ones(n)/n)`` without an n-vector: one uniform draw, then the first
    index whose normalised running sum of the p_i exceeds it (the same sums as NumPy's)."""
    p = 1.0 / n
    u = rng.random()
    total, carry = None, 0.0
    for i0 in range(0, n, block):   # the running sum's last value, block by block
        cs = np.cumsum(np.concatenate([[carry], np.full(min(block, n - i0), p)]))[1:]
        carry = cs[-1]
    total, carry = carry, 0.0
    for i0 in range(0, n, block):
        cs = np.cumsum(np.concatenate([[carry], np.full(min(block, n - i0), p)]))[1:]
        carry = cs[-1]
        cs /= total
        j = int(np.searchsorted(cs, u, side="right"))
        if j < cs.size:
            return i0 + j
    return n - 1


# -- the estimator's fit on a cluster --------------------------------------------------------
def check_estimator(est):
    """The options the cluster route runs (ValueError otherwise)."""
    if est.approx != "nystroem":
        raise ValueError("a fit on a Dask cluster runs the Nyström route; use "
                         "approx='nystroem' (--approx nystroem)")
    if est.kernel in ("precomputed", "precomputed-distance"):
        raise ValueError("a fit on a Dask cluster needs the data, not a precomputed kernel")
    if not isinstance(est.init, str) or est.init == "spectral":
        raise ValueError("a fit on a Dask cluster starts from k-means++ or random centres; "
                         "init='spectral' and initial labels need the whole data on one "
                         "machine")


def resolve_gamma_on_cluster(run, est, gamma_rng):
    """``kernels.resolve_gamma`` with only the sampled rows brought to the client."""
    from ..kernels import GAMMA_KERNELS, MEDIAN_PAIRS, Kernel, resolve_gamma

    kernel, gamma, n = est.kernel, est.gamma, run.data.n
    if kernel not in GAMMA_KERNELS or not isinstance(gamma, str):
        value = resolve_gamma(kernel, gamma, np.zeros((1, 1)), gamma_rng)
    elif gamma == "scale" or kernel in ("poly", "sigmoid"):
        var = _variance(run.gather([run.client.submit(chunks.moments, s, pure=False)
                                    for s in run.data.sources]))
        if var > 0 and np.isfinite(var):
            value = 1.0 / (run.data.d * var)
        else:
            warnings.warn("the median heuristic for gamma is undefined (the data have zero "
                          "variance); using gamma = 1.0", KKMeansWarning, stacklevel=2)
            value = 1.0
    elif n * (n - 1) // 2 <= MEDIAN_PAIRS:
        value = resolve_gamma(kernel, gamma, run.take_rows(np.arange(n)), gamma_rng)
    else:
        i = gamma_rng.integers(0, n, size=MEDIAN_PAIRS)
        j = (i + gamma_rng.integers(1, n, size=MEDIAN_PAIRS)) % n
        wanted = np.union1d(i, j)
        rows = run.take_rows(wanted)
        value = _median_gamma(kernel, rows[np.searchsorted(wanted, i)],
                              rows[np.searchsorted(wanted, j)])
    return Kernel(kernel, value, int(est.degree), float(est.coef0))


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


def _median_gamma(kernel, Xi, Xj):
    """γ = 1/(2·median distance) of the sampled pairs (``kernels.resolve_gamma``'s rule)."""
    import warnings as _w

    diff = Xi - Xj
    if kernel == "rbf":
        dist = np.einsum("ij,ij->i", diff, diff)
    elif kernel == "laplacian":
        dist = np.abs(diff).sum(axis=1)
    else:
        tot = Xi + Xj
        with np.errstate(divide="ignore", invalid="ignore"):
            dist = np.where(tot != 0, diff * diff / np.where(tot != 0, tot, 1), 0.0).sum(1)
    positive = dist[dist > 0]
    if positive.size == 0:
        _w.warn("the median heuristic for gamma is undefined (all points are identical); "
                "using gamma = 1.0", KKMeansWarning, stacklevel=3)
        return 1.0
    med = float(np.median(dist))
    if med <= 0:
        med = float(np.median(positive))
    return 1.0 / (2.0 * med)


def fit_on_cluster(est, data, client, *, persist="auto", progress=None):
    """Fit ``est`` (a ``KernelKMeans`` with ``approx='nystroem'``) on the chunks of ``data``
    (:class:`ChunkedData`, or a Dask or NumPy array) with ``client``. Sets the fitted
    attributes as ``fit`` does; ``labels_`` is gathered on the client (n integers), the data
    never is."""
    from ..estimator import _rngs
    from ..nystroem import choose_landmarks, landmark_rng, landmark_transform, \
        resolve_landmarks
    from ..optima import start_kinds

    est._validate_params()
    check_estimator(est)
    if not isinstance(data, ChunkedData):
        data = from_array(client, data)
    n, k = data.n, est.n_clusters
    if k > n:
        raise ValueError(f"n_clusters={k} is larger than the number of samples ({n})")
    m = resolve_landmarks(est.n_landmarks, n, k)
    data = data.rechunked(default_chunk_rows(m, data.d))
    run = ClusterRun(client, data, progress)
    gamma_rng, fit_rng = _rngs(est.random_state)
    t0 = time.perf_counter()
    kernel = resolve_gamma_on_cluster(run, est, gamma_rng)
    est.kernel_ = kernel
    idx = choose_landmarks(n, m, landmark_rng(est.random_state))
    L = run.take_rows(idx)
    T, rank = landmark_transform(kernel, L, 1)
    run.build_features(L, T, kernel, persist)
    t1 = time.perf_counter()
    kinds = start_kinds(est.init, est.n_init, est.objective)
    kinds = ["k-means++" if "spectral" in kind else kind for kind in kinds]
    best, inertias = None, []
    for restart, kind in enumerate(kinds):
        if kind == "random":
            start = run.random_centres(k, fit_rng)
        else:
            start = run.kmeans_plusplus(k, fit_rng)
        result = run.lloyd(start, k, est.max_iter, est.tol, restart)
        inertias.append(result.inertia)
        run.progress(stage="restart", done=restart + 1, total=len(kinds),
                     inertia=result.inertia)
        if best is None or result.inertia < best.inertia:
            best = result
    t2 = time.perf_counter()
    labels = np.concatenate(client.gather([client.submit(chunks.labels_of_pair, f, pure=False)
                                           for f in best.labels])).astype(np.intp)
    W = best.W
    est._fit_n_features = data.d
    est.gamma_ = kernel.gamma
    est.labels_ = labels
    est.inertia_ = best.inertia
    est.inner_sums_ = best.g
    est.cluster_weights_ = W
    est.cluster_sizes_ = np.bincount(labels, minlength=k).astype(np.int64)
    est.n_iter_ = best.n_iter
    est.converged_ = best.converged
    est.sample_weight_ = np.ones(n)
    est.X_fit_ = None
    est.psd_ = None
    est.landmarks_ = L
    est.nystroem_transform_ = T
    est.n_landmarks_ = int(m)
    est.nystroem_rank_ = int(rank)
    est.centers_ = np.where(W[:, None] > 0, best.S / np.where(W > 0, W, 1.0)[:, None], 0.0)
    est.n_features_in_ = data.d
    est._fit_outer_sums = None
    b = int(np.argmin(inertias))
    est.fit_stats_ = {"kernel_seconds": t1 - t0, "iteration_seconds": t2 - t1,
                      "restart_inertias": inertias, "best_restart": b,
                      "n_threads": 1, "storage": "features" if run.persisted
                      else "features, recomputed per pass",
                      "start_kinds": kinds, "best_start": kinds[b], "refine": "none",
                      "spectral_method": None, "start_objective": best.trace[0],
                      "lloyd_objective": best.inertia, "refined_objective": best.inertia,
                      "refine_moves": 0, "cluster": _cluster_stats(client, data)}
    return est


def _cluster_stats(client, data):
    workers = client.scheduler_info().get("workers", {})
    return {"workers": len(workers), "chunks": len(data.bounds)}


# -- predict ---------------------------------------------------------------------------------
def model_namespace(est):
    """The fitted attributes ``nystroem.nearest`` reads, as a small picklable object."""
    from types import SimpleNamespace

    return SimpleNamespace(n_threads=1, n_features_in_=est.n_features_in_,
                           n_clusters=est.n_clusters, cluster_weights_=est.cluster_weights_,
                           inner_sums_=est.inner_sums_, centers_=est.centers_,
                           landmarks_=est.landmarks_,
                           nystroem_transform_=est.nystroem_transform_, kernel_=est.kernel_)


def predict_on_cluster(est, data, client):
    """Per-chunk futures of the labels (int32) of ``data`` (:class:`ChunkedData` or an
    array), in input order; ``nystroem.nearest`` runs on each chunk on the workers."""
    if getattr(est, "approx", "none") != "nystroem":
        raise ValueError("predict on a Dask cluster needs a Nyström model (approx='nystroem')")
    if not isinstance(data, ChunkedData):
        data = from_array(client, data)
    if data.d != est.n_features_in_:
        raise ValueError(f"X has {data.d} features, the model expects {est.n_features_in_}")
    data = data.rechunked(default_chunk_rows(est.landmarks_.shape[0], data.d))
    model = client.submit(lambda ns: ns, model_namespace(est), pure=False)
    return [client.submit(chunks.nearest, src, None, model, pure=False)
            for src in data.sources]
