"""The explicit-feature engine (``engine/features.py``) and the sampled restarts
(``engine/restarts.py``): NumPy references, the chunk contract, thread independence."""
import math

import numpy as np
import pytest
from helpers import run, sklearn_blobs, write_csv

from kkmeans_cli import KernelKMeans
from kkmeans_cli.engine import features as F
from kkmeans_cli.engine.restarts import SAME_RTOL, distinct_best, sampled_restarts
from kkmeans_cli.errors import KKMeansWarning
from kkmeans_cli.kernels.functions import Kernel
from kkmeans_cli.model.model_file import load_model


def _rbf(A, B, gamma):
    d2 = ((A[:, None, :] - B[None, :, :]) ** 2).sum(axis=2)
    return np.exp(-gamma * d2)


# -- the feature map -------------------------------------------------------------------------
@pytest.mark.parametrize("rank", [5, 20, None])
def test_features_match_numpy_reference(rank):
    X, _ = sklearn_blobs(600, k=4)
    gamma = 0.05
    L = X[::15]
    fmap = F.feature_map(Kernel("rbf", gamma), L, rank=rank, dtype=np.float64)
    K_LL = _rbf(L, L, gamma)
    lam, U = np.linalg.eigh(K_LL)
    lam, U = lam[::-1], U[:, ::-1]
    keep = int(np.sum(lam > F.EIG_RTOL * lam[0]))
    s = keep if rank is None else rank
    assert fmap.rank == s and fmap.projection.shape == (L.shape[0], s)
    Phi, x_sq = F.feature_chunk(fmap, X)
    want = _rbf(X, L, gamma) @ (U[:, :s] / np.sqrt(lam[:s]))
    # eigenvectors are defined up to sign: compare the kernel Φ Φᵀ they define
    np.testing.assert_allclose(Phi @ Phi.T, want @ want.T, atol=1e-8)
    np.testing.assert_allclose(x_sq, (want ** 2).sum(axis=1), atol=1e-8)
    # float32 features: the same values rounded
    fmap32 = F.feature_map(Kernel("rbf", gamma), L, rank=rank)
    Phi32, x_sq32 = F.feature_chunk(fmap32, X)
    assert Phi32.dtype == np.float32
    np.testing.assert_array_equal(Phi32, Phi.astype(np.float32))
    np.testing.assert_allclose(x_sq32, (Phi32.astype(np.float64) ** 2).sum(axis=1), rtol=1e-12)


def test_full_rank_features_give_the_nystroem_kernel():
    X, _ = sklearn_blobs(300, k=4)
    gamma = 0.05
    L = X[:40]
    fmap = F.feature_map(Kernel("rbf", gamma), L, dtype=np.float64)
    Phi, _ = F.feature_chunk(fmap, X)
    K_nm = _rbf(X, L, gamma)
    want = K_nm @ np.linalg.pinv(_rbf(L, L, gamma), rcond=1e-10, hermitian=True) @ K_nm.T
    np.testing.assert_allclose(Phi @ Phi.T, want, atol=1e-7)
    # with every point a landmark the kernel is K itself
    fmap = F.feature_map(Kernel("rbf", gamma), X[:120], dtype=np.float64)
    Phi, x_sq = F.feature_chunk(fmap, X[:120])
    np.testing.assert_allclose(Phi @ Phi.T, _rbf(X[:120], X[:120], gamma), atol=1e-7)
    assert F.approximation_error(np.ones(120), x_sq) == pytest.approx(0.0, abs=1e-8)


def test_approximation_error_is_the_trace_ratio():
    X, _ = sklearn_blobs(500, k=4)
    gamma = 0.2
    fmap = F.feature_map(Kernel("rbf", gamma), X[:30], rank=10, dtype=np.float64)
    Phi, x_sq = F.feature_chunk(fmap, X)
    want = np.trace(np.eye(500) - Phi @ Phi.T) / 500.0
    assert F.approximation_error(np.ones(500), x_sq) == pytest.approx(want, rel=1e-10)
    assert 0 < want < 1


