"""Kernel functions, their parameters and the kernel matrix.

A :class:`Kernel` holds a kernel's name and resolved parameters and computes

- ``matrix(X)``: the symmetric n×n kernel matrix, lower-triangle row blocks from BLAS products
  (``X[i0:i1] @ X[:i1].T``) turned into kernel values by one OpenMP pass, then mirrored;
- ``cross(A, B)``: the kernel rows K(A, B), in row blocks, the same arithmetic as ``matrix``;
- ``diag(A)``: K(a, a) for each row of A.

Formulas follow scikit-learn's ``pairwise_kernels``; see ``ext/kernels/_kernel_matrix.pyx``.

Data far from the origin
    The Gram-type kernels get squared distances from products, ‖a‖² + ‖b‖² − 2a·b, which
    cancel catastrophically when the points share a large offset (at 10⁸ nothing of a unit
    distance is left), and the linear kernel's objective Σ w_i K_ii − Σ_c g_c/W_c cancels the
    same way. Both are unchanged by a common shift of the data, so the kernel subtracts one:
    ``Kernel.offset`` (from :func:`data_offset`, the mean of the training rows) is taken from
    every row before any product, in ``matrix``, ``cross`` and ``diag`` alike, so the fit,
    ``predict``, the Nyström features and the measures all see the same centred points.
    For rbf K itself does not change (up to rounding); for the linear kernel K becomes the
    Gram matrix of the centred data, whose kernel k-means objective (the inertia) equals
    the uncentred one. The L1-type kernels take differences directly and need no offset.
"""
import math
import warnings
from dataclasses import dataclass, field

import numpy as np

from .. import _options
from ..engine.threads import blas_threads, thread_pool
from ..errors import KKMeansWarning, OptionConflictError, ValueRangeError
from ..memory import row_blocks
from . import _kernel_matrix
from .psd import gower_kernel

KERNELS = _options.KERNELS
GAMMA_KERNELS = ("rbf", "poly", "sigmoid", "laplacian", "chi2")
# Kernels computed from products whose k-means objective does not change when the data are
# shifted: the data are centred for them (see the module docstring and data_offset).
CENTRED_KERNELS = ("rbf", "linear")
_GRAM_CODE = {"linear": 0, "poly": 1, "rbf": 2, "sigmoid": 3, "cosine": 4}
_L1_CODE = {"laplacian": 5, "chi2": 6}
# Below this many features a Gram block is cheap and one BLAS thread is best: idle OpenBLAS
# threads spin-wait and slow the OpenMP pass that follows (measured 10x on 2 cores).
# Blocks with fewer entries than this are computed on one thread: waking the other threads
# (OpenMP's spin-waiting workers, Python threads for exp) costs more than the block, and on a
# loaded 2-core machine far more (measured: a blocked Elkan run with thousands of small
# blocks took 14 s on 2 threads, 0.17 s on one).
SMALL_BLOCK = 1 << 16
BLAS_THREADS_MIN_FEATURES = 64
# Rows of new points per call of the fused rbf sums (predict); bounds the k×rows buffer.
FUSED_BLOCK_ROWS = 1 << 16
# Fused sums over fewer kernel values than this run on one thread: waking the second costs
# more. On a loaded 2-core machine 1,250² values took 1.4 ns each on one thread and 7.9 ns of
# CPU each on two (the second thread waits for a busy core), so this was 2²²; on a quiet one
# the ~3·10⁶-value calls of Hartigan's candidates take 1.1 ns a value on two threads against
# 1.7 on one (blocked full restarts, i.i.d. normal 12,000 × 5: 21.2 s → 18.7 s).
FUSED_PARALLEL_MIN = 1 << 20
# Pairs sampled for the median heuristic.
MEDIAN_PAIRS = 20_000


