"""Large data: the memory plan, float32 storage, and the Nyström approximation (docs/engine.md)."""
import math

import numpy as np
import pytest
from helpers import FAST, assert_one_error_line, run, write_csv
from sklearn.datasets import make_blobs, make_circles, make_moons
from sklearn.metrics import adjusted_rand_score

from kkmeans_cli import KernelKMeans
from kkmeans_cli import memory
from kkmeans_cli.kernels import nystroem
from kkmeans_cli.measures import features as feature_measures
from kkmeans_cli.engine import features
from kkmeans_cli.errors import MemoryPlanError
from kkmeans_cli.kernels.functions import Kernel
from kkmeans_cli.model.model_file import load_model


def _moons(n, seed=0):
    return make_moons(n, noise=0.05, random_state=seed)[0], 2, 10.0


def _circles(n, seed=0):
    return make_circles(n, factor=0.3, noise=0.05, random_state=seed)[0], 2, 5.0


def _blobs(n, seed=0):
    return make_blobs(n, centers=5, n_features=4, cluster_std=1.5, random_state=seed)[0], 5, \
        "median"


DATASETS = {"moons": _moons, "circles": _circles, "blobs": _blobs}


# -- memory plan ----------------------------------------------------------------------------
@pytest.mark.parametrize("text, want", [("8G", 8 * 2**30), ("500M", 500 * 2**20),
                                        ("1.5GB", int(1.5 * 2**30)), ("123", 123),
                                        ("64KiB", 64 * 1024), ("2g", 2 * 2**30)])
def test_parse_size(text, want):
    assert memory.parse_size(text) == want


@pytest.mark.parametrize("text", ["", "G", "-1G", "8Q", "eight", "0"])
def test_parse_size_refuses_nonsense(text):
    with pytest.raises(ValueError):
        memory.parse_size(text)


def test_plan_counts_the_kernel_matrix_by_dtype():
    n, k = 40_000, 8
    p64, p32 = memory.plan(n, k, "float64"), memory.plan(n, k, "float32")
    assert p64.items["kernel matrix"] == n * n * 8
    assert p32.items["kernel matrix"] == n * n * 4
    assert p64.total > p32.total > n * n * 4
    nys = memory.plan(n, k, approx="nystroem", n_landmarks=300)
    assert "kernel matrix" not in nys.items and nys.items["Nyström features"] == n * 300 * 8
    assert memory.plan(n, k, kernel_given=True).total < 10**9


def test_plan_of_the_feature_engine_counts_float32_features_of_its_rank():
    # The explicit-feature engine holds Φ (n × s float32), ‖φ‖², K_ii and per-point state; no
    # n × m float64 features, no k × n outer sums.
    n, k = 40_000, 8
    eng = memory.plan(n, k, approx="nystroem", n_landmarks=300, rank=40, feature_engine=True)
    assert eng.items["Nyström features"] == n * 40 * 4 + n * 16
    assert "outer sums" not in eng.items and "k-means++ rows" not in eng.items
    default = memory.plan(n, k, approx="nystroem", n_landmarks=300, feature_engine=True)
    assert default.items["Nyström features"] == n * 40 * 4 + n * 16  # s = ⌈8 / 0.2⌉ = 40
    assert "(rank 40)" in default.what
    old = memory.plan(n, k, approx="nystroem", n_landmarks=300)
    assert eng.total < old.total
    assert eng.items["Nyström features"] < old.items["Nyström features"] / 10


def test_plan_and_engine_share_their_constants():
    from kkmeans_cli.engine import restarts

    assert memory.FEATURE_EPSILON == features.EPSILON
    assert memory.FEATURE_BLOCK_ROWS == features.CHUNK_ROWS
    assert memory.FEATURE_PART_ROWS == features.PART_ROWS
    assert memory.RESTARTS_COMPLETED == restarts.N_COMPLETE


def test_feature_engine_fit_is_checked_against_its_own_plan():
    rng = np.random.default_rng(0)
    X = np.concatenate([rng.normal(c, 0.3, (3000, 2)) for c in (-3, 0, 3)])
    planned = dict(k=3, approx="nystroem", n_landmarks=300, rank=15, feature_engine=True,
                   n_threads=1)
    need = memory.plan(X.shape[0], **planned).total
    est = KernelKMeans(3, kernel="rbf", gamma=1.0, approx="nystroem", n_threads=1, memory_limit=need,
                       random_state=0).fit(X)
    assert est.nystroem_rank_ == 15 and np.bincount(est.labels_).tolist() == [3000] * 3
    with pytest.raises(MemoryPlanError) as info:
        KernelKMeans(3, kernel="rbf", gamma=1.0, approx="nystroem", n_threads=1, memory_limit=need - 1,
                     random_state=0).fit(X)
    assert "Nyström fit of 9,000 points with 300 landmarks (rank 15)" in str(info.value)
    assert "Nyström features" in str(info.value)


