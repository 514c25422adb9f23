"""Clustering quality measures in the feature space of a kernel, computed from K alone.

Notation (as in ``lloyd.py`` and ``docs/engine.md``): w the sample weights (1 by default),
labels the cluster of each point, W_c = Σ_{i∈c} w_i, the outer sums F[c, i] = Σ_{j∈c} w_j K_ij,
the cross sums C[a, b] = Σ_{i∈a} w_i F[b, i] = Σ_{i∈a, j∈b} w_i w_j K_ij, the inner sums
g_c = C[c, c], and the centre μ_c = Σ_{i∈c} w_i φ(x_i) / W_c. Then

    d(i, c)        = ‖φ(x_i) − μ_c‖² = K_ii − 2 F[c, i]/W_c + g_c/W_c²
    ‖μ_a − μ_b‖²   = g_a/W_a² + g_b/W_b² − 2 C[a, b]/(W_a W_b)

(both clamped at 0). One pass over K gives F; everything else is O(n·k).

- :func:`silhouette` — exact silhouette (Rousseeuw), one Cython/OpenMP pass over K;
- :func:`sampled_silhouette` — the same on a seeded, stratified sample (K[s][:, s]);
- :func:`silhouette_score` — chooses exact or sampled by ``max_exact``, reports which;
- :func:`simplified_silhouette` — distances to centres instead of to points (Theis 2023, §4.3.1);
- :func:`calinski_harabasz`, :func:`davies_bouldin` — through feature-space centres;
- :func:`scores` — several of them sharing one pass over K.

Empty labels (values in 0 … k−1 with no point) are ignored, as scikit-learn's label encoding
ignores labels that do not occur. The silhouettes are unweighted means over the points (as in
scikit-learn); ``sample_weight`` weights the centres (and the sums of CH and DB).
"""
from dataclasses import dataclass

import numpy as np

from ..engine import _lloyd
from ..engine.threads import effective_n_threads
from .. import memory
from . import _silhouette

#: Above this many points :func:`silhouette_score` samples instead of the exact O(n²) pass.
MAX_EXACT = 20_000
#: Default sample size of the sampled silhouette.
SAMPLE_SIZE = 10_000
METRICS = ("silhouette", "simplified_silhouette", "calinski_harabasz", "davies_bouldin")


# -- helpers --------------------------------------------------------------------------------
def _check_K(K):
    K = np.asarray(K)
    if K.ndim != 2 or K.shape[0] != K.shape[1]:
        raise ValueError(f"K must be a square kernel matrix, got shape {K.shape}")
    if K.dtype not in (np.float32, np.float64) or not K.flags.c_contiguous:
        K = np.ascontiguousarray(K, dtype=np.float64)
    return K


def check_labels(labels, n, min_clusters=2):
    """Labels as int32 0 … k−1 (relabelled to the labels that occur, in sorted order).

    The measures need 2 ≤ k ≤ n − 1 (as scikit-learn's); ``min_clusters=1`` (the sums of
    :func:`feature_sums`, defined for every k) accepts any 1 ≤ k ≤ n.
    """
    labels = np.asarray(labels)
    if labels.shape != (n,):
        raise ValueError(f"labels must have shape ({n},), got {labels.shape}")
    uniq, codes = np.unique(labels, return_inverse=True)
    k = uniq.size
    if min_clusters <= 1:
        if k < 1:
            raise ValueError("labels is empty")
    else:
        _check_measure_k(k, n)
    return codes.astype(np.int32).reshape(n), k


def _check_measure_k(k, n):
    if not 2 <= k <= n - 1:
        raise ValueError(f"the number of clusters is {k}; valid values are 2 to n_samples - 1 "
                         f"({n - 1})")


def check_weights(sample_weight, n):
    if sample_weight is None:
        return np.ones(n)
    w = np.ascontiguousarray(sample_weight, dtype=np.float64)
    if w.shape != (n,) or not np.all(np.isfinite(w)) or np.any(w < 0):
        raise ValueError(f"sample_weight must be finite, non-negative, of shape ({n},)")
    return w