@dataclass(frozen=True)
class Kernel:
    """A kernel with resolved parameters.

    Parameters
    ----------
    name : str
        One of :data:`KERNELS`.
    gamma : float or None
        Width (rbf, laplacian, chi2) or scale (poly, sigmoid); None for kernels without one.
    degree : int
        Degree of ``poly``.
    coef0 : float
        Offset of ``poly`` and ``sigmoid``.
    offset : ndarray of shape (n_features,) or None
        A point subtracted from every row before the kernel is evaluated (see
        :func:`data_offset`); None: the rows as given. Not a kernel parameter: for rbf it
        changes only the rounding, for the linear kernel K but not its k-means objective.
    """

    name: str
    gamma: float = None
    degree: int = 3
    coef0: float = 1.0
    offset: np.ndarray = field(default=None, compare=False, repr=False)

    def params(self):
        """The parameters that define this kernel, for reports and model files."""
        out = {"kernel": self.name}
        if self.name in GAMMA_KERNELS:
            out["gamma"] = float(self.gamma)
        if self.name == "poly":
            out["degree"] = int(self.degree)
        if self.name in ("poly", "sigmoid"):
            out["coef0"] = float(self.coef0)
        return out

    def describe(self):
        """``rbf(gamma=0.5)`` style text for people."""
        inner = ", ".join(f"{k}={v:g}" for k, v in self.params().items() if k != "kernel")
        return f"{self.name}({inner})" if inner else self.name

    # -- computation -------------------------------------------------------------------------
    def centred(self, X):
        """X − ``offset`` as float64, C-contiguous: the points the kernel formulas see.

        Every method applies it, to every argument, with the same elementwise subtraction,
        so a row gives the same kernel values in the matrix, in blocks and in ``predict``.
        """
        X = np.ascontiguousarray(X, dtype=np.float64)
        return X if self.offset is None else X - self.offset

    def matrix(self, X, dtype=np.float64, n_threads=1, out=None):
        """The symmetric kernel matrix K(X, X) as a C-contiguous ``dtype`` array.

        The lower triangle is computed in row blocks and mirrored, so K is exactly symmetric.
        """
        X = np.ascontiguousarray(X, dtype=np.float64)
        n = X.shape[0]
        if self.name == "precomputed":
            return np.ascontiguousarray(X, dtype=dtype)
        if self.name == "precomputed-distance":  # Gower: K = −½ J D∘² J (see psd.py)
            return gower_kernel(X, dtype=dtype)
        X = self.centred(X)
        K = np.empty((n, n), dtype=dtype) if out is None else out
        sq = _row_sq_norms(X)
        work = Workspace()
        for i0, i1 in row_blocks(n, n):
            self._fill_block(X[i0:i1], X[:i1], sq[i0:i1], sq[:i1], K, i0, n_threads, work)
            _kernel_matrix.mirror_rows(K, i0, i1, n_threads)
        return K

    def cross(self, A, B, dtype=np.float64, n_threads=1, out=None, work=None):
        """Kernel rows K(A, B), shape (len(A), len(B)), computed in row blocks of A.

        ``out`` (C-contiguous, of that shape and ``dtype``) and ``work`` (a
        :class:`Workspace`) let callers that compute many small blocks reuse their memory.
        """
        if self.name in ("precomputed", "precomputed-distance"):
            raise ValueError("a precomputed kernel has no kernel function; pass kernel rows")
        return self._cross(self.centred(A), self.centred(B), dtype, n_threads, out, work)

    def _cross(self, A, B, dtype, n_threads, out, work):
        """:meth:`cross` of rows already centred (float64, C-contiguous)."""
        if out is None:
            out = np.empty((A.shape[0], B.shape[0]), dtype=dtype)
        sq_a, sq_b = _row_sq_norms(A), _row_sq_norms(B)
        work = Workspace() if work is None else work
        for i0, i1 in row_blocks(A.shape[0], B.shape[0]):
            self._fill_block(A[i0:i1], B, sq_a[i0:i1], sq_b, out, i0, n_threads, work)
        return out

    def cross_blocks(self, A, B, dtype=np.float64, n_threads=1):
        """Yield (i0, i1, K(A[i0:i1], B)) in row blocks that fit the block budget (A and B
        centred once, not per block)."""
        if self.name in ("precomputed", "precomputed-distance"):
            raise ValueError("a precomputed kernel has no kernel function; pass kernel rows")
        A, B = self.centred(A), self.centred(B)
        for i0, i1 in row_blocks(A.shape[0], B.shape[0]):
            yield i0, i1, self._cross(A[i0:i1], B, dtype, n_threads, None, None)

    def fused_outer_sums(self, A, B, labels, weights, n_clusters, n_threads=1,
                         block_rows=FUSED_BLOCK_ROWS):
        """F[c, r] = Σ_{j: labels_j = c} w_j K(a_r, b_j), shape (k, len(A)), without storing
        kernel values: the distances, the exponential and the float64 sums fused per row
        (``_rbf_sums.h``), so predict reads each kernel value once, from registers. rbf only
        (None for the other kernels, which go through :meth:`cross`). Results do not depend
        on ``n_threads``; they equal the sums over :meth:`cross`'s rows up to rounding."""
        if self.name != "rbf":
            return None
        A = self.centred(np.ascontiguousarray(A, dtype=np.float64))
        B = self.centred(np.asarray(B, dtype=np.float64))
        F = np.empty((n_clusters, A.shape[0]))
        for i0 in range(0, A.shape[0], block_rows):
            # the block's rows and the points B, as rows of one array (rbf_sums_of's form)
            i1 = min(i0 + block_rows, A.shape[0])
            both = np.concatenate([A[i0:i1], B])
            F[:, i0:i1] = self.fused_sums_of(both, np.arange(i1 - i0),
                                             np.arange(i1 - i0, both.shape[0]), labels,
                                             weights, n_clusters, n_threads)
        return F

    def fused_sums_of(self, X, rows, cols, labels, weights, n_clusters, n_threads=1):
        """F[c, r] = Σ_{j: labels_j = c} w_j K(x_rows[r], x_cols[j]) (k×len(rows)) on the rows
        of X, centred by the caller (:meth:`centred`): the sums of :meth:`fused_outer_sums`
        without copying the points first (the kernel source keeps X centred). ``labels`` and
        ``weights`` go with ``cols``. rbf only (None for the other kernels)."""
        if self.name != "rbf":
            return None
        rows = np.ascontiguousarray(rows, dtype=np.intp)
        cols = np.ascontiguousarray(cols, dtype=np.intp)
        if rows.size * cols.size < FUSED_PARALLEL_MIN:
            n_threads = 1
        F = np.empty((n_clusters, rows.size))
        _kernel_matrix.rbf_sums_of(X, rows, cols, np.ascontiguousarray(labels, dtype=np.int32),
                                   np.ascontiguousarray(weights, dtype=np.float64),
                                   float(self.gamma), F, n_threads)
        return F

    def fused_replay(self, X, rows, starts, moved, src, dst, weights, F, n_threads=1):
        """Elkan's log of moves replayed into the outer sums F (k×n): for each point
        ``rows[r]`` of the data X, each move j ≥ ``starts[r]`` of the log (point
        ``moved[j]`` of X from ``src[j]`` to ``dst[j]``, weight ``weights[j]``) adds
        w_j K(x_rows[r], x_moved[j]) to F[dst_j, rows[r]] and subtracts it from
        F[src_j, rows[r]], each value computed once and never stored (``_rbf_sums.h``). X is
        centred by the caller (:meth:`centred`). rbf only: False (nothing done) for the other
        kernels. Results do not depend on ``n_threads``."""
        if self.name != "rbf":
            return False
        starts = np.ascontiguousarray(starts, dtype=np.intp)
        if starts.size == 0 or int(starts.min()) >= len(moved):
            return True
        first = int(starts.min())        # only the log from the earliest start on
        if int(np.sum(len(moved) - starts)) < SMALL_BLOCK:
            n_threads = 1
        _kernel_matrix.rbf_replay(
            X, np.ascontiguousarray(rows, dtype=np.intp), starts - first,
            np.ascontiguousarray(moved[first:], dtype=np.intp),
            np.ascontiguousarray(src[first:], dtype=np.int32),
            np.ascontiguousarray(dst[first:], dtype=np.int32),
            np.ascontiguousarray(weights[first:], dtype=np.float64), float(self.gamma), F,
            n_threads)
        return True

    def diag(self, A):
        """K(a, a) for every row a of A (float64)."""
        A = np.asarray(A, dtype=np.float64)
        if self.name in ("rbf", "laplacian", "chi2"):
            return np.ones(A.shape[0])
        A = self.centred(A)
        if self.name == "cosine":
            return (_row_sq_norms(A) > 0).astype(np.float64)
        sq = _row_sq_norms(A)
        if self.name == "linear":
            return sq
        if self.name == "poly":
            return (self.gamma * sq + self.coef0) ** self.degree
        if self.name == "sigmoid":
            return np.tanh(self.gamma * sq + self.coef0)
        raise ValueError("a precomputed kernel has no kernel function")  # or distance

    def _fill_block(self, A, B, sq_a, sq_b, out, row_start, n_threads, work):
        if A.shape[0] * B.shape[0] < SMALL_BLOCK:
            n_threads = 1
        gamma = float(self.gamma) if self.gamma is not None else 0.0
        target = out[row_start:row_start + A.shape[0], :B.shape[0]]
        G = work.block(A.shape[0], B.shape[0])
        if self.name in _L1_CODE:
            _kernel_matrix.l1_exponent(A, B, G, _L1_CODE[self.name], gamma, n_threads)
            _parallel_exp(G, target, n_threads)
            return
        with blas_threads(n_threads if A.shape[1] >= BLAS_THREADS_MIN_FEATURES else 1):
            np.matmul(A, B.T, out=G)
        if self.name == "rbf":
            _kernel_matrix.rbf_exponent(G, sq_a, sq_b, gamma, n_threads)
            _parallel_exp(G, target, n_threads)
        elif self.name == "linear":
            target[...] = G
        else:
            _kernel_matrix.gram_to_kernel(G, sq_a, sq_b, out, row_start, _GRAM_CODE[self.name],
                                          gamma, float(self.coef0), float(self.degree),
                                          n_threads)


