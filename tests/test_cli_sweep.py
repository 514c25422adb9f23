"""``kkmeans sweep`` and ``kkmeans fit --silhouette / --plot`` end to end."""
import csv
import io
import json
import os
import sys

import h5py
import numpy as np
import pytest

from helpers import FAST, labels_of, run, run_process, run_shell, write_csv

HEADER = "k,inertia,silhouette,simplified_silhouette,calinski_harabasz,davies_bouldin,n_iter,seconds"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
CENTRES = np.array([[-8.0, -8.0], [-8.0, 8.0], [8.0, -8.0], [8.0, 8.0]])


def four_blobs(n=120, seed=1):
    rng = np.random.default_rng(seed)
    y = np.arange(n) % 4
    return np.round(CENTRES[y] + rng.normal(scale=1.0, size=(n, 2)), 4), y


@pytest.fixture
def data(tmp_path):
    X, y = four_blobs()
    return X, y, write_csv(tmp_path / "data.csv", X)


def parse_table(text):
    assert text.splitlines()[0] == HEADER
    rows = list(csv.DictReader(io.StringIO(text)))
    return [{key: float(value) for key, value in row.items()} for row in rows]


def _is_png(path):
    with open(path, "rb") as f:
        return f.read(8) == PNG_SIGNATURE


# -- sweep -----------------------------------------------------------------------------------
def test_sweep_picks_four_and_prints_csv(data):
    _, _, path = data
    result = run(["sweep", "--kernel", "rbf", path, "--k", "2..7", *FAST])
    assert result.exit_code == 0, result.stderr
    rows = parse_table(result.stdout)
    assert [int(r["k"]) for r in rows] == [2, 3, 4, 5, 6, 7]
    best = max(rows, key=lambda r: r["silhouette"])
    assert int(best["k"]) == 4
    assert "chosen k:   4 by silhouette" in result.stderr
    assert "kernel matrix" in result.stderr and "(once)" in result.stderr
    assert "* " in result.stderr  # the chosen row is marked


def test_a_nystroem_sweep_reports_its_features_not_a_kernel_matrix(data):
    _, _, path = data
    result = run(["sweep", path, "--kernel", "rbf", "--k", "2..3", *FAST, "--approx", "nystroem"])
    assert result.exit_code == 0, result.stderr
    time_line = next(line for line in result.stderr.splitlines() if line.startswith("time:"))
    assert "Nyström features" in time_line and "(once)" in time_line
    assert "kernel matrix" not in result.stderr