def test_fit_refuses_a_million_points_before_allocating(monkeypatch):
    # The kernel matrix of 10^6 points is 8 TB (7.28 TiB): the plan refuses with the default limit
    # (80% of the available RAM) before anything n×n is allocated.
    monkeypatch.setattr(Kernel, "matrix",
                        lambda *a, **k: pytest.fail("the kernel matrix was allocated"))
    X = np.zeros((10**6, 2))
    X[:, 0] = np.arange(10**6) % 7
    with pytest.raises(MemoryPlanError) as info:
        KernelKMeans(3, kernel="rbf", gamma=1.0, storage="matrix").fit(X)
    message = str(info.value)
    assert "7.28 TiB" in message and "80% of the available RAM" in message
    # the Python API names the parameters (the command line its options: tests below)
    assert "dtype='float32'" in message and "approx='nystroem'" in message
    assert "--" not in message
    assert "smaller sample" in message


def test_explicit_limit_and_nystroem_way_out():
    X, k, gamma = _blobs(2000)
    with pytest.raises(MemoryPlanError, match=r"limit is 10 MiB \(memory_limit\)"):
        KernelKMeans(k, kernel="rbf", gamma=0.1, memory_limit="10M").fit(X)
    # The same limit admits the Nyström fit (n·m instead of n²).
    est = KernelKMeans(k, kernel="rbf", gamma=0.1, memory_limit="20M", approx="nystroem", n_landmarks=200,
                       n_init=2, n_threads=1).fit(X)
    assert est.labels_.shape == (2000,)


def test_blocked_storage_is_planned_and_offered(monkeypatch):
    # The exact plan offers the blocked storage as a way out (no n×n matrix) ...
    X, k, _ = _blobs(6000)
    monkeypatch.setattr(Kernel, "matrix",
                        lambda *a, **kw: pytest.fail("the kernel matrix was allocated"))
    with pytest.raises(MemoryPlanError) as info:
        KernelKMeans(k, kernel="rbf", gamma=0.1, memory_limit="200M", storage="matrix").fit(X)
    assert "storage='blocked' (needs 130 MiB)" in str(info.value)
    blocked = memory.plan(6000, k, storage="blocked")
    assert "kernel matrix" not in blocked.items and "Elkan bounds" in blocked.items
    # ... which fits that limit without a kernel matrix and predicts its own labels ...
    est = KernelKMeans(k, kernel="rbf", gamma=0.1, memory_limit="200M", storage="blocked", n_init=1,
                       n_threads=1, random_state=0).fit(X)
    np.testing.assert_array_equal(est.predict(X), est.labels_)
    # ... and is refused itself below its own need, before any kernel value is computed.
    monkeypatch.setattr(Kernel, "cross",
                        lambda *a, **kw: pytest.fail("a kernel block was computed"))
    with pytest.raises(MemoryPlanError, match="the blocked exact fit of 6,000 points"):
        KernelKMeans(k, kernel="rbf", gamma=0.1, memory_limit="100M", storage="blocked").fit(X)


def test_auto_storage_takes_the_blocked_route_when_the_matrix_does_not_fit():
    """The planning rule of storage='auto' (memory.choose_storage): the matrix when its plan
    fits, else the blocked route when that one fits and is possible, else a refusal naming
    Nyström; every choice comes with its reason."""
    n, k = 50_000, 5
    matrix_need = memory.plan(n, k).total
    blocked_need = memory.plan(n, k, storage="blocked").total
    assert blocked_need < 10**9 < 2 * 10**10 < matrix_need
    storage, why = memory.choose_storage(n, k, limit=matrix_need)
    assert storage == "matrix" and "fits" in why
    storage, why = memory.choose_storage(n, k, limit=matrix_need - 1)
    assert storage == "blocked"
    assert f"more than the limit of {memory.format_bytes(matrix_need - 1)}" in why
    assert "(memory_limit)" in why and "computed in blocks" in why
    storage, why = memory.choose_storage(n, k, limit=blocked_need)
    assert storage == "blocked"
    with pytest.raises(MemoryPlanError) as info:
        memory.choose_storage(n, k, limit=blocked_need - 1)
    assert "approx='nystroem'" in str(info.value)
    # as the command line words them, where kkmeans runs
    token = memory.OPTION_NAMES.set("cli")
    try:
        assert "(--memory-limit)" in memory.choose_storage(n, k, limit=matrix_need - 1)[1]
        assert memory.choose_storage(n, k, storage="blocked")[1] == \
            "asked for (--storage blocked)"
        with pytest.raises(MemoryPlanError, match="--approx nystroem"):
            memory.choose_storage(n, k, limit=blocked_need - 1)
    finally:
        memory.OPTION_NAMES.reset(token)
    assert memory.choose_storage(n, k, storage="blocked")[1] == "asked for (storage='blocked')"
    # a kernel the blocked route cannot run (not PSD by construction): refused, not blocked
    with pytest.raises(MemoryPlanError):
        memory.choose_storage(n, k, limit=matrix_need - 1, blocked_ok=False)
    # explicit choices are kept, a given matrix is used
    assert memory.choose_storage(n, k, limit=1, storage="matrix")[0] == "matrix"
    assert memory.choose_storage(n, k, limit=1, kernel_given=True)[0] == "matrix"
    assert memory.choose_storage(n, k, limit=None, storage="blocked")[0] == "blocked"