class Workspace:
    """One float64 buffer reused by every block of a matrix: a fresh 64 MB array per block
    would pay its page faults again each time."""

    def __init__(self):
        self._buf = None

    def block(self, rows, cols, dtype=np.float64):
        if self._buf is None or self._buf.dtype != dtype or self._buf.size < rows * cols:
            self._buf = np.empty(rows * cols, dtype=dtype)
        return self._buf[:rows * cols].reshape(rows, cols)


def _parallel_exp(E, target, n_threads):
    """target[...] = exp(E), NumPy's SIMD exp on ``n_threads`` row slices (ufuncs release the
    GIL). Each element is computed the same way whatever the thread count."""
    rows = E.shape[0]
    if n_threads <= 1 or rows < 2 * n_threads:
        np.exp(E, out=target, casting="same_kind")
        return
    bounds = np.linspace(0, rows, n_threads + 1).astype(int)
    list(thread_pool(n_threads).map(
        lambda s: np.exp(E[s[0]:s[1]], out=target[s[0]:s[1]], casting="same_kind"),
        zip(bounds[:-1], bounds[1:])))


def _row_sq_norms(X):
    return np.einsum("ij,ij->i", X, X)


def data_offset(kernel, X, objective="kmeans", quiet=False):
    """The point a kernel subtracts from the data (``Kernel.offset``), or None.

    The column means of X (unweighted, so that ``KernelKMeans.kernel_matrix(X)`` and a fit
    with sample weights agree) for the kernels of :data:`CENTRED_KERNELS`; the linear kernel
    only for the k-means objective (the normalized cut uses K's values, which a shift
    changes). After the subtraction the points lie around the origin and the squared
    distances from products keep their digits: shifting the data by 10⁸ changes the result
    only by the rounding the shifted data carry (about 10⁻⁸ of a unit distance).

    Parameters
    ----------
    kernel : str
    X : ndarray of shape (n_samples, n_features)
    objective : {'kmeans', 'ncut'}

    Returns
    -------
    ndarray of float64, shape (n_features,), read-only, or None
    """
    if kernel not in CENTRED_KERNELS or (kernel == "linear" and objective != "kmeans"):
        return None
    if quiet:  # for checks of data that may overflow (``check_range`` refuses it then)
        with np.errstate(over="ignore", invalid="ignore"):
            offset = np.asarray(X, dtype=np.float64).mean(axis=0)
        offset.flags.writeable = False
        return offset
    offset = np.asarray(X, dtype=np.float64).mean(axis=0)
    offset.flags.writeable = False
    return offset


