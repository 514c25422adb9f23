"""Spectral starts, Hartigan refinement and the normalized-cut objective (``engine/spectral.py``,
``engine/hartigan.py``, ``engine/ncut.py``; the start mix, ``engine/optima.py``)."""
import json
import os

import numpy as np
import pytest
from sklearn.datasets import make_blobs, make_circles, make_moons
from sklearn.metrics import adjusted_rand_score

import reference as ref
from helpers import gaussian, labels_of, run, write_csv
from kkmeans_cli import KernelKMeans
from kkmeans_cli.engine import _hartigan
from kkmeans_cli.errors import ModelFileError
from kkmeans_cli.engine.lloyd import inner_sums
from kkmeans_cli.model.model_file import load_model


def _psd_kernel(n=40, seed=0):
    X = gaussian(n, 3, seed)
    return ref.kernel_matrix(X, X, "rbf", gamma=0.4), X


def _sums(K, labels, w, k):
    F = np.stack([K[:, labels == c] @ w[labels == c] for c in range(k)])
    g, W = inner_sums(F, labels, w, k)
    return F, g, W


def _ncut_bruteforce(A, labels, u=None):
    """Σ_c cut(c, V∖c)/vol(c) with node masses u: cut = Σ_{i∈c, j∉c} u_i u_j A_ij,
    vol(c) = Σ_{i∈c} u_i Σ_j u_j A_ij."""
    u = np.ones(A.shape[0]) if u is None else u
    total = 0.0
    for c in np.unique(labels):
        m = labels == c
        cut = u[m] @ A[np.ix_(m, ~m)] @ u[~m]
        vol = u[m] @ A[m] @ u
        total += cut / vol
    return total


def test_move_delta_formula_equals_bruteforce():
    K, _ = _psd_kernel()
    n, k = K.shape[0], 3
    rng = np.random.default_rng(1)
    w = rng.uniform(0.3, 2.5, n)
    labels = rng.integers(0, k, n)
    F, g, W = _sums(K, labels, w, k)
    before = ref.objective(K, labels, w)
    for i in range(0, n, 3):
        a = labels[i]
        d = np.diag(K)[i] - 2 * F[:, i] / W + g / W ** 2
        for b in range(k):
            if b == a:
                continue
            delta = w[i] * W[b] / (W[b] + w[i]) * d[b] - w[i] * W[a] / (W[a] - w[i]) * d[a]
            moved = labels.copy()
            moved[i] = b
            assert delta == pytest.approx(ref.objective(K, moved, w) - before, abs=1e-9)


def test_hartigan_sweep_keeps_exact_sums_and_reports_its_gain():
    K, _ = _psd_kernel(n=60, seed=2)
    n, k = K.shape[0], 4
    rng = np.random.default_rng(3)
    w = rng.uniform(0.5, 2.0, n)
    labels = rng.integers(0, k, n).astype(np.int32)
    before = ref.objective(K, labels, w)
    F, g, W = _sums(K, labels, w, k)
    members = np.bincount(labels, minlength=k).astype(np.intp)
    moves, sweeps, gain = _hartigan.hartigan_sweeps(K, np.diag(K).copy(), w, labels, F, g, W,
                                                    members, 1e-12, 100)
    assert moves > 0 and sweeps >= 2
    after = ref.objective(K, labels, w)
    assert after < before
    assert before - after == pytest.approx(gain, rel=1e-9)
    F2, g2, W2 = _sums(K, labels, w, k)
    np.testing.assert_allclose(F, F2, atol=1e-9)
    np.testing.assert_allclose(g, g2, rtol=1e-9)
    np.testing.assert_allclose(W, W2, rtol=1e-12)
    # A Hartigan optimum: no single move lowers the objective.
    for i in range(n):
        for b in range(k):
            if b != labels[i] and np.sum(labels == labels[i]) > 1:
                moved = labels.copy()
                moved[i] = b
                assert ref.objective(K, moved, w) >= after - 1e-9