def test_a_blocked_route_asked_for_is_worded_for_who_asked(tmp_path):
    """The route's reason names the parameter in the Python API and the option on the
    command line (fit gives its reason before the memory plan is made)."""
    X, k, _ = _blobs(600)
    est = KernelKMeans(k, kernel="rbf", gamma=0.1, storage="blocked", n_init=1,
                       random_state=0).fit(X)
    assert est.fit_stats_["storage_reason"] == "asked for (storage='blocked')"
    write_csv(tmp_path / "b.csv", X)
    result = run(["fit", tmp_path / "b.csv", "-k", str(k), "--kernel", "rbf", "--storage",
                  "blocked", "--no-model"])
    assert result.exit_code == 0, result.stderr
    assert "asked for (--storage blocked)" in result.stderr
    assert "storage='blocked'" not in result.stderr


def test_auto_fit_goes_blocked_instead_of_refusing(monkeypatch):
    X, k, _ = _blobs(6000)
    monkeypatch.setattr(Kernel, "matrix",
                        lambda *a, **kw: pytest.fail("the kernel matrix was allocated"))
    est = KernelKMeans(k, kernel="rbf", gamma=0.1, memory_limit="200M", n_init=2, n_threads=1,
                       random_state=0).fit(X)
    assert est.fit_stats_["storage"] == "blocked"
    limit = memory.format_bytes(memory.parse_size("200M"))
    assert f"more than the limit of {limit} (memory_limit)" in est.fit_stats_["storage_reason"]
    np.testing.assert_array_equal(est.predict(X), est.labels_)
    # the sigmoid kernel has no blocked route (not PSD by construction): refused
    with pytest.raises(MemoryPlanError, match="approx='nystroem'"):
        KernelKMeans(k, kernel="sigmoid", gamma=0.01, memory_limit="200M").fit(X)


def test_sweep_kernel_matrix_is_planned():
    X, _, _ = _blobs(2000)
    with pytest.raises(MemoryPlanError):
        KernelKMeans(3, kernel="rbf", gamma=0.1, memory_limit=10**6).kernel_matrix(X)


def test_cli_memory_limit_refuses_with_exit_1_and_no_file(tmp_path):
    X, _, _ = _blobs(500)
    data = write_csv(tmp_path / "d.csv", X)
    model = tmp_path / "m.npz"
    res = run(["fit", "--kernel", "rbf", data, "-k", "3", "--memory-limit", "1M", "-o", model] + FAST)
    assert res.exit_code == 1
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kkmeans: error: not enough memory")
    assert "limit is 1 MiB (--memory-limit)" in lines[0] and "--approx nystroem" in lines[0]
    assert res.stdout == "" and not model.exists()
    res = run(["sweep", "--kernel", "rbf", data, "--k", "2..3", "--memory-limit", "1M", "-o", model] + FAST)
    assert res.exit_code == 1 and "not enough memory" in res.stderr and not model.exists()


@pytest.mark.parametrize("value", ["12Q", "-5M", "lots"])
def test_cli_bad_memory_limit_is_a_usage_error(tmp_path, value):
    data = write_csv(tmp_path / "d.csv", _blobs(50)[0])
    res = run(["fit", "--kernel", "rbf", data, "-k", "2", "--memory-limit", value, "--no-model"])
    assert res.exit_code == 2 and "--memory-limit" in res.stderr


# -- float32 --------------------------------------------------------------------------------
@pytest.mark.parametrize("name", sorted(DATASETS))
def test_float32_agrees_with_float64(name):
    X, k, gamma = DATASETS[name](1500)
    a = KernelKMeans(k, kernel="rbf", gamma=gamma, random_state=0, n_init=3).fit(X)
    b = KernelKMeans(k, kernel="rbf", gamma=gamma, random_state=0, n_init=3, dtype=np.float32).fit(X)
    np.testing.assert_array_equal(a.labels_, b.labels_)
    assert b.inertia_ == pytest.approx(a.inertia_, rel=1e-5)


# -- Nyström --------------------------------------------------------------------------------
def test_default_landmarks_rule():
    assert memory.default_landmarks(100, 3) == 100
    assert memory.default_landmarks(5000, 2) == 300
    assert memory.default_landmarks(10**6, 20) == 400
    assert memory.default_landmarks(10**6, 200) == 1000