def with_offset(kernel, offset):
    """``kernel`` (a :class:`Kernel`) with ``offset`` (array of n_features, or None)."""
    if offset is not None:
        offset = np.array(offset, dtype=np.float64)
        offset.flags.writeable = False
    return Kernel(kernel.name, kernel.gamma, kernel.degree, kernel.coef0, offset)


# -- gamma ------------------------------------------------------------------------------------
def resolve_dtype(dtype):
    """The numpy type of kernel values stored as a valid ``dtype`` parameter ('float64',
    np.float32, ...)."""
    return np.float32 if np.dtype(dtype) == np.float32 else np.float64


def resolve_gamma(kernel, gamma, X, rng):
    """The numeric gamma for ``kernel`` on data X.

    ``'median'``: γ·median(dist) = ½ over a seeded sample of pairs, where dist is the quantity
    inside the kernel's exponential: the squared Euclidean distance for rbf (γ = 1/(2·median
    d²)), the L1 distance for laplacian, the chi-squared distance for chi2. For poly and sigmoid,
    which have no distance, ``'median'`` means ``'scale'``. ``'scale'``: 1/(n_features·Var(X)).
    When the median (or variance) is 0, the median of the positive distances is used; when all
    points coincide, γ = 1 with a warning. Returns None for kernels without gamma.
    """
    if kernel not in GAMMA_KERNELS:
        return None
    if not isinstance(gamma, str):
        return float(gamma)
    X = np.asarray(X, dtype=np.float64)
    if gamma == "scale" or kernel in ("poly", "sigmoid"):
        return variance_gamma(float(X.var()) if X.size else 0.0, X.shape[1])
    i, j = pair_sample(X.shape[0], rng)
    dist = pair_distances(kernel, X[i], X[j])
    return median_gamma(dist, distinct=not np.any(dist > 0) and bool(np.any(X[i] != X[j])))


