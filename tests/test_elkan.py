"""Elkan's iterations (``elkan.py``): exactly Lloyd's result from the same start, fewer sums.

Every run here uses ``check_bounds=True``: each iteration recomputes every distance from scratch
and fails with ``AssertionError`` if an upper or lower bound is violated.
"""
import warnings

import numpy as np
import pytest

from helpers import FAST, blobs, gaussian, labels_of, mixture, run, run_process, write_csv
from kkmeans_cli import KernelKMeans
from kkmeans_cli.engine import elkan as elkan_module
from kkmeans_cli import memory as memory_module
from kkmeans_cli.engine.elkan import elkan
from kkmeans_cli.engine.starts import kmeans_plusplus
from kkmeans_cli.kernels.sources import BlockedKernel, InMemoryKernel
from kkmeans_cli.kernels.functions import Kernel, KKMeansWarning, resolve_gamma
from kkmeans_cli.engine.lloyd import lloyd
from kkmeans_cli.engine.feature_source import FeatureSpaceSource
from kkmeans_cli.engine.iterate import scheme
from kkmeans_cli.engine.records import FitSpec

KERNEL_NAMES = ("rbf", "linear", "poly", "laplacian", "chi2", "cosine")
KS = (2, 7, 30, 100)
DS = (2, 10, 50)


# -- data and sources ------------------------------------------------------------------------
def _data(kind, n, d, seed, positive=False):
    """Gaussian blobs (12 centres) or plain Gaussian noise; |X| for chi2."""
    X = mixture(n, d, 12, seed) if kind == "blobs" else gaussian(n, d, seed)
    return np.abs(X) if positive else X


def _kernel(name, X):
    gamma = resolve_gamma(name, "median", X, np.random.default_rng(0))
    return Kernel(name, gamma, degree=3, coef0=1.0)


def _weights(n, weighted, seed=3):
    return np.random.default_rng(seed).uniform(0.2, 3.0, n) if weighted else np.ones(n)


def _source(mode, kern, X):
    if mode == "memory64":
        return InMemoryKernel(kern.matrix(X), diag=kern.diag(X))
    if mode == "memory32":
        return InMemoryKernel(kern.matrix(X, dtype=np.float32), diag=kern.diag(X))
    if mode == "blocked":
        return BlockedKernel(kern, X)
    raise ValueError(mode)


def _random_features(X, m=40, seed=11):
    """Random Fourier features of an rbf kernel: an explicit feature space of dimension m."""
    rng = np.random.default_rng(seed)
    gamma = resolve_gamma("rbf", "median", X, rng)
    Wr = rng.normal(scale=np.sqrt(2 * gamma), size=(X.shape[1], m))
    b = rng.uniform(0, 2 * np.pi, m)
    return np.sqrt(2.0 / m) * np.cos(X @ Wr + b)


def _start(source, weights, k, seed=5):
    labels, _ = kmeans_plusplus(source, weights, k, np.random.default_rng(seed))
    return labels


def _both(source, weights, start, k, **kw):
    """Lloyd and Elkan (bounds checked) from the same start, warnings recorded apart."""
    with warnings.catch_warnings(record=True) as w_lloyd:
        warnings.simplefilter("always")
        a = lloyd(source, weights, start, k, **kw)
    with warnings.catch_warnings(record=True) as w_elkan:
        warnings.simplefilter("always")
        b = elkan(source, weights, start, k, check_bounds=True, **kw)
    return a, b, w_lloyd, w_elkan


def _assert_same(a, b):
    np.testing.assert_array_equal(b.labels, a.labels)
    assert b.inertia == pytest.approx(a.inertia, rel=1e-9)
    assert b.n_iter == a.n_iter
    assert b.converged == a.converged
    assert b.n_relocated == a.n_relocated


def _case(kernel_name, k, d, weighted, kind, mode, n=300):
    X = _data(kind, n, d, seed=7 * k + d + (1 if weighted else 0),
              positive=(kernel_name == "chi2"))
    kern = _kernel(kernel_name, X)
    source = _source(mode, kern, X)
    w = _weights(n, weighted)
    start = _start(source, w, k)
    a, b, _, _ = _both(source, w, start, k)
    _assert_same(a, b)
    return a, b