@pytest.mark.parametrize("seed", range(6))
def test_hartigan_never_raises_the_objective_and_ends_at_a_lloyd_fixed_point(seed):
    X, _ = make_blobs(150, centers=5, cluster_std=2.5, random_state=seed)
    k = 5
    w = np.random.default_rng(seed).uniform(0.5, 2.0, len(X)) if seed % 2 else None
    start = np.random.default_rng(seed + 10).integers(0, k, len(X))
    plain = KernelKMeans(k, kernel="rbf", gamma=0.1, init=start, refine="none").fit(X, sample_weight=w)
    refined = KernelKMeans(k, kernel="rbf", gamma=0.1, init=start, refine="hartigan").fit(X, sample_weight=w)
    assert refined.inertia_ <= plain.inertia_ * (1 + 1e-12)
    stats = refined.fit_stats_
    assert stats["lloyd_objective"] == pytest.approx(plain.inertia_, rel=1e-12)
    assert stats["refined_objective"] == refined.inertia_
    K = ref.kernel_matrix(X, X, "rbf", gamma=0.1)
    weights = np.ones(len(X)) if w is None else w
    assert refined.inertia_ == pytest.approx(ref.objective(K, refined.labels_, weights),
                                             rel=1e-9)
    D = ref.distances(K, refined.labels_, weights, k)
    own = D[np.arange(len(X)), refined.labels_]
    assert np.all(own <= D.min(axis=1) + 1e-9)          # Lloyd fixed point
    np.testing.assert_array_equal(refined.predict(X), refined.labels_)


@pytest.mark.parametrize("seed", [0, 3])
def test_default_fit_reaches_the_true_moons_objective(seed):
    X, y = make_moons(600, noise=0.06, random_state=seed)
    est = KernelKMeans(2, kernel="rbf", gamma=20, random_state=0).fit(X)
    truth = ref.objective(ref.kernel_matrix(X, X, "rbf", gamma=20), y)
    assert est.inertia_ <= truth * (1 + 1e-12)
    assert adjusted_rand_score(y, est.labels_) >= 0.99
    stats = est.fit_stats_
    assert stats["start_kinds"][:2] == ["spectral", "normalized-spectral"]
    assert set(stats["start_kinds"][2:]) == {"k-means++"}
    assert stats["best_start"] in ("spectral", "normalized-spectral")


@pytest.mark.parametrize("name", ["moons", "circles"])
def test_ncut_recovers_moons_and_circles_and_equals_bruteforce(name):
    if name == "moons":
        X, y = make_moons(600, noise=0.06, random_state=0)
    else:
        X, y = make_circles(600, noise=0.05, factor=0.5, random_state=0)
    est = KernelKMeans(2, kernel="rbf", gamma=50, objective="ncut", random_state=0).fit(X)
    assert adjusted_rand_score(y, est.labels_) >= 0.99
    A = ref.kernel_matrix(X, X, "rbf", gamma=50)
    assert est.ncut_ == pytest.approx(_ncut_bruteforce(A, est.labels_), rel=1e-8, abs=1e-12)
    assert est.ncut_ <= _ncut_bruteforce(A, y) * (1 + 1e-9)
    assert "spectral" in est.fit_stats_["start_kinds"]
    np.testing.assert_array_equal(est.predict(X), est.labels_)


def test_ncut_with_weights_equals_repeated_rows_and_bruteforce():
    X, _ = make_blobs(60, centers=3, random_state=4)
    reps = np.random.default_rng(0).integers(1, 4, len(X))
    start = np.random.default_rng(1).integers(0, 3, len(X))
    weighted = KernelKMeans(3, kernel="rbf", gamma=0.2, objective="ncut", init=start).fit(
        X, sample_weight=reps.astype(float))
    repeated = KernelKMeans(3, kernel="rbf", gamma=0.2, objective="ncut", init=np.repeat(start, reps)).fit(
        np.repeat(X, reps, axis=0))
    np.testing.assert_array_equal(np.repeat(weighted.labels_, reps), repeated.labels_)
    assert weighted.ncut_ == pytest.approx(repeated.ncut_, rel=1e-9)
    A = ref.kernel_matrix(X, X, "rbf", gamma=0.2)
    assert weighted.ncut_ == pytest.approx(_ncut_bruteforce(A, weighted.labels_, reps), rel=1e-9)