def test_sweep_as_subprocess_with_list_of_ks(tmp_path, data):
    _, _, path = data
    result = run_process(["sweep", "--kernel", "rbf", path, "--k", "2,3,4,6", *FAST], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    rows = parse_table(result.stdout)
    assert [int(r["k"]) for r in rows] == [2, 3, 4, 6]
    assert "chosen k:   4" in result.stderr
    assert os.listdir(tmp_path) == ["data.csv"]  # no model unless -o


def test_a_config_gives_the_ks_as_a_yaml_list_or_one_number(tmp_path, data):
    """``k: [2, 3, 4, 6]`` in a config is ``--k 2,3,4,6``, ``k: 4`` is ``--k 4``; a list of
    anything but whole numbers is a config error (exit 2, one line naming the key, nothing
    written)."""
    _, _, path = data
    flags = run(["sweep", "--kernel", "rbf", path, "--k", "2,3,4,6", *FAST])
    assert flags.exit_code == 0, flags.stderr
    config = tmp_path / "run.yaml"
    config.write_text("k: [2, 3, 4, 6]\nkernel: rbf\n")
    listed = run(["sweep", path, "--config", config, *FAST])
    assert listed.exit_code == 0, listed.stderr
    drop = [{k: v for k, v in r.items() if k != "seconds"} for r in parse_table(flags.stdout)]
    assert [{k: v for k, v in r.items() if k != "seconds"}
            for r in parse_table(listed.stdout)] == drop
    config.write_text("k: 4\nkernel: rbf\n")
    one = run(["sweep", path, "--config", config, *FAST])
    assert one.exit_code == 0, one.stderr
    assert [int(r["k"]) for r in parse_table(one.stdout)] == [4]
    config.write_text("k: [2..4, '6']\nkernel: rbf\n")      # texts in the list are --k's too
    mixed = run(["sweep", path, "--config", config, *FAST])
    assert mixed.exit_code == 0, mixed.stderr
    assert [int(r["k"]) for r in parse_table(mixed.stdout)] == [2, 3, 4, 6]
    for text, got in [("k: []", "got an empty list"), ("k: [2, true]", "got 'True' (bool)"),
                      ("k: [2, 3.5]", "got '3.5' (float)"), ("k: [2, [3]]", "got '[3]' (list)")]:
        config.write_text(text + "\n")
        bad = run_process(["sweep", path, "--config", config, "-o", tmp_path / "m.npz"],
                          cwd=tmp_path)
        assert bad.returncode == 2, bad.stderr
        assert bad.stderr.strip().splitlines() == [
            f"kkmeans: error: config {config}: key 'k': must be a text such as 2..10 or 2,3,5, "
            f"a whole number, or a list of them; {got}"]
        assert sorted(os.listdir(tmp_path)) == ["data.csv", "run.yaml"]
    # every value is checked, also one that --k overrides, as --k itself would be read
    for text, why in [("k: [2, three]", "invalid k 'three': use e.g. 2..10 or 2,3,5"),
                      ("k: abc", "invalid k 'abc'"), ("k: 0", "every k must be at least 2"),
                      ("k: '2..1'", "invalid k range '2..1': the end is below the start"),
                      ("k: [-2, 3]", "invalid k '-2'"), ("k: 2 3", "invalid k '2 3'")]:
        config.write_text(text + "\n")
        bad = run_process(["sweep", path, "--config", config, "--k", "3", "-o",
                           tmp_path / "m.npz"], cwd=tmp_path)
        assert bad.returncode == 2, bad.stderr
        [line] = bad.stderr.strip().splitlines()
        assert line.startswith(f"kkmeans: error: config {config}: key 'k': ") and why in line
        assert sorted(os.listdir(tmp_path)) == ["data.csv", "run.yaml"]


def test_sweep_table_file_equals_stdout(tmp_path, data):
    _, _, path = data
    on_stdout = run(["sweep", "--kernel", "rbf", path, "--k", "2..5", *FAST, "--quiet"])
    assert on_stdout.exit_code == 0 and on_stdout.stderr == ""
    table = tmp_path / "sweep.csv"
    to_file = run(["sweep", "--kernel", "rbf", path, "--k", "2..5", *FAST, "--table", table])
    assert to_file.exit_code == 0, to_file.stderr
    assert to_file.stdout == ""
    written = parse_table(table.read_text())
    shown = parse_table(on_stdout.stdout)
    strip = [{k: v for k, v in r.items() if k != "seconds"} for r in written]
    assert strip == [{k: v for k, v in r.items() if k != "seconds"} for r in shown]


def test_sweep_model_predicts_like_direct_fit(tmp_path, data):
    _, _, path = data
    best = tmp_path / "best.npz"
    swept = run(["sweep", "--kernel", "rbf", path, "--k", "2..6", *FAST, "--scale", "standard", "-o", best])
    assert swept.exit_code == 0, swept.stderr
    info = json.loads(run(["info", best, "--json"]).stdout)
    assert info["n_clusters"] == 4 and info["sweep"]["best_k"] == 4
    direct = tmp_path / "direct.npz"
    fitted = run(["fit", "--kernel", "rbf", path, "-k", "4", *FAST, "--scale", "standard", "-o", direct])
    assert fitted.exit_code == 0, fitted.stderr
    a = run(["predict", best, path, "--quiet"])
    b = run(["predict", direct, path, "--quiet"])
    assert a.exit_code == b.exit_code == 0
    assert np.array_equal(labels_of(a.stdout), labels_of(b.stdout))
    assert np.array_equal(labels_of(b.stdout), labels_of(fitted.stdout))


def test_sweep_plot_and_davies_bouldin(tmp_path, data):
    _, _, path = data
    plot = tmp_path / "sweep.png"
    result = run(["sweep", "--kernel", "rbf", path, "--k", "2..6", *FAST, "--metric", "davies-bouldin",
                  "--plot", plot])
    assert result.exit_code == 0, result.stderr
    assert _is_png(plot)
    rows = parse_table(result.stdout)
    assert int(min(rows, key=lambda r: r["davies_bouldin"])["k"]) == 4
    assert "chosen k:   4 by davies-bouldin" in result.stderr


def test_sweep_config_keys(tmp_path, data):
    _, _, path = data
    config = tmp_path / "sweep.yaml"
    config.write_text("k: 2..5\nmetric: calinski-harabasz\nn_init: 3\nthreads: 1\n"
                      f"table: {tmp_path / 't.csv'}\n")
    result = run(["sweep", "--kernel", "rbf", path, "--config", config])
    assert result.exit_code == 0, result.stderr
    assert "by calinski-harabasz" in result.stderr
    assert parse_table((tmp_path / "t.csv").read_text())


def test_shell_sweep_hdf5_to_csv_and_model(tmp_path, data):
    X, _, _ = data
    with h5py.File(tmp_path / "data.h5", "w") as f:
        f["features"] = X
    result = run_shell("kkmeans sweep data.h5:/features --kernel rbf --k 2..6 --threads 1 --n-init 3 "
                       "-o best.npz > sweep.csv", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    rows = parse_table((tmp_path / "sweep.csv").read_text())
    assert [int(r["k"]) for r in rows] == [2, 3, 4, 5, 6]
    predicted = run_shell("kkmeans predict best.npz data.h5:/features --quiet | sort -u | wc -l",
                          cwd=tmp_path)
    assert predicted.stdout.strip() == "4"


@pytest.mark.parametrize("ks, code", [("2..1", 2), ("a..b", 2), ("0..3", 2), ("1..4", 2),
                                      ("2,x", 2), ("", 2), ("2..500", 1), ("2..120", 1)])
def test_bad_k_values(tmp_path, data, ks, code):
    _, _, path = data
    out = tmp_path / "out"
    out.mkdir()
    result = run_process(["sweep", "--kernel", "rbf", path, "--k", ks, *FAST, "-o", "best.npz", "--table",
                          "t.csv", "--plot", "p.png"], cwd=out)
    assert result.returncode == code, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("kkmeans: error: ")
    if ks in ("0..3", "1..4"):
        assert lines[0] == f"kkmeans: error: --k {ks}: every k must be at least 2"
    assert "Traceback" not in result.stderr
    assert result.stdout == ""
    assert os.listdir(out) == []


def test_sweep_missing_k_is_usage_error(data):
    _, _, path = data
    result = run(["sweep", "--kernel", "rbf", path, *FAST])
    assert result.exit_code == 2
    assert "--k" in result.stderr


def test_sweep_help_mentions_model_default():
    text = run(["sweep", "--help"]).stdout
    for word in ("--k", "--metric", "--table", "--plot", "No model is saved unless -o",
                 "Examples:"):
        assert word in " ".join(text.split())
    assert "kkmeans sweep" in run(["--help"]).stdout


# -- fit --silhouette / --plot ---------------------------------------------------------------
@pytest.mark.parametrize("k", [2, 4, 5])
def test_fit_silhouette_equals_sklearn(tmp_path, data, k):
    from sklearn.metrics import silhouette_score
    from sklearn.metrics.pairwise import rbf_kernel

    X, _, path = data
    model = tmp_path / "m.npz"
    labels = tmp_path / "labels.txt"
    result = run(["fit", "--kernel", "rbf", path, "-k", k, *FAST, "--silhouette", "--json", "-o", model,
                  "--labels", labels])
    assert result.exit_code == 0, result.stderr
    summary = json.loads(result.stdout)
    gamma = json.loads(run(["info", model, "--json"]).stdout)["gamma"]
    K = rbf_kernel(X, gamma=gamma)
    d = np.diag(K)
    D = np.sqrt(np.maximum(d[:, None] + d[None, :] - 2 * K, 0))
    np.fill_diagonal(D, 0)
    expected = silhouette_score(D, labels_of(labels.read_text()), metric="precomputed")
    assert abs(summary["silhouette"] - expected) <= 1e-9
    assert summary["silhouette_n_used"] == X.shape[0] and summary["silhouette_exact"]
    info = json.loads(run(["info", model, "--json"]).stdout)
    assert abs(info["silhouette"] - expected) <= 1e-9


def test_fit_silhouette_builds_the_kernel_matrix_once(data, monkeypatch):
    from kkmeans_cli.kernels.functions import Kernel

    _, _, path = data
    calls = []
    original = Kernel.matrix
    monkeypatch.setattr(Kernel, "matrix",
                        lambda self, *a, **kw: calls.append(1) or original(self, *a, **kw))
    monkeypatch.setattr(Kernel, "cross_blocks",
                        lambda *a, **kw: pytest.fail("kernel rows recomputed for the silhouette"))
    result = run(["fit", "--kernel", "rbf", path, "-k", "3", *FAST, "--silhouette", "--no-model"])
    assert result.exit_code == 0, result.stderr
    assert len(calls) == 1


def test_fit_silhouette_reported_on_stderr(tmp_path, data):
    _, _, path = data
    result = run_process(["fit", "--kernel", "rbf", path, "-k", "4", *FAST, "--silhouette", "--no-model"],
                         cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "silhouette:" in result.stderr and "(exact)" in result.stderr
    assert len(labels_of(result.stdout)) == 120


def test_fit_plot_writes_png(tmp_path):
    rng = np.random.default_rng(0)
    X = np.hstack([four_blobs()[0], rng.normal(size=(120, 2))])  # d > 2: principal axes
    path = write_csv(tmp_path / "d4.csv", X)
    plot = tmp_path / "clusters.png"
    result = run(["fit", "--kernel", "rbf", path, "-k", "4", *FAST, "--no-model", "--plot", plot])
    assert result.exit_code == 0, result.stderr
    assert _is_png(plot)


def test_fit_plot_precomputed_is_usage_error(tmp_path, data):
    X, _, _ = data
    from sklearn.metrics.pairwise import rbf_kernel

    path = tmp_path / "K.npy"
    np.save(path, rbf_kernel(X, gamma=0.05))
    result = run(["fit", path, "-k", "4", *FAST, "--kernel", "precomputed", "--no-model",
                  "--plot", tmp_path / "p.png"])
    assert result.exit_code == 2
    assert "--plot" in result.stderr and "precomputed" in result.stderr
    assert not (tmp_path / "p.png").exists()


@pytest.mark.parametrize("command", ["fit", "sweep"])
def test_missing_matplotlib_gives_install_hint(tmp_path, data, monkeypatch, command):
    _, _, path = data
    for name in ("matplotlib", "matplotlib.figure", "matplotlib.backends",
                 "matplotlib.backends.backend_agg"):
        monkeypatch.setitem(sys.modules, name, None)  # import fails
    args = (["fit", "--kernel", "rbf", path, "-k", "4", "-o", tmp_path / "m.npz"] if command == "fit"
            else ["sweep", "--kernel", "rbf", path, "--k", "2..5", "-o", tmp_path / "m.npz"])
    result = run([*args, *FAST, "--plot", tmp_path / "p.png"])
    assert result.exit_code == 2
    assert "pip install 'kkmeans-cli[plot]'" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert result.stdout == ""
    assert not (tmp_path / "m.npz").exists() and not (tmp_path / "p.png").exists()