def variance_gamma(var, n_features):
    """'scale': γ = 1/(d·Var(X)) (γ = 1 with a warning when the variance is 0)."""
    if var > 0 and math.isfinite(var):
        return 1.0 / (n_features * var)
    return _fallback_gamma("the data have zero variance")


def median_gamma(dist, distinct=False):
    """'median': γ = 1/(2·median dist) of the sampled pairs' distances (of the positive ones
    when the median is 0; γ = 1 with a warning when all are 0). ``distinct``: some sampled
    pair differs although every distance is 0 (squared distances below the smallest
    float64, as for data of order 1e-160 and less), which the warning says."""
    positive = dist[dist > 0]
    if positive.size == 0:
        if distinct:
            return _fallback_gamma("the squared distances between the points underflow to 0",
                                   "; rescale the data, e.g. scale='standard' (--scale "
                                   "standard)")
        return _fallback_gamma("all points are identical")
    med = float(np.median(dist))
    if med <= 0:
        med = float(np.median(positive))
    return 1.0 / (2.0 * med)


def _fallback_gamma(why, remedy=""):
    warnings.warn(f"the median heuristic for gamma is undefined ({why}); using gamma = "
                  f"1.0{remedy}", KKMeansWarning, stacklevel=4)
    return 1.0


def pair_sample(n, rng, n_pairs=MEDIAN_PAIRS):
    """(i, j) of the pairs the median rule measures: every pair i < j when there are at most
    ``n_pairs``, else ``n_pairs`` seeded pairs with j ≠ i."""
    if n * (n - 1) // 2 <= n_pairs:
        return np.triu_indices(n, k=1)
    i = rng.integers(0, n, size=n_pairs)
    return i, (i + rng.integers(1, n, size=n_pairs)) % n  # j != i


def pair_distances(kernel, A, B):
    """The distance inside the kernel's exponential between the rows of A and B: squared
    Euclidean (rbf), L1 (laplacian), chi-squared (chi2)."""
    diff = A - B
    if kernel == "rbf":
        return np.einsum("ij,ij->i", diff, diff)
    if kernel == "laplacian":
        return np.abs(diff).sum(axis=1)
    tot = A + B
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(tot != 0, diff * diff / np.where(tot != 0, tot, 1), 0.0)
    return terms.sum(axis=1)


# -- data whose kernel cannot be computed in floating point ------------------------------------
FLOAT_MAX = float(np.finfo(np.float64).max)