# -- 1. Elkan = Lloyd from the same start ----------------------------------------------------
# Every kernel × every k in memory (float64); d, weighting and data kind rotate over the grid.
@pytest.mark.parametrize("k", KS)
@pytest.mark.parametrize("kernel_name", KERNEL_NAMES)
def test_equals_lloyd_in_memory_float64(kernel_name, k):
    i = KERNEL_NAMES.index(kernel_name) + KS.index(k)
    _case(kernel_name, k, DS[i % 3], weighted=bool(i % 2), kind=("blobs", "noise")[i // 2 % 2],
          mode="memory64")


# Every kernel × every d in memory and blocked, both weightings; k rotates.
@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("d", DS)
@pytest.mark.parametrize("kernel_name", KERNEL_NAMES)
@pytest.mark.parametrize("kind", ["blobs", "noise"])
def test_equals_lloyd_in_memory_float64_data(kernel_name, d, weighted, kind):
    k = KS[(KERNEL_NAMES.index(kernel_name) + DS.index(d)) % 4]
    _case(kernel_name, k, d, weighted, kind, mode="memory64", n=200)


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("d", DS)
@pytest.mark.parametrize("kernel_name", KERNEL_NAMES)
def test_equals_lloyd_blocked(kernel_name, d, weighted, monkeypatch):
    monkeypatch.setattr(memory_module, "BLOCK_BYTES", 8 * 300 * 37)  # 37-row blocks
    i = KERNEL_NAMES.index(kernel_name) + DS.index(d) + int(weighted)
    _case(kernel_name, KS[i % 4], d, weighted, ("blobs", "noise")[i % 2], mode="blocked")


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("d", DS)
@pytest.mark.parametrize("kernel_name", KERNEL_NAMES)
def test_equals_lloyd_in_memory_float32(kernel_name, d, weighted):
    i = KERNEL_NAMES.index(kernel_name) + DS.index(d) + int(weighted)
    _case(kernel_name, KS[1 + i % 3], d, weighted, ("blobs", "noise")[i % 2], mode="memory32")


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("d", DS)
@pytest.mark.parametrize("k", KS)
@pytest.mark.parametrize("features", ["X", "fourier"])
def test_equals_lloyd_feature_space(features, k, d, weighted):
    n = 300
    kind = ("blobs", "noise")[(KS.index(k) + DS.index(d)) % 2]
    X = _data(kind, n, d, seed=3 * k + d)
    Phi = X if features == "X" else _random_features(X)
    source = FeatureSpaceSource(Phi)
    w = _weights(n, weighted)
    start = _start(source, w, k)
    a, b, _, _ = _both(source, w, start, k)
    _assert_same(a, b)


# -- 2. the bound check is live ----------------------------------------------------------------
@pytest.mark.parametrize("mode", ["memory64", "blocked"])
def test_check_bounds_catches_ignored_centre_shifts(mode, monkeypatch):
    X = _data("blobs", 300, 2, seed=1)
    kern = _kernel("rbf", X)
    source = _source(mode, kern, X)
    w = np.ones(300)
    start = np.random.default_rng(0).integers(0, 8, 300).astype(np.int32)  # centres move a lot
    # Untouched, the bounds hold on this data.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", KKMeansWarning)
        good = elkan(source, w, start, 8, check_bounds=True)
    assert good.n_iter > 2
    monkeypatch.setattr(elkan_module, "_centre_shifts",
                        lambda g, W, g_old, W_old, old_new, err2: np.zeros_like(g))
    with pytest.raises(AssertionError, match="bound violated"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", KKMeansWarning)
            elkan(source, w, start, 8, check_bounds=True)


# -- 3. empty clusters ---------------------------------------------------------------------------
def _empty_starts(n, k):
    rng = np.random.default_rng(4)
    return {"unused_cluster": rng.integers(0, k - 1, n).astype(np.int32),
            "one_cluster": np.zeros(n, dtype=np.int32)}


@pytest.mark.parametrize("start_kind", ["unused_cluster", "one_cluster"])
@pytest.mark.parametrize("mode", ["memory64", "blocked", "features"])
@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
def test_empty_cluster_relocation_equals_lloyd(mode, start_kind, weighted):
    n, k = 300, 5
    X = _data("blobs", n, 3, seed=2)
    source = FeatureSpaceSource(X) if mode == "features" else _source(mode, _kernel("rbf", X), X)
    w = _weights(n, weighted)
    start = _empty_starts(n, k)[start_kind]
    assert np.bincount(start, minlength=k).min() == 0
    a, b, w_lloyd, w_elkan = _both(source, w, start, k)
    _assert_same(a, b)
    assert a.n_relocated > 0 and b.n_relocated == a.n_relocated
    assert b.converged
    for record in (w_lloyd, w_elkan):
        assert any(issubclass(r.category, KKMeansWarning) and "empty cluster" in str(r.message)
                   for r in record)


@pytest.mark.parametrize("mode", ["memory64", "blocked", "features"])
@pytest.mark.parametrize("kernel_name", ["linear", "rbf"])
def test_many_relocations_from_random_labels_equal_lloyd(kernel_name, mode):
    """Random labels with many clusters: clusters empty out in the first iterations and are
    refilled (28 relocations here), after which the iterations go on with Elkan's bounds."""
    n, k = 600, 100
    rng = np.random.default_rng(1)
    X = rng.normal(size=(n, 2))
    start = rng.integers(0, k, n).astype(np.int32)
    source = FeatureSpaceSource(X) if mode == "features" else \
        _source(mode, _kernel(kernel_name, X), X)
    a, b, _, _ = _both(source, np.ones(n), start, k)
    assert a.n_relocated > 0
    _assert_same(a, b)


# -- 4. max_iter reached --------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["memory64", "blocked", "features"])
def test_max_iter_reached_equals_lloyd(mode):
    n, k = 400, 10
    X = _data("blobs", n, 2, seed=6)
    source = FeatureSpaceSource(X) if mode == "features" else _source(mode, _kernel("rbf", X), X)
    w = _weights(n, True)
    start = np.random.default_rng(1).integers(0, k, n).astype(np.int32)  # a bad start
    a, b, w_lloyd, w_elkan = _both(source, w, start, k, max_iter=2)
    _assert_same(a, b)
    assert a.n_iter == b.n_iter == 2
    assert not a.converged and not b.converged
    for record, who in ((w_lloyd, "Lloyd"), (w_elkan, "Elkan")):
        assert any(issubclass(r.category, KKMeansWarning)
                   and f"{who} did not converge" in str(r.message)
                   and "max_iter=2" in str(r.message) for r in record)


# -- 5. fewer distances and fewer kernel values ---------------------------------------------------
def test_fewer_distances_than_lloyd():
    n, k = 1000, 30
    X = _data("blobs", n, 5, seed=8)
    source = _source("memory64", _kernel("rbf", X), X)
    w = np.ones(n)
    a, b, _, _ = _both(source, w, _start(source, w, k), k)
    _assert_same(a, b)
    assert a.n_distances > 0 and b.n_distances > 0
    assert b.n_distances < 0.5 * a.n_distances


def test_blocked_kernel_fewer_kernel_values():
    n, d, k = 1500, 2, 50
    X = _data("blobs", n, d, seed=9)
    kern = _kernel("rbf", X)
    w = np.ones(n)
    start = _start(BlockedKernel(kern, X), w, k)
    src_lloyd, src_elkan = BlockedKernel(kern, X), BlockedKernel(kern, X)
    a = lloyd(src_lloyd, w, start, k)
    b = elkan(src_elkan, w, start, k, check_bounds=True)
    _assert_same(a, b)
    assert a.n_iter > 3
    assert b.n_distances < 0.5 * a.n_distances
    assert src_lloyd.kernel_evaluations >= n * n
    assert 0 < src_elkan.kernel_evaluations < 0.5 * src_lloyd.kernel_evaluations


# -- 6. the estimator ------------------------------------------------------------------------------
def _fit(X, k, seed, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", KKMeansWarning)
        return KernelKMeans(k, random_state=seed, n_init=3, n_threads=1, **{"kernel": "rbf", **kw}).fit(X)


def _assert_same_fit(a, b):
    np.testing.assert_array_equal(b.labels_, a.labels_)
    assert b.inertia_ == pytest.approx(a.inertia_, rel=1e-9)
    assert b.n_iter_ == a.n_iter_


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("kernel_name", ["rbf", "laplacian", "linear"])
def test_estimator_elkan_equals_lloyd(kernel_name, seed):
    X = _data("blobs", 300, 3, seed=seed)
    a = _fit(X, 6, seed, kernel=kernel_name, algorithm="lloyd")
    b = _fit(X, 6, seed, kernel=kernel_name, algorithm="elkan")
    _assert_same_fit(a, b)


def test_estimator_blocked_elkan_equals_blocked_lloyd_and_predicts_its_labels():
    X = _data("blobs", 400, 2, seed=3)
    a = _fit(X, 8, 2, storage="blocked", algorithm="lloyd")
    b = _fit(X, 8, 2, storage="blocked", algorithm="elkan")
    auto = _fit(X, 8, 2, storage="blocked")
    _assert_same_fit(a, b)
    _assert_same_fit(a, auto)
    np.testing.assert_array_equal(b.predict(X), b.labels_)


def test_estimator_nystroem_elkan_equals_lloyd():
    X = _data("blobs", 400, 4, seed=4)
    a = _fit(X, 7, 3, approx="nystroem", n_landmarks=60, algorithm="lloyd")
    b = _fit(X, 7, 3, approx="nystroem", n_landmarks=60, algorithm="elkan")
    _assert_same_fit(a, b)


def test_scheme_auto_chooses_by_source():
    X = _data("blobs", 50, 2, seed=0)
    kern = Kernel("rbf", 0.5)
    spec = FitSpec(n_clusters=3, algorithm="auto")
    assert scheme(InMemoryKernel(kern.matrix(X), diag=kern.diag(X)), spec) == "lloyd"
    assert scheme(BlockedKernel(kern, X), spec) == "elkan"
    assert scheme(FeatureSpaceSource(X), spec) == "elkan"
    for algorithm in ("lloyd", "elkan"):
        spec = FitSpec(n_clusters=3, algorithm=algorithm)
        for source in (InMemoryKernel(kern.matrix(X)), BlockedKernel(kern, X),
                       FeatureSpaceSource(X)):
            assert scheme(source, spec) == algorithm


@pytest.mark.parametrize("storage, approx, want", [("matrix", "none", "lloyd"),
                                                    ("blocked", "none", "elkan"),
                                                    ("matrix", "nystroem", "features")])
def test_auto_runs_the_scheme_it_should(storage, approx, want, monkeypatch):
    """A kernel matrix runs Lloyd, a blocked kernel Elkan, Nyström features the explicit-feature
    engine (engine/features.py: Lloyd with Hamerly's bounds), never the kernel-source schemes."""
    from kkmeans_cli.engine import features as features_module
    from kkmeans_cli.engine import iterate as iterate_module

    calls = []

    def counting(name, function):
        def run_and_count(*args, **kwargs):
            calls.append(name)
            return function(*args, **kwargs)
        return run_and_count

    monkeypatch.setattr(iterate_module, "elkan", counting("elkan", elkan))
    monkeypatch.setattr(iterate_module, "lloyd", counting("lloyd", lloyd))
    monkeypatch.setattr(features_module, "lloyd", counting("features", features_module.lloyd))
    X = _data("blobs", 200, 2, seed=5)
    # Random starts (no spectral start, whose inner k-means runs Elkan), no refinement.
    _fit(X, 4, 0, storage=storage, approx=approx, refine="none", init="random")
    if want == "features":  # one run per restart, and the winner's completion on all data
        assert set(calls) == {"features"} and len(calls) >= 3
    else:
        assert calls == [want] * 3


def test_elkan_refuses_a_kernel_that_is_not_psd():
    X = _data("blobs", 200, 3, seed=0)
    for storage in ("matrix", "blocked"):
        est = KernelKMeans(4, kernel="sigmoid", gamma=0.5, coef0=1.0, algorithm="elkan",
                           storage=storage, n_init=1, random_state=0, n_threads=1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", KKMeansWarning)
            with pytest.raises(ValueError, match="positive semidefinite"):
                est.fit(X)
    # 'auto' falls back to Lloyd there instead of failing.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", KKMeansWarning)
        KernelKMeans(4, kernel="sigmoid", gamma=0.5, storage="blocked", n_init=1,
                     random_state=0, n_threads=1).fit(X)


def test_bad_storage_is_refused():
    X = _data("blobs", 30, 2, seed=0)
    with pytest.raises(ValueError, match="storage"):
        KernelKMeans(2, kernel="rbf", storage="disk").fit(X)
    K = X @ X.T
    with pytest.raises(ValueError, match="precomputed"):
        KernelKMeans(2, kernel="precomputed", storage="blocked").fit(K)


# -- 7. the command line ---------------------------------------------------------------------------
@pytest.fixture
def csv_data(tmp_path):
    X, y = blobs(n=120, d=2, k=4, seed=3)
    return write_csv(tmp_path / "data.csv", X)


def test_cli_elkan_and_blocked_print_lloyd_labels(csv_data, tmp_path):
    common = ["fit", "--kernel", "rbf", csv_data, "-k", "4", "--no-model", "--quiet", *FAST]
    outputs = {}
    for extra in (["--algorithm", "lloyd"], ["--algorithm", "elkan"],
                  ["--storage", "blocked"], ["--storage", "blocked", "--algorithm", "elkan"],
                  ["--storage", "blocked", "--algorithm", "lloyd"]):
        result = run(common + extra)
        assert result.exit_code == 0, result.stderr
        outputs[" ".join(extra)] = labels_of(result.stdout)
    reference = outputs["--algorithm lloyd"]
    assert reference.shape == (120,)
    assert set(reference.tolist()) == set(range(4))
    for extra, labels in outputs.items():
        np.testing.assert_array_equal(labels, reference, err_msg=extra)
    process = run_process(common + ["--storage", "blocked", "--algorithm", "elkan"], tmp_path)
    assert process.returncode == 0, process.stderr
    np.testing.assert_array_equal(labels_of(process.stdout), reference)


def test_cli_rejects_unknown_algorithm(csv_data):
    result = run(["fit", "--kernel", "rbf", csv_data, "-k", "3", "--algorithm", "fast", "--no-model"])
    assert result.exit_code == 2
    for word in ("--algorithm", "fast", "auto", "lloyd", "elkan"):
        assert word in result.stderr


@pytest.mark.parametrize("args,message", [
    (["fit", "--kernel", "rbf", "-k", "3", "--storage", "blocked", "--psd-repair", "lingoes"],
     "--storage blocked runs exact kernel k-means"),
    (["fit", "--kernel", "rbf", "-k", "3", "--storage", "blocked", "--objective", "ncut"],
     "--storage blocked runs exact kernel k-means"),
    (["sweep", "--kernel", "rbf", "--k", "2..4", "--storage", "blocked"], "--storage blocked has none"),
])
def test_cli_blocked_storage_conflicts_are_usage_errors(csv_data, tmp_path, args, message):
    model = tmp_path / "m.npz"
    result = run([args[0], csv_data, *args[1:], "-o", model])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kkmeans: error: ") and message in lines[0]
    assert result.stdout == "" and not model.exists()


def test_cli_blocked_fit_silhouette_without_a_kernel_matrix(csv_data, tmp_path, monkeypatch):
    import json

    from sklearn.metrics import silhouette_score

    monkeypatch.setattr(Kernel, "matrix",
                        lambda *a, **kw: pytest.fail("the kernel matrix was allocated"))
    labels_path = tmp_path / "labels.txt"
    result = run(["fit", "--kernel", "rbf", csv_data, "-k", "4", "--storage", "blocked", "--silhouette",
                  "--no-model", "--json", "--labels", labels_path, *FAST])
    assert result.exit_code == 0, result.stderr
    report = json.loads(result.stdout)
    report["labels"] = np.loadtxt(labels_path, dtype=int)
    X = np.loadtxt(csv_data, delimiter=",", skiprows=1)
    est_kernel = Kernel("rbf", gamma=report["gamma"])
    K = est_kernel.cross(X, X)
    d2 = np.maximum(np.diag(K)[:, None] + np.diag(K)[None, :] - 2 * K, 0.0)
    np.fill_diagonal(d2, 0.0)
    expected = silhouette_score(np.sqrt(d2), report["labels"], metric="precomputed")
    assert report["silhouette"] == pytest.approx(expected, rel=1e-9)