def test_default_rank_is_k_over_epsilon():
    assert F.default_rank(20, 400) == math.ceil(20 / F.EPSILON) == 100
    assert F.default_rank(20, 50) == 50
    assert F.default_rank(3, 1000) == 15


def test_landmarks_without_positive_eigenvalue_are_refused():
    with pytest.raises(ValueError, match="no positive eigenvalue"):
        F.feature_map(Kernel("linear"), np.zeros((4, 2)))


# -- one assignment step ---------------------------------------------------------------------
def _step_reference(Phi, w, mu):
    P = Phi.astype(np.float64)
    d = ((P[:, None, :] - mu[None].astype(np.float64)) ** 2).sum(axis=2)
    labels = np.argmin(d, axis=1)
    k = mu.shape[0]
    S = np.zeros_like(mu, dtype=np.float64)
    for c in range(k):
        S[c] = (w[labels == c, None] * P[labels == c]).sum(axis=0)
    W = np.bincount(labels, weights=w, minlength=k)
    return labels, d[np.arange(len(P)), labels], S, W


def test_assign_matches_numpy_reference():
    rng = np.random.default_rng(0)
    Phi = rng.normal(size=(5000, 7))
    w = rng.uniform(0.5, 2.0, size=5000)
    mu = rng.normal(size=(6, 7))
    x_sq = (Phi ** 2).sum(axis=1)
    labels, dist = np.full(5000, -1, dtype=np.int32), np.empty(5000)
    step = F.assign(Phi, x_sq, w, F.centres_from(mu, np.float64), labels, dist)
    want_labels, want_dist, S, W = _step_reference(Phi, w, mu)
    np.testing.assert_array_equal(labels, want_labels)
    np.testing.assert_allclose(dist, want_dist, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(step.S, S, rtol=1e-12)
    np.testing.assert_allclose(step.W, W, rtol=1e-12)
    assert step.inertia == pytest.approx(w @ want_dist, rel=1e-12)
    assert step.moved == 5000
    # the same centres again: nothing moves
    again = F.assign(Phi, x_sq, w, F.centres_from(mu, np.float64), labels, dist)
    assert again.moved == 0
    np.testing.assert_array_equal(again.S, step.S)


def test_chunk_functions_reduced_equal_the_whole_array():
    """The chunk contract: chunks starting at multiples of CHUNK_ROWS, computed separately
    and reduced in order, give bitwise the whole-array results."""
    X, _ = sklearn_blobs(3 * F.CHUNK_ROWS + 517, d=4, k=5)
    fmap = F.feature_map(Kernel("rbf", 0.05), X[::50], rank=12)
    Phi, x_sq = F.build_features(fmap, X, n_threads=2)
    cuts = [0, F.CHUNK_ROWS, 3 * F.CHUNK_ROWS, X.shape[0]]
    parts = [F.feature_chunk(fmap, X[a:b]) for a, b in zip(cuts[:-1], cuts[1:])]
    np.testing.assert_array_equal(np.concatenate([p[0] for p in parts]), Phi)
    np.testing.assert_array_equal(np.concatenate([p[1] for p in parts]), x_sq)

    rng = np.random.default_rng(1)
    w = rng.uniform(0.5, 1.5, size=X.shape[0])
    centres = F.centres_from(Phi[rng.choice(X.shape[0], 5, replace=False)].astype(float),
                             Phi.dtype)
    labels = np.full(X.shape[0], -1, dtype=np.int32)
    dist = np.empty(X.shape[0])
    whole = F.assign(Phi, x_sq, w, centres, labels, dist, n_threads=2)
    labels_c = np.full(X.shape[0], -1, dtype=np.int32)
    dist_c = np.empty(X.shape[0])
    steps = [F.step_chunk(Phi[a:b], x_sq[a:b], w[a:b], centres, labels_c[a:b], dist_c[a:b])
             for a, b in zip(cuts[:-1], cuts[1:])]
    reduced = F.reduce_steps(steps)
    np.testing.assert_array_equal(labels_c, labels)
    np.testing.assert_array_equal(dist_c, dist)
    np.testing.assert_array_equal(reduced.S, whole.S)
    np.testing.assert_array_equal(reduced.W, whole.W)
    assert reduced.inertia == whole.inertia and reduced.moved == whole.moved
    # and the sums are those of the labels (float64 reference)
    _, _, S, W = _step_reference(Phi, w, np.zeros((5, Phi.shape[1])))
    S = np.stack([(w[labels == c, None] * Phi[labels == c].astype(float)).sum(axis=0)
                  for c in range(5)])
    np.testing.assert_allclose(whole.S, S, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(whole.W, np.bincount(labels, weights=w, minlength=5), rtol=1e-12)


def test_features_and_steps_do_not_depend_on_the_thread_count():
    X, _ = sklearn_blobs(5 * F.CHUNK_ROWS + 11, d=5, k=6)
    fmap = F.feature_map(Kernel("rbf", 0.02), X[::40], rank=30)
    one = F.build_features(fmap, X, n_threads=1)
    two = F.build_features(fmap, X, n_threads=2)
    np.testing.assert_array_equal(one[0], two[0])
    np.testing.assert_array_equal(one[1], two[1])
    Phi, x_sq = one
    w = np.ones(X.shape[0])
    mu = Phi[:6].astype(np.float64)
    a = F.lloyd(Phi, x_sq, w, mu, n_threads=1)
    b = F.lloyd(Phi, x_sq, w, mu, n_threads=2)
    assert a.n_iter > 3  # the bounded passes ran
    np.testing.assert_array_equal(a.labels, b.labels)
    np.testing.assert_array_equal(a.centres, b.centres)
    assert a.inertia == b.inertia and a.n_iter == b.n_iter


# -- Lloyd -----------------------------------------------------------------------------------
def _lloyd_reference(P, w, mu, max_iter=300):
    """Plain NumPy Lloyd in float64 until no label changes."""
    labels = None
    for it in range(max_iter + 1):
        d = ((P[:, None, :] - mu[None]) ** 2).sum(axis=2)
        new = np.argmin(d, axis=1)
        if labels is not None and np.array_equal(new, labels):
            return labels, mu, it + 1
        labels = new
        mu = np.stack([(w[labels == c, None] * P[labels == c]).sum(axis=0)
                       / w[labels == c].sum() for c in range(mu.shape[0])])
    raise AssertionError("reference did not converge")


def test_lloyd_matches_numpy_reference():
    rng = np.random.default_rng(3)
    X, _ = sklearn_blobs(1500, d=4, k=5, seed=2)
    fmap = F.feature_map(Kernel("rbf", 0.05), X[::30], rank=15, dtype=np.float64)
    Phi, x_sq = F.feature_chunk(fmap, X)
    w = rng.uniform(0.5, 2.0, size=1500)
    mu0 = Phi[rng.choice(1500, 5, replace=False)]
    res = F.lloyd(Phi, x_sq, w, mu0, bounds=False)
    labels, mu, n_iter = _lloyd_reference(Phi, w, mu0)
    np.testing.assert_array_equal(res.labels, labels)
    np.testing.assert_allclose(res.centres, mu, rtol=1e-10, atol=1e-12)
    assert res.converged and res.n_iter == n_iter
    d = ((Phi - mu[labels]) ** 2).sum(axis=1)
    assert res.inertia == pytest.approx(w @ d, rel=1e-9)
    assert res.inertia == pytest.approx(F.objective(x_sq, w, res.S, res.W), rel=1e-9)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_lloyd_with_bounds_equals_lloyd_without(dtype):
    for seed in range(3):
        rng = np.random.default_rng(seed)
        C = rng.normal(size=(8, 6)) * 3
        Phi = (C[rng.integers(0, 8, 6000)] + rng.normal(size=(6000, 6))).astype(dtype)
        x_sq = (Phi.astype(np.float64) ** 2).sum(axis=1)
        w = rng.uniform(0.5, 2.0, size=6000)
        mu = Phi[:8].astype(np.float64)
        plain = F.lloyd(Phi, x_sq, w, mu, bounds=False)
        bounded = F.lloyd(Phi, x_sq, w, mu, bounds=True)
        np.testing.assert_array_equal(bounded.labels, plain.labels)
        assert bounded.n_iter == plain.n_iter > 3 and bounded.converged
        assert bounded.inertia == pytest.approx(plain.inertia, rel=1e-12)
        np.testing.assert_allclose(bounded.centres, plain.centres, rtol=1e-10, atol=1e-12)
        # the bounds settle most points without a distance
        assert bounded.n_distances < 0.5 * plain.n_distances


def test_bounded_chunks_reduced_equal_the_whole_array():
    rng = np.random.default_rng(2)
    n = 3 * F.CHUNK_ROWS + 77
    Phi = (rng.normal(size=(6, 5))[rng.integers(0, 6, n)] * 2
           + rng.normal(size=(n, 5))).astype(np.float32)
    x_sq = (Phi.astype(np.float64) ** 2).sum(axis=1)
    w = np.ones(n)
    prev = Phi[:6].astype(np.float64)
    labels = np.full(n, -1, dtype=np.int32)
    dist = np.empty(n)
    step = F.assign(Phi, x_sq, w, F.centres_from(prev, np.float32), labels, dist)
    mu = F.centres_from_sums(step.S, step.W)
    moves = F.shifts(mu, prev)
    centres = F.centres_from(mu, np.float32)
    state = [labels.copy(), np.sqrt(dist), np.zeros(n)]
    whole = F.reduce_bounded([F.bounded_step_chunk(Phi, x_sq, w, centres, moves, *state,
                                                   n_threads=2)])
    cut = [0, 2 * F.CHUNK_ROWS, n]
    chunked = [labels.copy(), np.sqrt(dist), np.zeros(n)]
    parts = [F.bounded_step_chunk(Phi[a:b], x_sq[a:b], w[a:b], centres, moves,
                                  *(v[a:b] for v in chunked)) for a, b in zip(cut, cut[1:])]
    reduced = F.reduce_bounded(parts)
    for got, want in zip(chunked, state):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(reduced[0], whole[0])
    np.testing.assert_array_equal(reduced[1], whole[1])
    assert reduced[2:] == whole[2:] and whole[2] > 0
    # the changes of the sums are those of the labels
    new = state[0]
    S_new = np.stack([Phi[new == c].astype(np.float64).sum(axis=0) for c in range(6)])
    np.testing.assert_allclose(step.S + whole[0], S_new, rtol=1e-9, atol=1e-9)
    # and the labels are the nearest centres
    d = ((Phi.astype(np.float64)[:, None] - centres.C.astype(np.float64)[None]) ** 2).sum(2)
    np.testing.assert_array_equal(new, np.argmin(d, axis=1))


def test_lloyd_refills_an_empty_cluster():
    rng = np.random.default_rng(0)
    Phi = rng.normal(size=(400, 3))
    x_sq = (Phi ** 2).sum(axis=1)
    w = np.ones(400)
    mu = np.vstack([Phi[:2], [[1e3, 1e3, 1e3]]])  # a centre no point is nearest to
    with pytest.warns(KKMeansWarning, match="1 empty cluster"):
        res = F.lloyd(Phi, x_sq, w, mu)
    assert res.n_relocated == 1 and res.converged
    assert np.all(np.bincount(res.labels, minlength=3) > 0)


def test_lloyd_stops_at_max_iter_with_a_warning():
    X, _ = sklearn_blobs(800, k=6)
    fmap = F.feature_map(Kernel("rbf", 0.05), X[::20], rank=20)
    Phi, x_sq = F.feature_chunk(fmap, X)
    with pytest.warns(KKMeansWarning, match="did not converge"):
        res = F.lloyd(Phi, x_sq, np.ones(800), Phi[:6].astype(float), max_iter=1)
    assert not res.converged and res.n_iter == 1


# -- sampled restarts ------------------------------------------------------------------------
def test_sampled_restarts_completes_the_best_distinct_candidates():
    objectives = [5.0, 3.0, 3.0, 4.0, 1.0, 1.0 + 1e-15]
    calls = []

    class Result:
        def __init__(self, inertia):
            self.inertia = inertia

    def solve_sample(sample, restart, rng):
        return objectives[restart], restart

    def complete(state):
        calls.append(state)
        return Result({4: 10.0, 1: 9.0, 3: 11.0}[state])

    out = sampled_restarts(100, 6, np.random.default_rng(0), solve_sample, complete,
                           sample_size=30, n_complete=3)
    assert out.sample.size == 30 and np.all(np.diff(out.sample) > 0)
    assert out.completed == calls == [4, 1, 3]  # 5 repeats 4's solution, 2 repeats 1's
    assert out.full_objectives == [10.0, 9.0, 11.0]
    assert out.best_candidate == 1 and out.best.inertia == 9.0
    assert distinct_best([2.0, 2.0, 2.0], 3) == [0]


def test_estimator_restarts_on_a_sample_then_all_data():
    X, y = sklearn_blobs(30_000, d=5, k=6, seed=4)
    est = KernelKMeans(6, kernel="rbf", approx="nystroem", n_init=8, random_state=0, n_threads=1).fit(X)
    stats = est.nystroem_stats_
    assert stats["sample_size"] == 20_000
    assert len(stats["sample_objectives"]) == 8
    # the completed candidates are the best on the sample (of candidates equal to rounding,
    # the lowest index: which of them rounds lower depends on the BLAS kernels), the winner is
    # the best completed
    obj = np.asarray(stats["sample_objectives"])
    best = obj.min()
    tied = np.flatnonzero(np.abs(obj - best) <= SAME_RTOL * abs(best))
    assert stats["completed"][0] == tied[0]
    assert est.inertia_ == min(est.fit_stats_["restart_inertias"])
    assert est.fit_stats_["start_kinds"][:2] == ["spectral", "normalized-spectral"]
    # the labels are the argmin under the stored centres: predict returns them
    np.testing.assert_array_equal(est.predict(X), est.labels_)


def test_estimator_thread_count_does_not_change_results():
    X, _ = sklearn_blobs(25_000, d=4, k=5, seed=1)
    a = KernelKMeans(5, kernel="rbf", approx="nystroem", n_init=4, random_state=0, n_threads=1).fit(X)
    b = KernelKMeans(5, kernel="rbf", approx="nystroem", n_init=4, random_state=0, n_threads=2).fit(X)
    np.testing.assert_array_equal(a.labels_, b.labels_)
    np.testing.assert_array_equal(a.centers_, b.centers_)
    assert a.inertia_ == b.inertia_
    assert a.nystroem_stats_["sample_objectives"] == b.nystroem_stats_["sample_objectives"]


def test_init_labels_run_lloyd_from_them():
    X, _ = sklearn_blobs(3000, k=4)
    start = np.random.default_rng(0).integers(0, 4, size=3000)
    est = KernelKMeans(4, kernel="rbf", approx="nystroem", init=start, random_state=0, n_threads=1).fit(X)
    Phi, x_sq = F.feature_chunk(F.FeatureMap(est.kernel_, est.landmarks_,
                                             est.nystroem_transform_, np.empty(0)), X)
    w = np.ones(3000)
    S = np.stack([Phi[start == c].astype(float).sum(axis=0) for c in range(4)])
    W = np.bincount(start, minlength=4).astype(float)
    want = F.lloyd(Phi, x_sq, w, S / W[:, None], labels=start)
    np.testing.assert_array_equal(est.labels_, want.labels)
    assert est.n_iter_ == want.n_iter
    assert est.fit_stats_["start_kinds"] == ["labels"]


# -- the model -------------------------------------------------------------------------------
def test_saved_model_predicts_the_fit_labels(tmp_path):
    X, _ = sklearn_blobs(4 * F.CHUNK_ROWS * 2 + 100, d=6, k=7, seed=5)
    data = write_csv(tmp_path / "d.csv", X)
    model = tmp_path / "m.npz"
    res = run(["fit", "--kernel", "rbf", data, "-k", "7", "--approx", "nystroem", "--rank", "21", "--n-init", "3",
               "--seed", "1", "-o", model])
    assert res.exit_code == 0, res.stderr
    assert "rank 21 (float32 features)" in res.stderr
    assert "trace(K − K̃)/trace(K)" in res.stderr
    loaded = load_model(str(model))
    assert loaded.meta["nystroem_rank"] == 21 and loaded.meta["nystroem_features"] == "float32"
    res2 = run(["predict", model, data, "--threads", "2"])
    assert res2.exit_code == 0, res2.stderr
    assert res2.stdout == res.stdout


def test_bad_rank_is_a_usage_error(tmp_path):
    X, _ = sklearn_blobs(200, k=4)
    data = write_csv(tmp_path / "d.csv", X)
    res = run(["fit", "--kernel", "rbf", data, "-k", "3", "--approx", "nystroem", "--rank", "0", "-o",
               tmp_path / "m.npz"])
    assert res.exit_code == 2 and "--rank" in res.stderr
    assert not (tmp_path / "m.npz").exists()
    with pytest.raises(ValueError, match="'nystroem_rank' parameter of KernelKMeans must be "
                                         "an int in the range"):
        KernelKMeans(3, kernel="rbf", approx="nystroem", nystroem_rank=0).fit(X)


def test_model_with_a_bad_feature_type_is_refused(tmp_path):
    X, _ = sklearn_blobs(500, k=4)
    data = write_csv(tmp_path / "d.csv", X)
    model = tmp_path / "m.npz"
    assert run(["fit", "--kernel", "rbf", data, "-k", "3", "--approx", "nystroem", "-o", model]).exit_code == 0
    import json

    with np.load(model, allow_pickle=False) as z:
        arrays = {key: z[key] for key in z.files}
    meta = json.loads(str(arrays["meta"]))
    meta["nystroem_features"] = "float16"
    arrays["meta"] = np.array(json.dumps(meta))
    bad = tmp_path / "bad.npz"
    np.savez(bad, **arrays)
    res = run(["predict", bad, data])
    assert res.exit_code == 1 and "nystroem_features" in res.stderr


def test_an_emptied_cluster_is_found_through_drifted_sums():
    # The engine keeps the cluster weights W up to date from the moves; a cluster whose last
    # point left may keep a rounding residue instead of 0. Such a W is recounted from the
    # labels; a cluster of tiny but real weight is not taken for empty.
    labels = np.array([0, 0, 2, 2], dtype=np.int32)
    w = np.array([1.0, 1.0, 1.0, 1e-12])
    assert F._maybe_empty(np.array([2.0, 1e-17, 1.0 + 1e-12]), labels, w, 3)
    assert F._maybe_empty(np.array([2.0, -1e-17, 1.0 + 1e-12]), labels, w, 3)
    assert not F._maybe_empty(np.array([2.0, 1.0, 1.0]), np.array([0, 1, 2, 0], np.int32),
                              w, 3)
    tiny = np.array([0, 0, 1, 2], dtype=np.int32)
    w_tiny = np.array([1.0, 1.0, 1e-12, 1.0])
    assert not F._maybe_empty(np.array([2.0, 1e-12, 1.0]), tiny, w_tiny, 3)