@dataclass
class FeatureSums:
    """The sums every centre-based measure is written with (see the module docstring).

    Attributes: ``diag`` K_ii, ``weights`` w, ``labels`` int32, ``F`` (k×n) outer sums, ``C`` (k×k)
    cross sums (symmetrised), ``g`` = diag(C), ``W`` cluster weights, ``sizes`` member counts.
    """

    diag: np.ndarray
    weights: np.ndarray
    labels: np.ndarray
    F: np.ndarray
    C: np.ndarray
    g: np.ndarray
    W: np.ndarray
    sizes: np.ndarray

    @property
    def k(self):
        return self.F.shape[0]

    def point_centre_sq(self):
        """d(i, c) = K_ii − 2 F[c, i]/W_c + g_c/W_c², shape (n, k), clamped at 0."""
        out = np.empty((self.F.shape[1], self.k))
        _lloyd.distances(self.F, self.g, self.W, self.diag, out, 1)
        return out

    def centre_centre_sq(self):
        """‖μ_a − μ_b‖² = g_a/W_a² + g_b/W_b² − 2 C[a, b]/(W_a W_b), clamped at 0."""
        with np.errstate(divide="ignore", invalid="ignore"):
            s = self.g / self.W ** 2
            D = s[:, None] + s[None, :] - 2.0 * self.C / np.outer(self.W, self.W)
        D = np.maximum(D, 0.0)
        np.fill_diagonal(D, 0.0)
        return D


def feature_sums(K, labels, sample_weight=None, n_threads=None, *, F=None):
    """One pass over K: the :class:`FeatureSums` of ``labels`` (relabelled to 0 … k−1), for
    any number of clusters 1 ≤ k ≤ n (the measures built on them need 2 ≤ k ≤ n − 1).

    ``F``, the outer sums of these labels and weights when already computed (e.g. by the fused
    pass of :func:`silhouette_and_sums`), saves the pass.
    """
    K = _check_K(K)
    n = K.shape[0]
    labels, k = check_labels(labels, n, min_clusters=1)
    w = check_weights(sample_weight, n)
    if F is None:
        F = np.empty((k, n))
        _lloyd.outer_sums_rows(K, 0, labels, w, F, effective_n_threads(n_threads))
    C = np.empty((k, k))
    wF = F * w
    for b in range(k):  # C[a, b] = Σ_{i∈a} w_i F[b, i]
        C[:, b] = np.bincount(labels, weights=wF[b], minlength=k)
    C = 0.5 * (C + C.T)
    W = np.bincount(labels, weights=w, minlength=k)
    if np.any(W <= 0):
        raise ValueError("every cluster needs a point of positive sample_weight")
    return FeatureSums(diag=np.array(np.diagonal(K), dtype=np.float64), weights=w,
                       labels=labels, F=F, C=C, g=np.diagonal(C).copy(), W=W,
                       sizes=np.bincount(labels, minlength=k))


# -- silhouette -----------------------------------------------------------------------------
def silhouette_samples(K, labels, n_threads=None):
    """Exact silhouette of every point, in feature space.

    With δ_ij = sqrt(max(K_ii + K_jj − 2 K_ij, 0)) and point i in cluster A,

        a_i = Σ_{j∈A} δ_ij / (n_A − 1),   b_i = min_{B≠A} Σ_{j∈B} δ_ij / n_B,
        s_i = (b_i − a_i) / max(a_i, b_i)      (0 for singletons),

    equal to ``sklearn.metrics.silhouette_samples(δ, labels, metric="precomputed")``. One
    Cython/OpenMP pass over K, O(n·threads) extra memory, result independent of the threads.

    Parameters
    ----------
    K : ndarray (n, n), float32 or float64
        Symmetric kernel matrix (C-contiguous; otherwise a float64 copy is made).
    labels : array-like (n,)
        Any labels; 2 ≤ number of distinct labels ≤ n − 1.
    n_threads : int or None

    Returns
    -------
    ndarray (n,) float64
    """
    K = _check_K(K)
    n = K.shape[0]
    codes, counts = stacked([labels], n)
    diag = np.array(np.diagonal(K), dtype=np.float64)
    out = np.empty((1, n))
    _silhouette.silhouette_rows(K, 0, diag, codes, counts, out, effective_n_threads(n_threads))
    return out[0]


