"""predict with the rbf kernel: kernel values, exponential and outer sums fused
(``Kernel.fused_outer_sums``, ``_rbf_sums.h``), checked against brute-force NumPy."""
import numpy as np
import pytest

from kkmeans_cli import KernelKMeans
from kkmeans_cli.kernels.functions import Kernel


def _brute_outer_sums(A, B, labels, w, k, gamma):
    K = np.exp(-gamma * ((A[:, None, :] - B[None, :, :]) ** 2).sum(-1))
    return np.stack([K[:, labels == c] @ w[labels == c] for c in range(k)])


@pytest.mark.parametrize("d", [1, 3, 10, 33])
@pytest.mark.parametrize("m", [1, 3, 4, 5, 130])
def test_fused_sums_equal_brute_force(d, m):
    rng = np.random.default_rng(d * 100 + m)
    B = rng.normal(size=(257, d))
    A = rng.normal(size=(m, d))
    A[0] = B[3]                                   # a training point: K(x, x) = 1 exactly
    labels = rng.integers(0, 4, 257)
    labels[:4] = np.arange(4)
    w = rng.uniform(0.2, 3.0, 257)
    gamma = 0.7 / d
    F = Kernel("rbf", gamma).fused_outer_sums(A, B, labels, w, 4, n_threads=2)
    np.testing.assert_allclose(F, _brute_outer_sums(A, B, labels, w, 4, gamma), rtol=1e-13)


@pytest.mark.parametrize("d", [1, 5, 17])
def test_fused_sums_of_rows_and_columns_of_the_data_equal_brute_force(d):
    """``Kernel.fused_sums_of`` (the kernel source's sums, on indices into the centred data):
    clusters of more points than a tile of ``_rbf_sums.h`` (512), an empty cluster, rows and
    columns that are subsets in any order; the same on 1 and 2 threads (past the one-thread
    threshold); None for another kernel."""
    from kkmeans_cli.kernels.functions import FUSED_PARALLEL_MIN

    rng = np.random.default_rng(d)
    n, k, gamma = 3000, 5, 0.5 / d
    X = rng.normal(size=(n, d))
    rows = rng.permutation(n)[:1700]
    cols = rng.permutation(n)[:2600]
    labels = rng.choice([0, 1, 3, 4], size=cols.size, p=[0.45, 0.35, 0.1, 0.1]).astype(np.int32)
    w = rng.uniform(0.2, 3.0, cols.size)
    assert rows.size * cols.size > FUSED_PARALLEL_MIN and np.sum(labels == 0) > 2 * 512
    kern = Kernel("rbf", gamma)
    one = kern.fused_sums_of(X, rows, cols, labels, w, k, n_threads=1)
    two = kern.fused_sums_of(X, rows, cols, labels, w, k, n_threads=2)
    np.testing.assert_array_equal(one, two)
    expected = _brute_outer_sums(X[rows], X[cols], labels, w, k, gamma)
    np.testing.assert_allclose(one, expected, rtol=1e-13, atol=1e-300)
    assert np.all(one[2] == 0.0)                                # the empty cluster
    # the same sums as the copying route of predict
    np.testing.assert_allclose(kern.fused_outer_sums(X[rows], X[cols], labels, w, k), one,
                               rtol=1e-14)
    assert Kernel("laplacian", gamma).fused_sums_of(X, rows, cols, labels, w, k) is None


def test_fused_sums_cover_the_exponential_range():
    # exponents from 0 down past the underflow of exp (values below 1e-308 are 0)
    x = np.linspace(0.0, 40.0, 4001)[:, None]
    F = Kernel("rbf", 0.5).fused_outer_sums(x, np.zeros((1, 1)), np.zeros(1, int),
                                            np.ones(1), 1)[0]
    expected = np.exp(-0.5 * x[:, 0] ** 2)
    tiny = expected < 1e-300
    np.testing.assert_allclose(F[~tiny], expected[~tiny], rtol=2e-15 * 800)
    assert np.all(F[tiny] < 1e-300)


def test_fused_sums_do_not_depend_on_the_thread_count_or_blocks():
    rng = np.random.default_rng(0)
    B, A = rng.normal(size=(1001, 5)), rng.normal(size=(997, 5))
    labels = rng.integers(0, 7, 1001)
    w = rng.uniform(0.5, 2.0, 1001)
    kern = Kernel("rbf", 0.2)
    one = kern.fused_outer_sums(A, B, labels, w, 7, n_threads=1)
    two = kern.fused_outer_sums(A, B, labels, w, 7, n_threads=2)
    small_blocks = kern.fused_outer_sums(A, B, labels, w, 7, n_threads=2, block_rows=37)
    np.testing.assert_array_equal(one, two)
    np.testing.assert_array_equal(one, small_blocks)
    assert Kernel("laplacian", 0.2).fused_outer_sums(A, B, labels, w, 7) is None