def test_transform_is_the_inverse_square_root():
    X, _, _ = _blobs(120)
    kernel = Kernel("rbf", 0.05)
    T, rank = nystroem.landmark_transform(kernel, X)
    K = kernel.matrix(X)
    assert rank == 120
    np.testing.assert_allclose(T @ K @ T, np.eye(120), atol=1e-6)
    Phi = nystroem.features(X, X, T, kernel)
    np.testing.assert_allclose(Phi @ Phi.T, K, atol=1e-8)


def test_nystroem_with_all_points_is_exact_kernel_kmeans():
    X, _ = make_blobs(400, centers=4, n_features=3, cluster_std=2.0, random_state=3)
    start = np.random.default_rng(1).integers(0, 4, size=400)
    exact = KernelKMeans(4, kernel="rbf", gamma=0.1, init=start, tol=0).fit(X)
    # every landmark and the full rank: the Nyström kernel is K itself
    nys = KernelKMeans(4, kernel="rbf", gamma=0.1, init=start, tol=0, approx="nystroem",
                       n_landmarks=400, nystroem_rank=400).fit(X)
    np.testing.assert_array_equal(nys.labels_, exact.labels_)
    assert nys.inertia_ == pytest.approx(exact.inertia_, rel=1e-6)
    assert nys.n_iter_ == exact.n_iter_


