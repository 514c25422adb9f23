"""Kernel sources: a blocked (recomputed) kernel runs the same algorithms as one in memory."""
import numpy as np
import pytest
from sklearn.datasets import make_blobs

from kkmeans_cli import memory as memory_module
from kkmeans_cli.engine.starts import kmeans_plusplus
from kkmeans_cli.kernels.sources import BlockedKernel, InMemoryKernel
from kkmeans_cli.kernels.functions import Kernel
from kkmeans_cli.engine.lloyd import lloyd


@pytest.mark.parametrize("name, gamma", [("rbf", 0.2), ("laplacian", 0.3), ("linear", None)])
def test_blocked_lloyd_equals_in_memory_lloyd(name, gamma, monkeypatch):
    monkeypatch.setattr(memory_module, "BLOCK_BYTES", 8 * 400 * 13)  # 13-row blocks
    X, _ = make_blobs(400, n_features=3, centers=6, cluster_std=2.0, random_state=2)
    kern = Kernel(name, gamma)
    w = np.random.default_rng(0).uniform(0.5, 2.0, len(X))
    memory = InMemoryKernel(kern.matrix(X), diag=kern.diag(X))
    blocked = BlockedKernel(kern, X)
    start, _ = kmeans_plusplus(memory, w, 6, np.random.default_rng(1))
    start_b, _ = kmeans_plusplus(blocked, w, 6, np.random.default_rng(1))
    np.testing.assert_array_equal(start, start_b)
    a = lloyd(memory, w, start, 6, tol=0)
    b = lloyd(blocked, w, start, 6, tol=0)
    np.testing.assert_array_equal(a.labels, b.labels)
    assert b.inertia == pytest.approx(a.inertia, rel=1e-12)
    assert a.n_iter == b.n_iter
    np.testing.assert_allclose(b.inner_sums, a.inner_sums, rtol=1e-12)


def test_blocked_kernel_counts_evaluations_and_recomputes_only_moved_rows():
    X = np.random.default_rng(0).normal(size=(50, 2))
    src = BlockedKernel(Kernel("rbf", 1.0), X)
    labels = (X[:, 0] > 0).astype(np.int32)
    F = np.empty((2, 50))
    src.full_outer_sums(labels, np.ones(50), F)
    assert src.kernel_evaluations == 50 * 50
    moved = np.array([3, 7])
    new = labels.copy()
    new[moved] = 1 - new[moved]
    src.update_outer_sums(moved, labels[moved], new[moved], np.ones(2), F)
    assert src.kernel_evaluations == 50 * 50 + 2 * 50
    G = np.empty((2, 50))
    src.full_outer_sums(new, np.ones(50), G)
    np.testing.assert_allclose(F, G, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_blocked_updates_and_replays_equal_the_matrix(dtype):
    """The moved points' updates and Elkan's replay of its log (fused for rbf in float64,
    kernel rows otherwise) give the in-memory kernel's sums, and the same sums on 1 and 2
    threads (the work is past the one-thread threshold)."""
    from kkmeans_cli.engine.elkan import MoveLog
    from kkmeans_cli.kernels.functions import SMALL_BLOCK

    rng = np.random.default_rng(3)
    n, k = 1500, 5
    X = rng.normal(size=(n, 4))
    kern = Kernel("rbf", 0.3)
    memory = InMemoryKernel(kern.matrix(X, dtype=dtype), n_threads=2, diag=kern.diag(X))
    labels = rng.integers(0, k, n).astype(np.int32)
    w = rng.uniform(0.5, 2.0, n)
    moved = np.sort(rng.choice(n, 300, replace=False)).astype(np.intp)
    src, dst = labels[moved], ((labels[moved] + 1) % k).astype(np.int32)
    log = MoveLog()
    log.append(moved[:100], src[:100], dst[:100], w[moved[:100]])
    log.append(moved[100:], src[100:], dst[100:], w[moved[100:]])
    stamps = rng.integers(0, 301, n).astype(np.intp)
    points = np.sort(rng.choice(n, 1000, replace=False)).astype(np.intp)
    assert moved.size * n > SMALL_BLOCK and np.sum(300 - stamps[points]) > SMALL_BLOCK
    tol = 1e-12 if dtype == np.float64 else 1e-5
    F0 = rng.normal(size=(k, n))
    expected = []
    for source in (memory, ) + tuple(BlockedKernel(kern, X, dtype=dtype, n_threads=t)
                                     for t in (1, 2)):
        assert getattr(source, "fused", dtype == np.float64) == (dtype == np.float64)
        F_update, F_replay = F0.copy(), F0.copy()
        source.update_outer_sums(moved, src, dst, w[moved], F_update)
        source.refresh_outer_sums(points, stamps, log, F_replay)
        if not expected:
            expected = [F_update, F_replay]
            continue
        np.testing.assert_allclose(F_update, expected[0], rtol=tol, atol=tol)
        np.testing.assert_allclose(F_replay, expected[1], rtol=tol, atol=tol)
        if source.n_threads == 1:
            one = [F_update, F_replay]
        else:
            np.testing.assert_array_equal(F_update, one[0])
            np.testing.assert_array_equal(F_replay, one[1])
    untouched = np.setdiff1d(np.arange(n), points)
    np.testing.assert_array_equal(F_replay[:, untouched], F0[:, untouched])