def test_predict_uses_the_fused_sums_and_matches_the_rows_route():
    rng = np.random.default_rng(1)
    X = np.concatenate([rng.normal(c, 1.0, size=(300, 4)) for c in (-4, 0, 4)])
    w = rng.uniform(0.5, 2.0, X.shape[0])
    est = KernelKMeans(3, kernel="rbf", n_init=2, random_state=0).fit(X, sample_weight=w)
    new = rng.normal(0, 4, size=(2000, 4))
    labels, dist = est.predict(new), est.transform(new)
    F = _brute_outer_sums(new, X, est.labels_, w, 3, est.gamma_)
    W, g = est.cluster_weights_, est.inner_sums_
    brute = 1.0 - 2.0 * F.T / W + g / W ** 2
    np.testing.assert_allclose(dist, np.maximum(brute, 0.0), rtol=1e-10, atol=1e-13)
    np.testing.assert_array_equal(labels, np.argmin(brute, axis=1))
    np.testing.assert_array_equal(est.predict(X), est.labels_)
    one = KernelKMeans(3, kernel="rbf", n_init=2, random_state=0, n_threads=1).fit(X, sample_weight=w)
    np.testing.assert_array_equal(one.transform(new), dist)


def _brute_replay(A, stamps, B, src, dst, w, k, gamma):
    """ΔF (k × len(A)) of the moves j ≥ stamps[r] for each row r, by brute force."""
    K = np.exp(-gamma * ((A[:, None, :] - B[None, :, :]) ** 2).sum(-1))
    K *= w * (np.arange(B.shape[0])[None, :] >= np.asarray(stamps)[:, None])
    signs = np.eye(k)[dst] - np.eye(k)[src]                       # m × k
    return (K @ signs).T


def _log_of_moves(rng, n, m, d, k, few_stamps):
    """n points in d dimensions, a log of m moves between k clusters, and 1,500 points with
    their stamps: some at the end (nothing to replay); few distinct stamps put the rows in
    groups of four."""
    X = rng.normal(size=(n, d))
    moved = rng.integers(0, n, m)
    src = rng.integers(0, k, m).astype(np.int32)
    dst = ((src + rng.integers(1, k, m)) % k).astype(np.int32)
    w = rng.uniform(0.2, 3.0, m)
    points = np.sort(rng.choice(n, 1500, replace=False))
    stamps = (rng.choice([0, 1, 517, m], points.size) if few_stamps
              else rng.integers(0, m + 1, points.size))
    return X, moved, src, dst, w, points, stamps


@pytest.mark.parametrize("k", [3, 6, 40])    # passes of 4 clusters (padded), the scatter past 32
@pytest.mark.parametrize("d", [1, 5, 17])
@pytest.mark.parametrize("few_stamps", [False, True])    # rows alone, rows replayed in fours
def test_fused_replay_of_a_log_of_moves_equals_brute_force(k, d, few_stamps):
    """Elkan's log replayed with fused rbf values (``Kernel.fused_replay``): every point
    gets the moves from its own stamp on, into its own column of F, the same on 1 and 2
    threads (the work is past the one-thread threshold); other columns are untouched."""
    from kkmeans_cli.kernels.functions import SMALL_BLOCK

    rng = np.random.default_rng(k * 10 + d)
    n, m, gamma = 3000, 900, 0.6 / d
    X, moved, src, dst, w, points, stamps = _log_of_moves(rng, n, m, d, k, few_stamps)
    assert np.sum(m - stamps) > 4 * SMALL_BLOCK
    F0 = rng.normal(size=(k, n))
    kern = Kernel("rbf", gamma)
    results = []
    for threads in (1, 2):
        F = F0.copy()
        assert kern.fused_replay(X, points, stamps, moved, src, dst, w, F, threads)
        results.append(F)
    np.testing.assert_array_equal(results[0], results[1])
    expected = F0.copy()
    expected[:, points] += _brute_replay(X[points], stamps, X[moved], src, dst, w, k, gamma)
    np.testing.assert_allclose(results[0], expected, rtol=1e-12, atol=1e-11)
    F = F0.copy()
    assert Kernel("laplacian", gamma).fused_replay(X, points, stamps, moved, src, dst, w,
                                                   F) is False
    np.testing.assert_array_equal(F, F0)


def test_fused_sums_and_replay_do_not_depend_on_the_thread_count_whatever_the_heap():
    """The buffer of products is declared to alias no input (``_rbf_sums.h: KK_RESTRICT``).
    Without that GCC versioned the loops on a runtime overlap test whose scalar fallback
    rounds differently from the vector loop (no FMA contraction), so whether a sum took it
    depended on where the heap had put the buffer: a few sums differed in the last bit from
    run to run, and so between 1 and 2 threads (4 of 200 of these cases). The heap is varied
    between the runs."""
    from kkmeans_cli.kernels.functions import SMALL_BLOCK

    held = []
    for seed in range(100):
        rng = np.random.default_rng(seed)
        k, d = [3, 6, 40][seed % 3], [1, 5, 17][(seed // 3) % 3]
        n, m = 3000, 900
        X, moved, src, dst, w, points, stamps = _log_of_moves(rng, n, m, d, k, seed % 2 == 0)
        assert np.sum(m - stamps) > SMALL_BLOCK
        labels = rng.integers(0, k, n)
        kern = Kernel("rbf", 0.6 / d)
        F0 = rng.normal(size=(k, n))
        replays, sums = [], []
        for threads in (1, 2):
            held.append(np.empty(int(rng.integers(1, 5000))))     # another heap layout
            F = F0.copy()
            kern.fused_replay(X, points, stamps, moved, src, dst, w, F, threads)
            replays.append(F)
            sums.append(kern.fused_sums_of(X, points, np.arange(n), labels, w[:1].repeat(n),
                                           k, n_threads=threads))
        np.testing.assert_array_equal(replays[0], replays[1])
        np.testing.assert_array_equal(sums[0], sums[1])