def test_ncut_needs_positive_degrees():
    X, _ = make_blobs(40, centers=2, random_state=0)
    with pytest.raises(ValueError, match="positive degrees"):
        KernelKMeans(2, kernel="linear", objective="ncut").fit(X - X.mean(axis=0))


def test_spectral_start_on_blobs_equals_kmeanspp():
    X, y = make_blobs(300, centers=4, cluster_std=0.6, random_state=2)
    spec = KernelKMeans(4, kernel="rbf", gamma=0.1, init="spectral", n_init=1, random_state=0).fit(X)
    kpp = KernelKMeans(4, kernel="rbf", gamma=0.1, init="k-means++", n_init=1, random_state=0).fit(X)
    assert spec.fit_stats_["start_kinds"] == ["spectral"]
    assert kpp.fit_stats_["start_kinds"] == ["k-means++"]
    assert adjusted_rand_score(spec.labels_, kpp.labels_) == 1.0
    assert spec.inertia_ == pytest.approx(kpp.inertia_, rel=1e-12)
    assert adjusted_rand_score(y, spec.labels_) == 1.0


def test_spectral_start_uses_landmarks_for_large_n(monkeypatch):
    from kkmeans_cli.engine import spectral

    monkeypatch.setattr(spectral, "SPECTRAL_EXACT_MAX", 100)
    monkeypatch.setattr(spectral, "SPECTRAL_LANDMARKS", 80)
    X, y = make_blobs(300, centers=4, cluster_std=0.6, random_state=2)
    est = KernelKMeans(4, kernel="rbf", gamma=0.1, init="spectral", n_init=1, random_state=0).fit(X)
    assert est.fit_stats_["spectral_method"] == "landmarks(80)"
    assert adjusted_rand_score(y, est.labels_) == 1.0


def test_bad_objective_and_refine_raise():
    X, _ = make_blobs(20, random_state=0)
    with pytest.raises(ValueError, match="objective"):
        KernelKMeans(2, kernel="rbf", objective="cut").fit(X)
    with pytest.raises(ValueError, match="refine"):
        KernelKMeans(2, kernel="rbf", refine="kl").fit(X)


def test_cli_spectral_hartigan_ncut_end_to_end(tmp_path):
    X, y = make_moons(300, noise=0.06, random_state=0)
    data = write_csv(tmp_path / "moons.csv", X)
    model = tmp_path / "m.npz"
    result = run(["fit", "--kernel", "rbf", data, "-k", "2", "--gamma", "50", "--init", "spectral", "--refine",
                  "hartigan", "--objective", "ncut", "-o", model, "--threads", "1",
                  "--n-init", "3", "--summary", tmp_path / "s.json"])
    assert result.exit_code == 0, result.stderr
    labels = labels_of(result.stdout)
    assert adjusted_rand_score(y, labels) >= 0.99
    assert "ncut =" in result.stderr and "starts:" in result.stderr
    summary = json.loads((tmp_path / "s.json").read_text())
    assert summary["objective"] == "ncut" and summary["refine"] == "hartigan"
    assert summary["optima"]["best_start"] in ("spectral", "normalized-spectral")
    A = ref.kernel_matrix(np.round(X, 4), np.round(X, 4), "rbf", gamma=50)
    assert summary["ncut"] == pytest.approx(_ncut_bruteforce(A, labels), rel=1e-6)
    predicted = run(["predict", model, data, "--threads", "1"])
    assert predicted.exit_code == 0, predicted.stderr
    np.testing.assert_array_equal(labels_of(predicted.stdout), labels)
    info = run(["info", model, "--json"])
    assert json.loads(info.stdout)["objective"] == "ncut"
    swept = run(["sweep", "--kernel", "rbf", data, "--k", "2..3", "--gamma", "50", "--objective", "ncut",
                 "--init", "spectral", "--threads", "1", "--n-init", "2", "-o",
                 tmp_path / "best.npz", "--quiet"])
    assert swept.exit_code == 0, swept.stderr
    assert load_model(str(tmp_path / "best.npz")).estimator.objective == "ncut"