def stacked(labelings, n):
    """Labellings as (L, n) int32 codes 0 … k_l − 1 and their (L, max k_l) counts (zero
    beyond k_l), the form ``_silhouette.silhouette_rows`` takes."""
    checked = [check_labels(labels, n) for labels in labelings]
    k_max = max(k for _, k in checked)
    codes = np.empty((len(checked), n), dtype=np.int32)
    counts = np.zeros((len(checked), k_max))
    for l, (c, k) in enumerate(checked):
        codes[l] = c
        counts[l, :k] = np.bincount(c, minlength=k)
    return codes, counts


def silhouette_and_sums(K, labels, sample_weight=None, n_threads=None):
    """Exact silhouette samples and :class:`FeatureSums` from one fused pass over K.

    Each row of K is read once for both the distance sums of the silhouette and the outer sums
    F of the centre-based measures. Returns ``(samples, sums)``.
    """
    return silhouettes_and_sums(K, [labels], sample_weight, n_threads)[0]


def silhouettes_and_sums(K, labelings, sample_weight=None, n_threads=None, outer_sums=None):
    """:func:`silhouette_and_sums` of several labellings of the same points (a sweep over k)
    from ONE pass over K: each row is read, and its distances taken, once for all of them.

    The outer sums of all labellings are held at once (L × max k × n floats); labellings are
    taken in groups that keep them within ``memory.BLOCK_BYTES``. ``outer_sums``: F of every
    labelling (k_l × n, with these weights, on this K) when already known — e.g. from the
    fits' final passes — so the pass only sums distances. Returns a list of
    ``(samples, sums)``, one per labelling.
    """
    K = _check_K(K)
    n = K.shape[0]
    w = check_weights(sample_weight, n)
    diag = np.array(np.diagonal(K), dtype=np.float64)
    n_threads = effective_n_threads(n_threads)
    codes, counts = stacked(labelings, n)
    known = outer_sums is not None and all(F is not None for F in outer_sums)
    group = len(labelings) if known else max(1, memory.BLOCK_BYTES // (8 * n * counts.shape[1]))
    found = []
    for g0 in range(0, len(labelings), group):
        g1 = min(g0 + group, len(labelings))
        out = np.empty((g1 - g0, n))
        F = None if known else np.empty((g1 - g0, counts.shape[1], n))
        _silhouette.silhouette_rows(K, 0, diag, codes[g0:g1], counts[g0:g1], out, n_threads,
                                    w, F)
        for l in range(g1 - g0):
            k = int(np.count_nonzero(counts[g0 + l]))
            F_l = outer_sums[g0 + l] if known else F[l, :k]
            found.append((out[l], feature_sums(K, labelings[g0 + l], w, n_threads, F=F_l)))
    return found


def silhouette(K, labels, n_threads=None, *, return_samples=False):
    """Exact mean silhouette (1/n) Σ_i s_i; see :func:`silhouette_samples` for s_i.

    Returns the mean, or ``(mean, samples)`` with ``return_samples=True``.
    """
    s = silhouette_samples(K, labels, n_threads)
    mean = float(np.mean(s))
    return (mean, s) if return_samples else mean


def silhouette_blocks(X, labels, kernel, n_threads=None, dtype=np.float64):
    """Exact silhouette samples from the data, without the n×n matrix.

    Rows of K are recomputed in blocks by ``kernel`` (a :class:`~kkmeans_cli.kernels.functions.Kernel`
    with resolved parameters, e.g. ``estimator.kernel_``), each block passed once to the engine:
    memory is one block of rows, time is one kernel evaluation of all pairs.
    """
    X = np.ascontiguousarray(X, dtype=np.float64)
    n = X.shape[0]
    labels, k = check_labels(labels, n)
    n_threads = effective_n_threads(n_threads)
    codes, counts = stacked([labels], n)
    diag = np.asarray(kernel.diag(X), dtype=np.float64)
    out = np.empty((1, n))
    for i0, _, rows in kernel.cross_blocks(X, X, dtype=dtype, n_threads=n_threads):
        _silhouette.silhouette_rows(rows, i0, diag, codes, counts, out, n_threads)
    return out[0]


def stratified_sample(labels, sample_size, random_state=0):
    """A seeded sample of point indices in which every cluster is represented.

    Each cluster c of size n_c gets min(n_c, 2) points (two, so that its a_i is defined), the
    rest of ``sample_size`` is shared in proportion to n_c (largest remainders, ties to the
    lower label), and the points of each cluster are drawn without replacement by
    ``numpy.random.default_rng(random_state)``.

    Returns
    -------
    ndarray of intp, sorted; its length is max(sample_size, Σ_c min(n_c, 2)), at most n.
    """
    labels = np.asarray(labels)
    n = labels.shape[0]
    uniq, codes = np.unique(labels, return_inverse=True)
    codes = codes.reshape(n)
    sizes = np.bincount(codes, minlength=uniq.size)
    sample_size = int(sample_size)
    if sample_size < 1:
        raise ValueError(f"sample_size must be >= 1, got {sample_size}")
    if sample_size >= n:
        return np.arange(n)
    take = np.minimum(sizes, 2)
    rest = sample_size - take.sum()
    if rest > 0:
        room = sizes - take
        share = rest * room / room.sum()
        extra = np.floor(share).astype(np.int64)
        left = rest - extra.sum()
        order = np.lexsort((np.arange(uniq.size), -(share - extra)))
        extra[order[:left]] += 1
        take = take + np.minimum(extra, room)
    rng = np.random.default_rng(random_state)
    order = np.argsort(codes, kind="stable")
    starts = np.concatenate(([0], np.cumsum(sizes)))
    picked = [rng.choice(order[starts[c]:starts[c + 1]], size=take[c], replace=False)
              for c in range(uniq.size)]
    return np.sort(np.concatenate(picked))


@dataclass
class SilhouetteScore:
    """A silhouette and how it was obtained.

    ``score`` the mean silhouette; ``n_used`` the number of points it averages (n when exact);
    ``exact`` False when it was computed on a stratified sample; ``indices`` the sample (None
    when exact).
    """

    score: float
    n_used: int
    exact: bool
    indices: np.ndarray = None


def sampled_silhouette(labels, sample_size=SAMPLE_SIZE, *, K=None, X=None, kernel=None,
                       random_state=0, n_threads=None):
    """Silhouette of a seeded, stratified sample s of the points (:func:`stratified_sample`).

    Computed on the sub-matrix K[s][:, s] — distances within the sample only, the semantics of
    ``sklearn.metrics.silhouette_score(..., sample_size=)`` — taken from ``K`` when given, else
    ``kernel.matrix(X[s])``. Memory is |s|², whatever n.

    Returns
    -------
    SilhouetteScore
    """
    n = _n_points(labels, K, X, kernel)
    s = stratified_sample(labels, sample_size, random_state)
    if K is not None:
        K = np.asarray(K)
        sub = np.ascontiguousarray(K[np.ix_(s, s)])
    else:
        sub = kernel.matrix(np.asarray(X)[s], n_threads=effective_n_threads(n_threads))
    score = silhouette(sub, np.asarray(labels)[s], n_threads)
    return SilhouetteScore(score=score, n_used=int(s.size), exact=s.size == n, indices=s)


def silhouette_score(labels, *, K=None, X=None, kernel=None, max_exact=MAX_EXACT,
                     sample_size=SAMPLE_SIZE, random_state=0, n_threads=None):
    """The silhouette, exact when n ≤ ``max_exact``, else on a stratified sample.

    The rule, so that nothing large is allocated silently:

    - n ≤ ``max_exact`` and ``K`` given: exact pass over K (no extra n² memory);
    - n ≤ ``max_exact`` and only ``X``, ``kernel``: exact, K recomputed in row blocks
      (:func:`silhouette_blocks`, memory of one block);
    - n > ``max_exact`` (``max_exact=None``: never): :func:`sampled_silhouette` with
      ``sample_size`` points (memory ``sample_size``²), reported in the result.

    Returns
    -------
    SilhouetteScore
    """
    n = _n_points(labels, K, X, kernel)
    if max_exact is not None and n > max_exact:
        return sampled_silhouette(labels, sample_size, K=K, X=X, kernel=kernel,
                                  random_state=random_state, n_threads=n_threads)
    if K is not None:
        score = silhouette(K, labels, n_threads)
    else:
        score = float(np.mean(silhouette_blocks(X, labels, kernel, n_threads)))
    return SilhouetteScore(score=score, n_used=n, exact=True)


def _n_points(labels, K, X, kernel):
    n = np.asarray(labels).shape[0]
    if K is None and (X is None or kernel is None):
        raise ValueError("give K, or X with its kernel")
    m = (K if K is not None else X).shape[0]
    if m != n:
        raise ValueError(f"labels has {n} entries for {m} points")
    return n


# -- centre-based measures ------------------------------------------------------------------
def _sums(K, labels, sample_weight, n_threads, sums):
    """The sums of a centre-based measure, which needs 2 ≤ k ≤ n − 1 clusters."""
    fs = sums if sums is not None else feature_sums(K, labels, sample_weight, n_threads)
    _check_measure_k(fs.k, fs.F.shape[1])
    return fs


def simplified_silhouette(K=None, labels=None, sample_weight=None, n_threads=None, *,
                          return_samples=False, sums=None):
    """Simplified silhouette (Theis 2023, §4.3.1): distances to centres instead of to points.

        a_i = ‖φ(x_i) − μ_{c(i)}‖ = sqrt(d(i, c(i))),   b_i = min_{c≠c(i)} sqrt(d(i, c)),
        s_i = (b_i − a_i) / max(a_i, b_i)

    with s_i = 0 for the point of a singleton cluster (as in the exact silhouette; a_i would be
    0) and when max(a_i, b_i) = 0. Score: the plain mean of s_i. O(n·k) from the outer sums
    (one pass over K, or none when ``sums`` from :func:`feature_sums` is given).
    """
    fs = _sums(K, labels, sample_weight, n_threads, sums)
    d = np.sqrt(fs.point_centre_sq())
    n = d.shape[0]
    own = d[np.arange(n), fs.labels]
    d[np.arange(n), fs.labels] = np.inf
    other = d.min(axis=1)
    m = np.maximum(own, other)
    with np.errstate(invalid="ignore", divide="ignore"):
        s = np.where(m > 0, (other - own) / m, 0.0)
    s[fs.sizes[fs.labels] <= 1] = 0.0
    mean = float(np.mean(s))
    return (mean, s) if return_samples else mean


def calinski_harabasz(K=None, labels=None, sample_weight=None, n_threads=None, *, sums=None):
    """Calinski-Harabasz index in feature space.

    With N = Σ_i w_i (n for unit weights) and G = Σ_{a,b} C[a, b] = Σ_{i,j} w_i w_j K_ij,

        between  B = Σ_c W_c ‖μ_c − μ‖² = Σ_c g_c/W_c − G/N
        within   E = Σ_i w_i ‖φ(x_i) − μ_{c(i)}‖² = Σ_i w_i K_ii − Σ_c g_c/W_c   (the inertia)
        CH       = (B / (k − 1)) / (E / (N − k))            (1 when E = 0, as scikit-learn)

    Equals ``sklearn.metrics.calinski_harabasz_score`` for the linear kernel and unit weights.
    """
    fs = _sums(K, labels, sample_weight, n_threads, sums)
    N = float(fs.weights.sum())
    k = fs.k
    own = float(np.sum(fs.g / fs.W))
    between = own - float(fs.C.sum()) / N
    within = float(fs.weights @ fs.diag) - own
    if within <= 0.0:
        return 1.0
    return float(between * (N - k) / (within * (k - 1.0)))


def davies_bouldin(K=None, labels=None, sample_weight=None, n_threads=None, *, sums=None):
    """Davies-Bouldin index in feature space (lower is better).

        S_c   = Σ_{i∈c} w_i sqrt(d(i, c)) / W_c           (mean distance to the centre)
        M_ab  = ‖μ_a − μ_b‖ = sqrt(g_a/W_a² + g_b/W_b² − 2 C[a, b]/(W_a W_b))
        DB    = (1/k) Σ_a max_{b≠a} (S_a + S_b) / M_ab

    As ``sklearn.metrics.davies_bouldin_score`` (which it equals for the linear kernel and unit
    weights): 0 when all S_c or all M_ab are (close to) 0; coincident centres (M_ab = 0) are
    left out of the max.
    """
    fs = _sums(K, labels, sample_weight, n_threads, sums)
    n = fs.F.shape[1]
    d_own = np.sqrt(fs.point_centre_sq()[np.arange(n), fs.labels])
    S = np.bincount(fs.labels, weights=fs.weights * d_own, minlength=fs.k) / fs.W
    M = np.sqrt(fs.centre_centre_sq())
    if np.allclose(S, 0) or np.allclose(M, 0):
        return 0.0
    M[M == 0] = np.inf
    ratio = (S[:, None] + S[None, :]) / M
    return float(np.mean(np.max(ratio, axis=1)))


def scores(K, labels, metrics=METRICS, sample_weight=None, n_threads=None, *,
           max_exact=MAX_EXACT, sample_size=SAMPLE_SIZE, random_state=0):
    """Several measures of one labelling, sharing one pass over K for the centre-based ones.

    Parameters
    ----------
    K : ndarray (n, n)
    labels : array-like (n,)
    metrics : iterable of names from :data:`METRICS`
    sample_weight, n_threads : as in the single functions
    max_exact, sample_size, random_state : the silhouette rule of :func:`silhouette_score`

    Returns
    -------
    dict
        name → value, in the order of ``metrics``; with 'silhouette' also
        ``silhouette_n_used`` (the points it averages; < n when sampled).
    """
    n = np.asarray(labels).shape[0]

    def silhouette():
        if max_exact is None or n <= max_exact:  # one pass over K for the silhouette and sums
            samples, fs = silhouette_and_sums(K, labels, sample_weight, n_threads)
            return float(np.mean(samples)), n, fs
        res = silhouette_score(labels, K=K, max_exact=max_exact, sample_size=sample_size,
                               random_state=random_state, n_threads=n_threads)
        return res.score, res.n_used, None

    return scores_with(metrics, silhouette,
                       lambda: feature_sums(K, labels, sample_weight, n_threads))


def scores_many(K, labelings, metrics=METRICS, sample_weight=None, n_threads=None, *,
                max_exact=MAX_EXACT, sample_size=SAMPLE_SIZE, random_state=0,
                outer_sums=None):
    """:func:`scores` of several labellings of the same points (a sweep over k); an exact
    silhouette and the sums of every labelling come from one pass over K
    (:func:`silhouettes_and_sums`, which takes ``outer_sums``). Returns a list of dicts."""
    n = K.shape[0]
    if "silhouette" not in metrics or (max_exact is not None and n > max_exact):
        return [scores(K, labels, metrics, sample_weight, n_threads, max_exact=max_exact,
                       sample_size=sample_size, random_state=random_state)
                for labels in labelings]
    found = silhouettes_and_sums(K, labelings, sample_weight, n_threads, outer_sums)
    return [scores_with(metrics, lambda s=samples, f=fs: (float(np.mean(s)), n, f),
                        lambda f=fs: f)
            for samples, fs in found]


def scores_with(metrics, silhouette, sums):
    """The measures of :func:`scores` from any representation of the kernel.

    ``silhouette()`` returns (score, points used, :class:`FeatureSums` or None when it did not
    produce them); ``sums()`` returns the :class:`FeatureSums`, and is called at most once.
    """
    unknown = [m for m in metrics if m not in METRICS]
    if unknown:
        raise ValueError(f"unknown metric(s) {unknown}; choose from {list(METRICS)}")
    centre_measures = {"simplified_silhouette": simplified_silhouette,
                       "calinski_harabasz": calinski_harabasz,
                       "davies_bouldin": davies_bouldin}
    out, fs = {}, None
    for name in metrics:
        if name == "silhouette":
            out["silhouette"], out["silhouette_n_used"], fused = silhouette()
            fs = fused if fused is not None else fs
            continue
        if fs is None:
            fs = sums()
        out[name] = centre_measures[name](sums=fs)
    return out