def check_range(name, X, total_weight, kernel=None, what="X", offset=None, gamma_from=None):
    """Refuse (:class:`~kkmeans_cli.errors.ValueRangeError`) data whose kernel values,
    distances or the sums kernel k-means forms of them overflow float64.

    The rule, with m = max(n, Σ w) (the iterations sum up to m² weighted kernel values: the
    inner sums g_c = Σ_{i,j∈c} w_i w_j K_ij) and Q = the largest squared row norm ‖x‖²:

    - linear: 4·Q·m² ≤ 1.8e308 (|K_ij| ≤ Q, distances ≤ 4Q);
    - poly: 4·m²·(γ·Q + |coef0|)^degree ≤ 1.8e308 (checked once γ is resolved: ``kernel``);
    - rbf, sigmoid, cosine: 4·Q ≤ 1.8e308 (the squared distances ‖x‖² + ‖y‖² − 2x·y and the
      products x·y; the kernel values themselves are at most 1);
    - laplacian: 2·max_i Σ_j |x_ij| ≤ 1.8e308 (the L1 distances);
    - chi2: 4·max x_ij² and 2·max_i Σ_j x_ij ≤ 1.8e308 ((a − b)² and the chi-squared distance);
    - precomputed (X is K or rows of it): 4·m²·max |K_ij| ≤ 1.8e308;
    - precomputed-distance (X is D): 16·m²·max D_ij² ≤ 1.8e308 (Gower's −½ J D∘² J).

    ``offset``: the point the kernel subtracts from the data first (``Kernel.offset``, the
    training mean for rbf and linear, :func:`data_offset`); the rule applies to X − offset, and
    an offset or a difference that is not finite breaks it.

    The row reported is the first that breaks the rule, the column its largest |value|.

    First the kernel's domain (:func:`check_domain`: chi2 needs non-negative data).

    poly's rule may be broken by its parameters rather than by the data:
    :class:`~kkmeans_cli.errors.OptionConflictError` (a usage error) names them when
    4·m²·|coef0|^degree alone overflows (no data can help), or when γ came from a heuristic of
    the data (``gamma_from``: 'median' or 'scale', for which γ·‖x‖² does not change when the
    data is rescaled) and the degree makes a row overflow.

    Usual data are far from every limit: one bound b ≥ |x_ij − offset_j| from the extremes of
    X and of the offset (two passes, no temporaries) then shows that no row can break the rule
    (:func:`_within_limits`), and the rows are not examined one by one.
    """
    X = np.asarray(X, dtype=np.float64)
    if X.size == 0:
        return
    check_domain(name, X, what)
    m = max(float(X.shape[0]), float(total_weight))
    with np.errstate(over="ignore", invalid="ignore"):
        b = max(float(X.max()), -float(X.min()))
        if offset is not None:
            b += float(np.max(np.abs(offset))) if np.size(offset) else 0.0
    if _within_limits(name, b, X.shape[1], m, kernel):
        return
    _check_rows(name, X, m, kernel, what, offset, gamma_from)


def check_domain(name, X, what="X"):
    """The values a kernel is defined for: the chi2 kernel needs non-negative data (the first
    negative value is named, :class:`~kkmeans_cli.errors.ValueRangeError`)."""
    if name != "chi2":
        return
    X = np.asarray(X)
    if X.size and X.min() < 0:

        r, c = np.argwhere(X < 0)[0]
        raise ValueRangeError(r, c, f"the value {X[r, c]:g} is negative; the chi2 kernel "
                                    f"needs non-negative data", what=what)


def _within_limits(name, b, d, m, kernel):
    """Whether every row of d values of magnitude at most ``b`` (after the offset) keeps the
    rule of :func:`check_range` with total weight m, with a margin: Q ≤ d·b², Σ|x_j| ≤ d·b,
    |K_ij| ≤ b. False when b is not finite (NaN or infinity: the rows are examined)."""
    if not math.isfinite(b):
        return False
    margin = 1e-6                               # in log space: far below the rule's own slack
    log_max = math.log(FLOAT_MAX) - margin
    log_sums = math.log(4.0) + 2.0 * math.log(m)
    poly = name == "poly" and kernel is not None and kernel.gamma is not None
    if b == 0.0:          # all zeros: only poly's coef0 can break its rule
        inner = abs(kernel.coef0) if poly else 0.0
        return inner == 0.0 or kernel.degree * math.log(inner) + log_sums <= log_max
    log_b, log_d = math.log(b), math.log(d)
    if name == "precomputed":
        return log_b + log_sums <= log_max
    if name == "precomputed-distance":
        return 2.0 * log_b + log_sums + math.log(4.0) <= log_max
    if name in ("laplacian", "chi2"):
        ok = math.log(2.0) + log_d + log_b <= log_max
        return ok and (name != "chi2" or math.log(4.0) + 2.0 * log_b <= log_max)
    log_q = log_d + 2.0 * log_b
    if name == "linear":
        return log_q + log_sums <= log_max
    if poly:
        if log_q >= log_max:
            return False
        inner = math.exp(log_q) * kernel.gamma + abs(kernel.coef0)
        if not math.isfinite(inner) or inner <= 0.0:
            return inner == 0.0
        return kernel.degree * math.log(inner) + log_sums <= log_max
    return log_q + math.log(4.0) <= log_max