def test_ncut_model_without_degrees_is_refused(tmp_path):
    X, _ = make_moons(100, noise=0.06, random_state=0)
    data = write_csv(tmp_path / "d.csv", X)
    model = tmp_path / "m.npz"
    result = run(["fit", "--kernel", "rbf", data, "-k", "2", "--gamma", "50", "--objective", "ncut", "-o", model,
                  "--threads", "1", "--n-init", "2", "--quiet"])
    assert result.exit_code == 0, result.stderr
    arrays = dict(np.load(model, allow_pickle=False))
    del arrays["degrees"]
    broken = tmp_path / "broken.npz"
    np.savez(broken, **arrays)
    with pytest.raises(ModelFileError, match="degrees"):
        load_model(str(broken))
    assert os.path.exists(model)


@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_every_storage_route_gets_the_same_starts(dtype):
    """storage='blocked' has no kernel matrix, but its spectral starts (the normalized one
    too: before, it became k-means++, which also shifted the draws of every later restart)
    read the same kernel values from blocked rows, so each restart starts, and ends, where
    the matrix route's does."""
    X, _ = make_blobs(400, n_features=5, centers=6, cluster_std=2.5, random_state=3)
    fits = [KernelKMeans(6, kernel="rbf", n_init=4, random_state=7, storage=storage, dtype=dtype,
                         refine="none").fit(X) for storage in ("matrix", "blocked")]
    matrix, blocked = (f.fit_stats_ for f in fits)
    assert matrix["start_kinds"] == ["spectral", "normalized-spectral", "k-means++",
                                     "k-means++"]
    assert blocked["start_kinds"] == matrix["start_kinds"]
    assert blocked["storage"] == "blocked" and matrix["storage"] == "matrix"
    np.testing.assert_allclose(blocked["restart_inertias"], matrix["restart_inertias"],
                               rtol=1e-9)
    np.testing.assert_array_equal(fits[0].labels_, fits[1].labels_)


def test_spectral_starts_equal_on_matrix_blocked_and_lazy_sources():
    """The start code itself, source by source: both spectral kinds give the same labels
    from the matrix, from blocked rows and from a lazy source that has not built K."""
    from kkmeans_cli.engine.spectral import SpectralStarts
    from kkmeans_cli.kernels.functions import Kernel
    from kkmeans_cli.kernels.sources import BlockedKernel, InMemoryKernel, LazyKernel

    X, _ = make_moons(300, noise=0.06, random_state=0)
    w = np.random.default_rng(0).uniform(0.5, 2.0, len(X))
    kernel = Kernel("rbf", 2.0)
    blocked = BlockedKernel(kernel, X)
    sources = {"matrix": InMemoryKernel(kernel.matrix(X), diag=kernel.diag(X)),
               "blocked": blocked,
               "lazy": LazyKernel(BlockedKernel(kernel, X), None, np.inf)}
    for kind in ("spectral", "normalized-spectral"):
        found = {name: SpectralStarts().labels(src, w, 2, np.random.default_rng(5), kind)
                 for name, src in sources.items()}
        assert found["matrix"] is not None
        for name in ("blocked", "lazy"):
            np.testing.assert_array_equal(found[name], found["matrix"], err_msg=(kind, name))
    assert sources["lazy"].matrix is None