def test_feature_source_matches_in_memory_kernel():
    from kkmeans_cli.kernels.sources import InMemoryKernel

    rng = np.random.default_rng(0)
    Phi = rng.normal(size=(300, 20))
    w = rng.uniform(0.5, 2.0, 300)
    labels = rng.integers(0, 5, 300).astype(np.int32)
    a, b = nystroem.FeatureSpaceSource(Phi), InMemoryKernel(Phi @ Phi.T)
    Fa, Fb = np.empty((5, 300)), np.empty((5, 300))
    a.full_outer_sums(labels, w, Fa)
    b.full_outer_sums(labels, w, Fb)
    np.testing.assert_allclose(Fa, Fb, rtol=1e-10, atol=1e-10)
    moved = np.array([3, 17, 40])
    dst = (labels[moved] + 1) % 5
    a.update_outer_sums(moved, labels[moved], dst, w[moved], Fa)
    b.update_outer_sums(moved, labels[moved], dst, w[moved], Fb)
    np.testing.assert_allclose(Fa, Fb, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(a.rows([1, 5]), b.rows([1, 5]), rtol=1e-12)
    np.testing.assert_allclose(a.diag, b.diag, rtol=1e-12)


@pytest.mark.parametrize("name", sorted(DATASETS))
def test_nystroem_default_landmarks_reproduce_exact(name):
    X, k, gamma = DATASETS[name](5000)
    exact = KernelKMeans(k, kernel="rbf", gamma=gamma, random_state=0, n_init=5).fit(X)
    nys = KernelKMeans(k, kernel="rbf", gamma=gamma, random_state=0, n_init=5, approx="nystroem").fit(X)
    assert nys.n_landmarks_ == 300
    assert adjusted_rand_score(exact.labels_, nys.labels_) >= 0.95
    assert not hasattr(nys, "X_fit_") or nys.X_fit_ is None


def test_nystroem_thread_count_does_not_change_results():
    X, k, gamma = _blobs(5000)
    a = KernelKMeans(k, kernel="rbf", gamma=gamma, random_state=0, n_init=2, approx="nystroem",
                     n_threads=1).fit(X)
    b = KernelKMeans(k, kernel="rbf", gamma=gamma, random_state=0, n_init=2, approx="nystroem",
                     n_threads=2).fit(X)
    np.testing.assert_array_equal(a.labels_, b.labels_)
    assert a.inertia_ == b.inertia_
    np.testing.assert_array_equal(a.centers_, b.centers_)


def test_nystroem_predict_api():
    X, k, gamma = _circles(2000)
    est = KernelKMeans(k, kernel="rbf", gamma=gamma, random_state=0, n_init=3, approx="nystroem",
                       n_landmarks=150).fit(X)
    assert est.landmarks_.shape == (150, 2)
    s = est.nystroem_rank_  # the rank-restricted features: K(x, L) P, P of shape m×s
    assert s == min(150, math.ceil(k / features.EPSILON))
    assert est.nystroem_transform_.shape == (150, s)
    assert est.centers_.shape == (k, s)
    np.testing.assert_array_equal(est.predict(X), est.labels_)
    # d(x, c) = ‖φ(x) − μ_c‖² with φ(x) = K(x, L) T.
    new = X[:50] + 0.01
    phi = est.kernel_.cross(new, est.landmarks_) @ est.nystroem_transform_
    want = ((phi[:, None, :] - est.centers_[None]) ** 2).sum(axis=2)
    np.testing.assert_allclose(est.transform(new), want, atol=1e-9)
    np.testing.assert_array_equal(est.predict(new), np.argmin(want, axis=1))
    with pytest.raises(ValueError, match="features"):
        est.predict(np.zeros((3, 5)))


def test_nystroem_model_round_trip_and_cli_predict(tmp_path):
    X, k, gamma = _circles(1200)
    data = write_csv(tmp_path / "d.csv", X)
    model = tmp_path / "m.npz"
    res = run(["fit", "--kernel", "rbf", data, "-k", "2", "--gamma", "5", "--approx", "nystroem", "--landmarks",
               "120", "--silhouette", "-o", model] + FAST)
    assert res.exit_code == 0, res.stderr
    labels = res.stdout
    with np.load(model, allow_pickle=False) as z:
        assert "X_fit" not in z.files
        s = features.default_rank(2, 120)
        assert z["landmarks"].shape == (120, 2) and z["nystroem_transform"].shape == (120, s)
        assert z["centers"].shape == (2, s) and z["labels"].shape == (1200,)
    loaded = load_model(str(model))
    assert loaded.meta["approx"] == "nystroem" and loaded.meta["n_landmarks"] == 120
    res = run(["predict", model, data, "--threads", "1"])
    assert res.exit_code == 0, res.stderr
    assert res.stdout == labels
    # A model whose Nyström arrays are damaged is refused.
    with np.load(model, allow_pickle=False) as z:
        arrays = {key: z[key] for key in z.files}
    arrays["centers"] = arrays["centers"][:, :-1]
    bad = tmp_path / "bad.npz"
    np.savez(bad, **arrays)
    res = run(["predict", bad, data])
    assert res.exit_code == 1 and "'centers' has shape" in res.stderr


def test_nystroem_sweep_shares_features(tmp_path, monkeypatch):
    X, _, _ = _blobs(1500)
    calls = []
    original = nystroem.fit_features
    monkeypatch.setattr(nystroem, "fit_features",
                        lambda *a, **kw: calls.append(1) or original(*a, **kw))
    from kkmeans_cli.model.sweep import sweep

    result = sweep(X, "2..6", kernel="rbf", gamma=0.05, n_init=2, random_state=0,
                   n_threads=1, approx="nystroem")
    assert len(calls) == 1
    assert result.best_k == 5
    best = result.best_estimator
    direct = KernelKMeans(5, kernel="rbf", gamma=0.05, n_init=2, random_state=0, n_threads=1,
                          approx="nystroem", n_landmarks=best.n_landmarks_).fit(X)
    np.testing.assert_array_equal(direct.labels_, best.labels_)
    sil = feature_measures.silhouette_score(nystroem.fit_features(
        X, best.kernel_, best.n_landmarks_, 0).Phi, best.labels_).score
    assert result.best_row["silhouette"] == pytest.approx(sil, rel=1e-9)


def test_nystroem_silhouette_blocks_match_exact_metric():
    from kkmeans_cli.measures.metrics import scores

    rng = np.random.default_rng(0)
    Phi = rng.normal(size=(700, 10))
    labels = rng.integers(0, 4, 700)
    want = scores(Phi @ Phi.T, labels)
    got = feature_measures.scores(Phi, labels)
    for key in want:
        assert got[key] == pytest.approx(want[key], rel=1e-9, abs=1e-9), key
    sampled = feature_measures.scores(Phi, labels, max_exact=500, sample_size=300)
    assert sampled["silhouette_n_used"] == 300


def test_feature_progress_and_estimator_scores():
    X, k, gamma = _blobs(3000)
    seen = []
    est = KernelKMeans(k, kernel="rbf", gamma=gamma, random_state=0, n_init=2, approx="nystroem",
                       n_landmarks=100)
    est.fit(X, progress=lambda done, total: seen.append((done, total)))
    assert seen and seen[-1] == (3000, 3000)
    with pytest.raises(ValueError, match="features"):
        est.scores()
    got = est.scores(kernel_matrix=est.kernel_matrix(X))
    assert -1 <= got["silhouette"] <= 1 and got["silhouette_n_used"] == 3000


def test_nystroem_spectral_start_uses_the_features_not_kernel_rows(monkeypatch):
    from sklearn.datasets import make_blobs

    from kkmeans_cli import KernelKMeans
    from kkmeans_cli.engine.feature_source import FeatureSpaceSource

    X, _ = make_blobs(600, centers=3, random_state=0)
    # rows(idx) of the Nyström features costs n·m per index: the spectral start must not read
    # 1,000 of them at large n. (The k-means inside the start runs the engine on the n×r
    # embedding, whose own k-means++ reads rows of that small space: allowed.)
    rows = FeatureSpaceSource.rows
    m = 50

    def guarded(self, idx):
        if self.m == m:
            pytest.fail("spectral start read kernel rows of the Nyström features")
        return rows(self, idx)

    monkeypatch.setattr(FeatureSpaceSource, "rows", guarded)
    est = KernelKMeans(3, kernel="rbf", approx="nystroem", n_landmarks=m, init="spectral", n_init=1,
                       random_state=0).fit(X)
    assert est.fit_stats_["spectral_method"] == "features"
    np.testing.assert_array_equal(est.predict(X), est.labels_)


def test_screened_restarts_on_the_blocked_route(monkeypatch):
    """Above twice the sample size, the restarts of a blocked fit are screened on a sample
    (engine/exact_restarts.py): every candidate is solved there, the promising ones are
    completed on all the data, and the winner is a Lloyd fixed point of all the data."""
    from kkmeans_cli.engine import exact_restarts

    monkeypatch.setattr(exact_restarts, "SAMPLE_MIN", 500)
    monkeypatch.setattr(exact_restarts, "SAMPLE_PER_CLUSTER", 50)
    monkeypatch.setattr(Kernel, "matrix",
                        lambda *a, **kw: pytest.fail("the kernel matrix was allocated"))
    X = make_blobs(3000, centers=4, n_features=3, cluster_std=1.0, random_state=2)[0]
    est = KernelKMeans(4, kernel="rbf", n_init=6, storage="blocked", random_state=0, n_threads=1).fit(X)
    stats = est.fit_stats_
    assert stats["sample_size"] == 500 and len(stats["sample_objectives"]) == 6
    assert len(stats["screened_start_kinds"]) == 6
    assert 1 <= len(stats["restart_inertias"]) == len(stats["completed"]) <= 3
    best = min(stats["sample_objectives"])
    for c in stats["completed"]:
        assert stats["sample_objectives"][c] <= best + 0.01 * abs(best)
    assert est.inertia_ == min(stats["restart_inertias"])
    np.testing.assert_array_equal(est.predict(X), est.labels_)


@pytest.mark.parametrize("extra", [[], ["--refine", "hartigan"], ["--threads", "64"]])
def test_the_nystroem_way_out_names_what_the_nystroem_run_then_needs(tmp_path, extra):
    # A refused exact fit names --approx nystroem with its need; that run (the explicit-
    # feature engine, or the general route with Hartigan) is then planned the same, by the
    # command line and by the estimator (more threads than cores: more kernel blocks).
    import re

    X = np.random.default_rng(0).normal(size=(20_000, 2))
    data = tmp_path / "d.npy"
    np.save(data, X)
    common = ["-k", "3", "--no-model", "--seed", "0", *extra]
    exact = run(["fit", "--kernel", "rbf", data, "--storage", "matrix", "--memory-limit", "1G", *common])
    assert exact.exit_code == 1 and exact.stdout == ""
    named = re.search(r"--approx nystroem \(needs ([^,)]+)", exact.stderr).group(1)
    nys = run(["fit", "--kernel", "rbf", data, "--approx", "nystroem", "--memory-limit", "1M", *common])
    assert nys.exit_code == 1 and nys.stdout == ""
    assert re.search(r"points with 300 landmarks[^)]*?\)? needs ([^ ]+ [KMG]i?B)",
                     nys.stderr).group(1) == named
    threads = int(extra[1]) if extra[:1] == ["--threads"] else 1
    need = memory.plan(20_000, 3, approx="nystroem", n_landmarks=300,
                       feature_engine="hartigan" not in extra, n_threads=threads).total
    with pytest.raises(MemoryPlanError, match=re.escape(f"needs {memory.format_bytes(need)}")):
        KernelKMeans(3, kernel="rbf", approx="nystroem", memory_limit="1M", random_state=0, n_threads=threads,
                     refine="hartigan" if "hartigan" in extra else "auto").fit(X)


def test_a_limit_too_small_for_two_rows_says_so():
    # The landmark kernel alone (4·m²·8 bytes for m = 300) exceeds a 1 MB limit: no sample
    # fits, and the refusal names the one way out instead of failing to build its message.
    X = np.random.default_rng(0).normal(size=(3000, 2))
    with pytest.raises(MemoryPlanError) as info:
        KernelKMeans(3, kernel="rbf", approx="nystroem", refine="hartigan", n_landmarks=300,
                     memory_limit="1M", random_state=0).fit(X)
    message = str(info.value)
    assert message.endswith("try a larger memory_limit (not even 2 rows fit in this one)")
    assert "the limit is 1 MiB (memory_limit)" in message


# -- the graph kernel's plan -------------------------------------------------------------------
def _graph_points(n, seed=0):
    return np.random.default_rng(seed).uniform(size=(n, 2))


def test_graph_plan_refuses_too_many_neighbours_before_allocating(tmp_path):
    """fit and sweep with --kernel knn (the default): a graph whose plan exceeds --memory-limit
    is one error line (exit 1) naming the need, the limit and the most --n-neighbors that fit,
    before anything is built; no file is written. The neighbours named do fit, one more not."""
    write_csv(tmp_path / "d.csv", _graph_points(2000))
    limit = 20 * 2**20
    fit = run(["fit", tmp_path / "d.csv", "-k", "2", "--n-neighbors", "1999", "--memory-limit",
               "20M", "-o", tmp_path / "m.npz", "--summary", tmp_path / "s.json"])
    plan = memory.graph_plan(2000, 1999, 2, 2)
    best = max(m for m in range(2, 1999) if memory.graph_plan(2000, m, 2, 2).total <= limit)
    assert memory.graph_plan(2000, best + 1, 2, 2).total > limit
    line = assert_one_error_line(
        fit, "kkmeans: error: not enough memory: the neighbour graph of 2,000 points with 1,999 "
        f"neighbours and its fit needs {memory.format_bytes(plan.total)} (graph building ",
        "the limit is 20 MiB (--memory-limit); try --n-neighbors "
        f"{best} (needs {memory.format_bytes(memory.graph_plan(2000, best, 2, 2).total)}) or "
        "a smaller sample", code=1)
    assert line.endswith("or a smaller sample")
    sweep = run(["sweep", tmp_path / "d.csv", "--k", "2..4", "--n-neighbors", "1999",
                 "--memory-limit", "20M", "--table", tmp_path / "t.csv", "-o",
                 tmp_path / "m.npz"])
    assert_one_error_line(sweep, "not enough memory: the neighbour graph of 2,000 points with "
                          "1,999 neighbours and its fit needs", "try --n-neighbors", code=1)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.csv"]
    # the Python API refuses the same way (a MemoryError too)
    X = _graph_points(2000)
    with pytest.raises(MemoryPlanError, match=f"\\(memory_limit\\); try n_neighbors={best} "):
        KernelKMeans(2, n_neighbors=1999, memory_limit="20M").fit(X)
    from kkmeans_cli.model.sweep import graph_sweep

    with pytest.raises(MemoryPlanError, match="the neighbour graph of 2,000 points"):
        graph_sweep(X, [2, 3], n_neighbors=1999, memory_limit="20M")


def test_graph_fit_within_a_generous_limit_is_the_fit_without_one(tmp_path):
    """Under a limit the plan fits, the fit is the one without a limit, and no warning says
    --memory-limit is ignored (it is not, for knn). A limit that holds one graph but not the
    default's whitened refit beside it gives the one fit (--no-whiten); below it, a refusal."""
    X = _graph_points(1500, seed=2)
    write_csv(tmp_path / "d.csv", X)
    args = ["fit", tmp_path / "d.csv", "-k", "3", "--n-neighbors", "30", "--seed", "1",
            "--no-model"]
    free = run(args)
    need = memory.graph_plan(1500, 30, 2, 3, whiten="auto").total
    limited = run([*args, "--memory-limit", str(need)])
    assert free.exit_code == limited.exit_code == 0, limited.stderr
    assert limited.stdout == free.stdout and "warning" not in limited.stderr
    once = memory.graph_plan(1500, 30, 2, 3).total
    assert once < need
    single = run([*args, "--memory-limit", str(once)])
    assert single.exit_code == 0, single.stderr
    assert single.stdout == run([*args, "--no-whiten"]).stdout
    refused = run([*args, "--memory-limit", str(once - 1)])
    assert refused.exit_code == 1 and "not enough memory" in refused.stderr
    est = KernelKMeans(3, n_neighbors=30, random_state=1, memory_limit=need).fit(X)
    np.testing.assert_array_equal(est.labels_, KernelKMeans(3, n_neighbors=30,
                                                            random_state=1).fit(X).labels_)


@pytest.mark.parametrize("init, sweep", [("k-means++", False), ("spectral", False),
                                         ("k-means++", True)])
def test_graph_plan_bounds_the_memory_the_fit_allocates(init, sweep):
    """The plan is at least the peak of the memory NumPy and SciPy allocate (tracemalloc) for
    building the graph and fitting (or sweeping) 12,000 points with 30 neighbours — past the
    5,000 nodes where the default starts coarsen, below the 20,000 of the sweep's eigengap —
    and within 2.5 times it."""
    import tracemalloc

    from kkmeans_cli.model.sweep import graph_sweep

    def run_it(X, ks):
        if sweep:
            graph_sweep(X, ks, n_neighbors=30, random_state=0, n_threads=1, refit_best=False,
                        metric="silhouette")
        else:
            KernelKMeans(ks[-1], n_neighbors=30, init=init, random_state=0, n_threads=1).fit(X)

    run_it(_graph_points(800, seed=1), [2, 3, 4])   # imports and first calls: not measured
    X = _graph_points(12_000)
    tracemalloc.start()
    try:
        run_it(X, [2, 3, 4])
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    plan = memory.graph_plan(12_000, 30, 2, 4, start="spectral" if init == "spectral" else
                             "auto", eigengap=sweep, sweep_ks=3 if sweep else 0)
    assert peak <= plan.total <= 2.5 * peak, (peak, plan.describe())


def test_graph_plan_constants_are_the_engines():
    """memory.py restates the graph kernel's constants (it imports no NumPy): they agree."""
    from kkmeans_cli.engine import graph_starts
    from kkmeans_cli.kernels import graph as kgraph

    assert memory.GRAPH_TREE_MAX_DIM == kgraph.TREE_MAX_DIM
    assert memory.GRAPH_SEARCH_BLOCK_BYTES == kgraph.SEARCH_BLOCK_BYTES
    assert memory.GRAPH_DIRECT_MAX == graph_starts.SPECTRAL_DIRECT_MAX
    assert memory.GRAPH_OVERSEGMENT == graph_starts.OVERSEGMENT
    assert memory.GRAPH_PIECES_MAX == graph_starts.PIECES_MAX
    for k in range(1, 200):     # and the rule of the starts' eigenvectors
        assert memory.graph_finest_multiple(k) == max(graph_starts.oversegment_multiples(k))
    assert memory.GRAPH_DENSE_MAX == graph_starts.SPECTRAL_DENSE_MAX
    assert memory.GRAPH_DENSE_FRACTION == graph_starts.DENSE_FRACTION
    assert memory.GRAPH_DENSE_FRACTION_MAX == graph_starts.DENSE_FRACTION_MAX
    assert memory.GRAPH_CHOICE_FACTOR == kgraph.CHOICE_FACTOR
    assert memory.GRAPH_BACKBONE == kgraph.BACKBONE
    # and the neighbours the search lists (the choice graph's longer lists), rule for rule
    for n in (2, 3, 7, 40, 334, 500, 5000):
        for nn in sorted({1, 2, 3, 5, 21, 200, 333, 334, n - 1}):
            for d in (1, 2, 15, 16, 64):
                for weighting in kgraph.WEIGHTINGS:
                    if 1 <= nn < n:
                        assert memory.graph_listed(n, nn, d, weighting) == \
                            kgraph.listed(nn, (n, d), weighting), (n, nn, d, weighting)


def test_graph_plan_of_each_neighbour_search():
    """Above 15 dimensions the plan is that of the search the fit takes: the exact search's
    blocks, or the approximate search's fixed cost (numba compiling pynndescent) and heaps;
    up to 15 dimensions the k-d tree's, neither."""
    X = np.random.default_rng(0).uniform(size=(50_000, 16))
    with pytest.raises(MemoryPlanError, match=r"\(neighbour search 4\d\d MiB \+ graph building"):
        KernelKMeans(2, n_neighbors=21, neighbor_search="approximate",
                     memory_limit="300M").fit(X)
    with pytest.raises(MemoryPlanError, match=r"\(search blocks \d+ MiB \+ graph building"):
        KernelKMeans(2, n_neighbors=21, neighbor_search="exact", memory_limit="100M").fit(X)
    tree = memory.graph_plan(50_000, 21, 15, 2)
    assert "search blocks" not in tree.items and "neighbour search" not in tree.items
    approximate = memory.graph_plan(50_000, 21, 16, 2, search="approximate")
    # the items add up to the search's peak: its fixed cost and 80 bytes an edge
    assert (approximate.items["neighbour search"] + approximate.items["graph building"]
            + approximate.items["neighbour lists"]) == \
        memory.GRAPH_APPROX_FIXED_BYTES + 80 * 50_000 * 21


@pytest.mark.parametrize("n", [1000, 3000])
def test_exact_search_plan_bounds_its_peak(n):
    """The exact search of n points in 20 dimensions allocates (tracemalloc) no more than the
    plan counts for the search before the graph is built (its lists, the building and the
    search's blocks), and within 2.5 times it, and gives the exact neighbours."""
    import tracemalloc

    from kkmeans_cli.kernels import graph as kgraph

    X = np.random.default_rng(n).uniform(size=(n, 20))
    kgraph.self_neighbours(X[:1100], 21, 1, "exact")     # imports and first calls
    tracemalloc.start()
    try:
        _, dist, idx = kgraph.self_neighbours(X, 21, 1, "exact")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    plan = memory.graph_plan(n, 21, 20, 2).items
    search = plan["neighbour lists"] + plan["graph building"] + plan.get("search blocks", 0)
    assert peak <= search <= 2.5 * peak, (peak, plan)
    from scipy.spatial.distance import cdist

    D = cdist(X, X)                          # brute force: every distance
    np.testing.assert_allclose(dist, np.sort(D, axis=1)[:, :21], rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(idx[:, 0], np.arange(n))
    np.testing.assert_allclose(D[np.arange(n)[:, None], idx], dist, rtol=1e-12, atol=1e-12)