def _check_rows(name, X, m, kernel, what, offset, gamma_from=None):
    """:func:`check_range` row by row: refuses the first row that breaks the rule."""
    if offset is not None:
        raw = X
        with np.errstate(over="ignore", invalid="ignore"):
            X = X - offset
        bad = ~np.isfinite(X).all(axis=1)
        _refuse_rows(bad, np.abs(raw), f"the data's mean ({_format_offset(offset)}) or the "
                     f"distance to it overflows floating point (1.8e308)", what,
                     ValueRangeError, score=np.abs(raw).max(axis=1), raw=raw)
    log_max = math.log(FLOAT_MAX)
    log_sums = math.log(4.0) + 2.0 * math.log(m)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        absx = np.abs(X)
        if name in ("precomputed", "precomputed-distance"):
            big = absx.max(axis=1)
            power, factor = (1, log_sums) if name == "precomputed" else (2, log_sums + math.log(4))
            limit = math.exp((log_max - factor) / power)
            rule = (f"4·m²·|K_ij| must stay below {FLOAT_MAX:.3g} (m = {m:.6g}, the total "
                    f"weight: kernel k-means sums up to m² kernel values)" if power == 1 else
                    f"16·m²·D_ij² must stay below {FLOAT_MAX:.3g} (m = {m:.6g}: the kernel "
                    f"−½ J D∘² J and its sums)")
            _refuse_rows(big > limit, absx, rule, what, ValueRangeError, raw=X)
            return
        if name in ("laplacian", "chi2"):
            l1 = absx.sum(axis=1)
            bad = ~(2.0 * l1 <= FLOAT_MAX)
            rule = (f"2·Σ|x_j| of a row must stay below {FLOAT_MAX:.3g} (the L1 distances of "
                    f"the {name} kernel)")
            if name == "chi2":
                bad |= ~(4.0 * np.square(absx.max(axis=1)) <= FLOAT_MAX)
                rule = (f"4·x² and 2·Σ x_j of a row must stay below {FLOAT_MAX:.3g} (the "
                        f"chi-squared distances Σ (a − b)²/(a + b))")
            _refuse_rows(bad, absx, rule, what, ValueRangeError, raw=X)
            return
        log_q = log_squared_norms(X, absx)
        if name == "linear":
            bad = log_q + log_sums > log_max
            rule = (f"4·‖x‖²·m² must stay below {FLOAT_MAX:.3g} (m = {m:.6g}, the total "
                    f"weight: kernel k-means sums up to m² products x·y)")
        elif name == "poly" and kernel is not None and kernel.gamma is not None:
            degree, coef0 = kernel.degree, kernel.coef0
            if coef0 != 0 and degree * math.log(abs(coef0)) + log_sums > log_max:
                raise OptionConflictError(
                    f"coef0={coef0:g} with degree={degree}: 4·m²·|coef0|^degree overflows "
                    f"floating point ({FLOAT_MAX:.3g}) whatever the data (m = {m:.6g}, the "
                    f"total weight); use a smaller |coef0| or degree")
            inner = np.log(np.exp(np.minimum(log_q, log_max)) * kernel.gamma
                           + abs(coef0))
            inner = np.where(log_q < log_max, inner, np.inf)
            bad = kernel.degree * inner + log_sums > log_max
            rule = (f"4·m²·(gamma·‖x‖² + |coef0|)^degree must stay below {FLOAT_MAX:.3g} "
                    f"(m = {m:.6g}; the poly kernel's values and their sums)")
            if np.any(bad) and gamma_from is not None:
                raise OptionConflictError(
                    f"degree={degree}: (gamma·‖x‖² + |coef0|)^degree overflows floating point "
                    f"({FLOAT_MAX:.3g}) on the data's largest rows; with gamma from "
                    f"'{gamma_from}' "
                    f"(gamma = {kernel.gamma:.6g}) gamma·‖x‖² stays the same when the data is "
                    f"rescaled, so use a smaller degree (or a number for gamma)")
            if np.any(bad):
                rule += "; rescale the data, or use a smaller gamma or degree"
        else:
            bad = log_q + math.log(4.0) > log_max
            rule = (f"4·‖x‖² must stay below {FLOAT_MAX:.3g} (" + (
                "the squared distances ‖x‖² + ‖y‖² − 2x·y of the rbf kernel" if name == "rbf"
                else f"the squared norms and products x·y of the {name} kernel") + ")")
        _refuse_rows(bad, absx, rule, what, ValueRangeError, score=log_q,
                     raw=X if offset is None else raw)


def log_squared_norms(X, absx=None):
    """ln ‖x‖² of each row of X (−inf for a row of zeros; not finite for a row that is not),
    without overflow in the sum itself: each row is divided by its largest |x| first."""
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        top = (np.abs(X) if absx is None else absx).max(axis=1)
        safe = np.where(top > 0, top, 1.0)
        return np.where(top > 0, 2.0 * np.log(safe)
                        + np.log(np.maximum(np.einsum("ij,ij->i", X / safe[:, None],
                                                      X / safe[:, None]), 1e-300)), -np.inf)


def _format_offset(offset):
    offset = np.asarray(offset)
    shown = ", ".join(f"{v:.3g}" for v in offset[:3])
    return shown + (", ..." if offset.shape[0] > 3 else "")


def _refuse_rows(bad, absx, rule, what, error, score=None, raw=None):
    """Raise for the first bad row (with ``score``: the bad row of largest score, e.g. the
    row farthest from the data's mean), at its largest |value| (of X − offset); the value
    shown is the row's own, with its sign (``raw``, the data as given; else ``absx``'s)."""
    if np.any(bad):
        rows = np.flatnonzero(bad)
        row = int(rows[0] if score is None else rows[np.argmax(score[rows])])
        col = int(np.argmax(absx[row]))
        value = float((absx if raw is None else raw)[row, col])
        fix = "" if "rescale the data" in rule else "; rescale the data"
        raise error(row, col, f"the value {value:.6g} is too large for floating point: "
                              f"{rule}{fix}", what=what)


def count_distinct(X, at_least, weights=None, name=None):
    """The number of distinct rows of X among rows of positive weight, counted exactly when it
    is below ``at_least`` (else some number ≥ ``at_least``: the first rows often settle it,
    and then the rest of X is neither copied nor sorted).

    For the cosine kernel rows are compared after normalisation (x and 2x are one point in
    its feature space).
    """
    X = np.asarray(X, dtype=np.float64)
    if weights is not None:
        positive = np.asarray(weights) > 0
        if not positive.all():
            X = X[positive]
    return distinct_rows(X, at_least, name).shape[0]


def distinct_rows(X, at_least, name=None):
    """Distinct rows of X as the kernel sees them (normalised for cosine): all of them when
    there are fewer than ``at_least``, else ``at_least`` or more of them. The union of these
    over parts of X (the chunks of a cluster) has as many distinct rows as X when X has fewer
    than ``at_least``, and at least ``at_least`` otherwise: the check of
    :func:`count_distinct` in pieces."""
    X = np.asarray(X, dtype=np.float64)
    if X.shape[0] == 0:
        return X
    head = min(X.shape[0], max(8 * at_least, 64))
    found = _unique_rows(X[:head], name)
    if found.shape[0] >= at_least or head == X.shape[0]:
        return found
    return _unique_rows(X, name)


def _unique_rows(X, name):
    if name == "cosine":
        with np.errstate(invalid="ignore", divide="ignore"):
            norms = np.sqrt(np.einsum("ij,ij->i", X, X))
            X = np.where(norms[:, None] > 0, X / np.where(norms > 0, norms, 1.0)[:, None], 0.0)
    X = np.ascontiguousarray(X + 0.0)  # −0.0 and 0.0 are the same point
    rows = X.view(np.dtype((np.void, X.dtype.itemsize * X.shape[1]))).ravel()
    _, first = np.unique(rows, return_index=True)
    return X[np.sort(first)]