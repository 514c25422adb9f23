"""The ``kkmeans`` command line end to end: in-process (CliRunner) and as real subprocesses."""
import json
import os
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

from helpers import (FAST, ROOT, blobs, kkmeans_command, labels_of, run, run_process,
                         run_shell, write_csv)
from kkmeans_cli import KernelKMeans, __version__
from kkmeans_cli.cli import options as cli_module
from kkmeans_cli.kernels.functions import KERNELS


def _same_partition(a, b):
    """True when two labelings are the same partition up to renaming the labels."""
    a, b = np.asarray(a), np.asarray(b)
    pairs = set(zip(a.tolist(), b.tolist()))
    return len(pairs) == len(set(a.tolist())) == len(set(b.tolist()))


@pytest.fixture
def data(tmp_path):
    X, y = blobs(n=60, d=2, k=3)
    return X, y, write_csv(tmp_path / "data.csv", X)


# -- help, version, lazy imports -----------------------------------------------------------
def test_help_lists_commands_and_examples():
    result = run(["--help"])
    assert result.exit_code == 0
    for word in ("fit", "predict", "info", "Examples:", "kkmeans fit examples/moons.csv -k 2"):
        assert word in result.stdout
    fit_help = run(["fit", "--help"]).stdout
    for option in ("--n-clusters", "--kernel", "--gamma", "--scale", "--n-init", "--config",
                   "--missing", "--columns", "--no-model", "--summary", "Examples:"):
        assert option in fit_help
    assert "--distances" in run(["predict", "--help"]).stdout
    assert "--json" in run(["info", "--help"]).stdout


def test_version():
    result = run(["--version"])
    assert result.exit_code == 0
    assert result.stdout.splitlines()[0] == f"kkmeans {__version__}"


def test_help_does_not_import_numpy():
    code = ("import sys\nfrom kkmeans_cli.cli import cli\n"
            "rc = cli.main(['--help'], standalone_mode=False)\n"
            "print(rc, 'numpy' in sys.modules, 'rich' in sys.modules, 'h5py' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    assert out[-4:] == ["0", "False", "False", "False"]


def test_cli_choices_follow_the_engine():
    assert cli_module.KERNEL_CHOICES == KERNELS
    assert cli_module.DEFAULT_N_INIT == KernelKMeans(kernel="rbf").n_init


# -- the shell lines of cli.md, as real processes -------------------------------------------
def test_shell_fit_to_labels_file(tmp_path, data):
    X, y, _ = data
    result = run_shell("kkmeans fit data.csv -k 5 --kernel rbf --threads 1 > labels.txt",
                       tmp_path)
    assert result.returncode == 0, result.stderr
    labels = np.loadtxt(tmp_path / "labels.txt", dtype=int)
    assert labels.shape == (60,)
    assert set(labels.tolist()) == set(range(5))
    assert (tmp_path / "model.npz").exists()
    assert "rbf(gamma=" in result.stderr and "model.npz" in result.stderr


def test_shell_predict_sort_uniq(tmp_path, data):
    X, y, _ = data
    assert run_process(["fit", "--kernel", "rbf", "data.csv", "-k", "3", *FAST], tmp_path).returncode == 0
    write_csv(tmp_path / "new.csv", X[:30])
    result = run_shell("kkmeans predict model.npz new.csv | sort | uniq -c", tmp_path)
    assert result.returncode == 0, result.stderr
    counts = {int(label): int(count) for count, label in
              (line.split() for line in result.stdout.strip().splitlines())}
    assert sum(counts.values()) == 30
    assert sorted(counts.values()) == [10, 10, 10]


def test_shell_stdin_no_model_quiet(tmp_path, data):
    result = run_shell("cat data.csv | kkmeans fit --kernel rbf - -k 3 --no-model --quiet", tmp_path)
    assert result.returncode == 0
    assert result.stderr == ""
    assert not (tmp_path / "model.npz").exists()
    labels = labels_of(result.stdout)
    assert _same_partition(labels, data[1])


def test_a_model_path_and_no_model_together(tmp_path, data):
    """-o and --no-model given together were read as --no-model, silently: as flags, a usage
    error (exit 2, nothing written); one a flag and the other a config key, the flag wins;
    both config keys, no_model wins (a config shared with sweep, whose key model is too)."""
    none, path, both = (tmp_path / name for name in ("none.yaml", "path.yaml", "both.yaml"))
    none.write_text("no_model: true\n")
    path.write_text(f"model: {tmp_path / 'c.npz'}\n")
    both.write_text(f"model: {tmp_path / 'c.npz'}\nno_model: true\n")
    x = tmp_path / "x.npz"
    before = sorted(os.listdir(tmp_path))
    line = "kkmeans: error: -o/--model and --no-model cannot be used together: drop one\n"
    command = ["fit", tmp_path / "data.csv", "-k", "3", "--labels", tmp_path / "l.txt",
               "-o", x, "--no-model"]
    result = run(command)
    assert (result.exit_code, result.stdout, result.stderr) == (2, "", line)
    assert sorted(os.listdir(tmp_path)) == before
    result = run_process(command, cwd=tmp_path)
    assert (result.returncode, result.stdout, result.stderr) == (2, "", line)
    assert sorted(os.listdir(tmp_path)) == before
    for args, saved in ((["--config", none, "-o", x], "x.npz"),
                        (["--config", both, "-o", x], "x.npz"),
                        (["--config", path, "--no-model"], None),
                        (["--config", both], None)):
        result = run(["fit", tmp_path / "data.csv", "-k", "3", "--quiet", *FAST, *args])
        assert result.exit_code == 0, result.stderr
        assert sorted(os.listdir(tmp_path)) == sorted(before + ([saved] if saved else []))
        if saved:
            os.remove(tmp_path / saved)
    swept = run(["sweep", tmp_path / "data.csv", "--k", "2..3", "--quiet", *FAST, "--config",
                 both])
    assert swept.exit_code == 0, swept.stderr
    assert sorted(os.listdir(tmp_path)) == sorted(before + ["c.npz"])


def test_shell_config_and_flag(tmp_path, data):
    config = os.path.join(ROOT, "configs", "rbf.yaml")
    result = run_shell(f"kkmeans fit data.csv --config {config} -k 4 --threads 1", tmp_path)
    assert result.returncode == 0, result.stderr
    assert len(set(labels_of(result.stdout).tolist())) == 4
    with np.load(tmp_path / "model.npz", allow_pickle=False) as model:
        meta = json.loads(str(model["meta"]))
    assert meta["n_clusters"] == 4
    assert meta["options"]["config"] == config
    # linear.yaml sets n_clusters 4 and the linear kernel: the flag -k 3 wins over the former.
    config = os.path.join(ROOT, "configs", "linear.yaml")
    result = run_shell(f"kkmeans fit data.csv --config {config} -k 3 --threads 1", tmp_path)
    assert result.returncode == 0, result.stderr
    with np.load(tmp_path / "model.npz", allow_pickle=False) as model:
        meta = json.loads(str(model["meta"]))
    assert (meta["n_clusters"], meta["kernel"], meta["n_init"]) == (3, "linear", 10)


def test_process_errors_are_one_line_without_traceback(tmp_path):
    result = run_process(["fit", "--kernel", "rbf", "missing.csv", "-k", "2"], tmp_path)
    assert result.returncode == 1
    assert result.stderr == "kkmeans: error: missing.csv: no such file\n"
    result = run_process(["fit", "--kernel", "rbf", "missing.csv", "-k", "2", "--debug"], tmp_path)
    assert result.returncode == 1
    assert "Traceback" in result.stderr
    assert result.stderr.rstrip().endswith("kkmeans: error: missing.csv: no such file")
    result = run_process(["fit", "--kernel", "rbf", "missing.csv", "-k", "2"], tmp_path,
                         env={"KKMEANS_DEBUG": "1"})
    assert "Traceback" in result.stderr


def test_python_dash_m_runs_the_cli(tmp_path):
    result = subprocess.run([sys.executable, "-m", "kkmeans_cli", "--version"],
                            capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 0
    assert result.stdout.splitlines()[0] == f"kkmeans {__version__}"
    assert kkmeans_command()  # either the script on PATH or the module


# -- fit / predict / info -------------------------------------------------------------------
@pytest.mark.parametrize("scale", ["none", "standard", "minmax"])
def test_fit_then_predict_reproduces_labels(tmp_path, data, scale):
    X, y, path = data
    model = tmp_path / "m.npz"
    fitted = run(["fit", "--kernel", "rbf", path, "-k", "3", "--scale", scale, "-o", model, *FAST])
    assert fitted.exit_code == 0, fitted.stderr
    predicted = run(["predict", model, path, "--threads", "1"])
    assert predicted.exit_code == 0, predicted.stderr
    assert np.array_equal(labels_of(fitted.stdout), labels_of(predicted.stdout))
    assert _same_partition(labels_of(fitted.stdout), y)


def test_predict_distances(tmp_path, data):
    X, y, path = data
    run(["fit", "--kernel", "rbf", path, "-k", "3", "-o", tmp_path / "m.npz", *FAST])
    result = run(["predict", tmp_path / "m.npz", path, "--distances", tmp_path / "d.csv",
                  "--labels", tmp_path / "l.txt"])
    assert result.exit_code == 0
    assert result.stdout == ""
    dist = np.loadtxt(tmp_path / "d.csv", delimiter=",")
    assert dist.shape == (60, 3)
    assert np.all(dist >= -1e-9)
    assert np.array_equal(dist.argmin(axis=1), np.loadtxt(tmp_path / "l.txt", dtype=int))


def test_csv_npy_hdf5_stdin_give_identical_labels(tmp_path, data):
    X, y, path = data
    np.save(tmp_path / "data.npy", X)
    with h5py.File(tmp_path / "data.h5", "w") as f:
        f.create_dataset("/group/features", data=X)
    write_csv(tmp_path / "data.tsv", X, header=False, delimiter="\t")
    common = ["-k", "3", "--no-model", "--quiet", *FAST]
    outputs = [
        run(["fit", "--kernel", "rbf", path, *common]).stdout,
        run(["fit", "--kernel", "rbf", tmp_path / "data.npy", *common]).stdout,
        run(["fit", "--kernel", "rbf", f"{tmp_path / 'data.h5'}:/group/features", *common]).stdout,
        run(["fit", "--kernel", "rbf", tmp_path / "data.h5", "--dataset", "/group/features", *common]).stdout,
        run(["fit", "--kernel", "rbf", tmp_path / "data.tsv", *common]).stdout,
        run(["fit", "--kernel", "rbf", "-", *common], input=Path(path).read_text()).stdout,
    ]
    first = labels_of(outputs[0])
    assert first.shape == (60,)
    for out in outputs[1:]:
        assert np.array_equal(labels_of(out), first)


def test_config_and_equivalent_flags_give_identical_models(tmp_path, data):
    X, y, path = data
    (tmp_path / "run.yaml").write_text(
        "n_clusters: 3\nkernel: laplacian\ngamma: 0.5\nscale: minmax\nn_init: 4\n"
        "max_iter: 50\ntol: 0.0\nseed: 7\ndtype: float32\nthreads: 1\n")
    a = run(["fit", path, "--config", tmp_path / "run.yaml", "-o", tmp_path / "a.npz"])
    b = run(["fit", path, "-k", "3", "--kernel", "laplacian", "--gamma", "0.5", "--scale",
             "minmax", "--n-init", "4", "--max-iter", "50", "--tol", "0", "--seed", "7",
             "--dtype", "float32", "--threads", "1", "-o", tmp_path / "b.npz"])
    assert a.exit_code == 0 and b.exit_code == 0, a.stderr + b.stderr
    assert a.stdout == b.stdout
    with np.load(tmp_path / "a.npz") as ma, np.load(tmp_path / "b.npz") as mb:
        assert sorted(ma.files) == sorted(mb.files)
        for key in ma.files:
            if key != "meta":
                assert np.array_equal(ma[key], mb[key]), key
        meta_a, meta_b = json.loads(str(ma["meta"])), json.loads(str(mb["meta"]))
    for key in ("kernel", "gamma", "n_clusters", "scale", "dtype", "seed", "n_init", "inertia"):
        assert meta_a[key] == meta_b[key]
    assert meta_a["gamma"] == 0.5 and meta_a["dtype"] == "float32"
    opts_a = {k: v for k, v in meta_a["options"].items() if k not in ("config", "model")}
    opts_b = {k: v for k, v in meta_b["options"].items() if k not in ("config", "model")}
    assert opts_a == opts_b


def test_flags_override_config(tmp_path, data):
    X, y, path = data
    (tmp_path / "run.yaml").write_text("n_clusters: 2\nn_init: 5\nkernel: linear\n")
    result = run(["fit", path, "--config", tmp_path / "run.yaml", "-k", "3", "--threads", "1",
                  "-o", tmp_path / "m.npz"])
    assert result.exit_code == 0
    info = json.loads(run(["info", tmp_path / "m.npz", "--json"]).stdout)
    assert info["n_clusters"] == 3  # flag
    assert info["kernel"] == "linear" and info["n_init"] == 5  # config
    assert info["options"]["max_iter"] == 300  # default


def test_info_text_and_json(tmp_path, data):
    X, y, path = data
    run(["fit", "--kernel", "rbf", path, "-k", "3", "--gamma", "0.25", "--scale", "standard", "-o",
         tmp_path / "m.npz", *FAST])
    text = run(["info", tmp_path / "m.npz"])
    assert text.exit_code == 0
    for expected in ("kkmeans-model version 3", "rbf(gamma=0.25)", "k:             3",
                     "samples:       60", "features:      2 (x0, x1)", "scaling:       standard",
                     "cluster sizes: 20, 20, 20"):
        assert expected in text.stdout
    info = json.loads(run(["info", tmp_path / "m.npz", "--json"]).stdout)
    assert info["format"] == "kkmeans-model" and info["format_version"] == 3
    assert info["kernel"] == "rbf" and info["gamma"] == 0.25
    assert (info["n_clusters"], info["n_samples"], info["n_features"]) == (3, 60, 2)
    assert sorted(info["cluster_sizes"]) == [20, 20, 20]
    assert info["scale"] == "standard" and len(info["scale_offset"]) == 2
    assert len(info["kernel_offset"]) == 2  # rbf: the kernel centres the (scaled) data
    assert info["seed"] == 0 and info["n_init"] == 3
    assert info["inertia"] > 0


def test_info_says_the_options_as_the_command_line_takes_them(tmp_path, data):
    """Flags given read as flags (--silhouette, not --silhouette=True, which the command line
    refuses), the second of a pair too (--no-header); and the line fits again alike."""
    X, y, _ = data
    path = tmp_path / "bare.csv"
    np.savetxt(path, X, delimiter=",", fmt="%.10g")             # no header line
    model = tmp_path / "m.npz"
    first = run(["fit", "--kernel", "rbf", path, "-k", "3", "--silhouette", "--no-header",
                 "-o", model, *FAST])
    assert first.exit_code == 0, first.stderr
    line = next(row for row in run(["info", model]).stdout.splitlines() if "--seed" in row)
    options = line.split(":", 1)[1].split()
    assert "--silhouette" in options and "--no-header" in options, line
    assert not any(o.endswith("=True") for o in options), line
    again = run(["fit", path, *[o for o in options if not o.startswith("--model")],
                 "--no-model"])
    assert again.exit_code == 0, again.stderr
    assert again.stdout == first.stdout
    from kkmeans_cli.cli.info import option_text

    assert option_text("header", False) == "--no-header"
    assert option_text("header", True) == "--header"
    assert option_text("whiten", False) == "--no-whiten" and option_text("whiten", "auto") is None
    assert option_text("silhouette", False) is None and option_text("k", 3) == "--k=3"


def test_json_summary_and_labels_file(tmp_path, data):
    X, y, path = data
    result = run(["fit", "--kernel", "rbf", path, "-k", "3", "--json", "--labels", tmp_path / "l.txt",
                  "--summary", tmp_path / "s.json", "--no-model", *FAST])
    assert result.exit_code == 0
    summary = json.loads(result.stdout)
    assert summary == json.loads((tmp_path / "s.json").read_text())
    assert summary["n_samples"] == 60 and summary["n_clusters"] == 3
    assert sum(summary["cluster_sizes"]) == 60
    assert summary["model"] is None and summary["kernel"] == "rbf"
    assert len(summary["restart_inertias"]) == 3
    assert summary["inertia"] == min(summary["restart_inertias"])
    assert np.loadtxt(tmp_path / "l.txt", dtype=int).shape == (60,)


def test_report_on_stderr_and_quiet(tmp_path, data):
    X, y, path = data
    loud = run(["fit", "--kernel", "rbf", path, "-k", "3", "-o", tmp_path / "m.npz", *FAST])
    for expected in ("60 samples × 2 features", "rbf(gamma=", "restarts", "iterations",
                     "inertia", "cluster sizes:", "20, 20, 20", str(tmp_path / "m.npz"),
                     "kernel matrix"):
        assert expected in loud.stderr
    assert labels_of(loud.stdout).shape == (60,)  # stdout carries labels only
    quiet = run(["fit", "--kernel", "rbf", path, "-k", "3", "-o", tmp_path / "m.npz", "--quiet", *FAST])
    assert quiet.stderr == ""
    assert quiet.stdout == loud.stdout


def test_weights_and_init_file(tmp_path, data):
    X, y, path = data
    (tmp_path / "init.txt").write_text("".join(f"{v}\n" for v in y))
    (tmp_path / "w.txt").write_text("weight\n" + "".join(f"{1 + (i % 2)}\n" for i in range(60)))
    result = run(["fit", "--kernel", "rbf", path, "-k", "3", "--init", tmp_path / "init.txt", "--weights",
                  tmp_path / "w.txt", "-o", tmp_path / "m.npz", "--threads", "1"])
    assert result.exit_code == 0, result.stderr
    assert np.array_equal(labels_of(result.stdout), y)
    with np.load(tmp_path / "m.npz") as model:
        assert np.array_equal(model["weights"], 1.0 + (np.arange(60) % 2))
    short = run(["fit", "--kernel", "rbf", path, "-k", "3", "--weights", tmp_path / "init.txt",
                 "--no-model"])
    assert short.exit_code == 0  # the init file holds 60 non-negative numbers: valid weights
    (tmp_path / "few.txt").write_text("1\n2\n")
    bad = run(["fit", "--kernel", "rbf", path, "-k", "3", "--weights", tmp_path / "few.txt", "--no-model"])
    assert bad.exit_code == 1
    assert "has 2 weights" in bad.stderr and "60 rows" in bad.stderr


def test_precomputed_kernel_fit_and_predict(tmp_path, data):
    X, y, _ = data
    sq = ((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)
    K = np.exp(-0.1 * sq)
    np.save(tmp_path / "K.npy", K)
    fitted = run(["fit", tmp_path / "K.npy", "-k", "3", "--kernel", "precomputed", "-o",
                  tmp_path / "m.npz", *FAST])
    assert fitted.exit_code == 0, fitted.stderr
    with np.load(tmp_path / "m.npz") as model:
        assert "X_fit" not in model.files
    predicted = run(["predict", tmp_path / "m.npz", tmp_path / "K.npy"])
    assert predicted.exit_code == 0, predicted.stderr
    assert np.array_equal(labels_of(predicted.stdout), labels_of(fitted.stdout))
    assert _same_partition(labels_of(fitted.stdout), y)
    scaled = run(["fit", tmp_path / "K.npy", "-k", "3", "--kernel", "precomputed", "--scale",
                  "standard", "--no-model"])
    assert scaled.exit_code == 2 and "--scale cannot be used" in scaled.stderr


def test_columns_and_missing_drop_keep_lines_aligned(tmp_path):
    X, y = blobs(n=30, d=2, k=3)
    lines = ["id,a,b"] + [f"{i},{a},{b}" for i, (a, b) in enumerate(X)]
    lines[5] = "4,,1.0"  # row 4 has an empty cell
    (tmp_path / "d.csv").write_text("\n".join(lines) + "\n")
    result = run(["fit", "--kernel", "rbf", tmp_path / "d.csv", "-k", "3", "--columns", "a,b", "--missing", "drop",
                  "--no-model", *FAST])
    assert result.exit_code == 0, result.stderr
    labels = labels_of(result.stdout)
    assert labels.shape == (30,) and labels[4] == -1
    assert np.all(labels[np.arange(30) != 4] >= 0)
    assert _same_partition(labels[np.arange(30) != 4], y[np.arange(30) != 4])
    assert "1 row with missing values dropped" in result.stderr


@pytest.mark.parametrize("config", ["knn.yaml", "rbf.yaml", "linear.yaml", "moons.yaml"])
def test_shipped_configs_run(tmp_path, config):
    result = run(["fit", os.path.join(ROOT, "examples", "blobs.csv"), "--config",
                  os.path.join(ROOT, "configs", config), "-k", "4", "--no-model", "--quiet",
                  "--threads", "1"])
    assert result.exit_code == 0, result.stderr
    assert len(set(labels_of(result.stdout).tolist())) == 4


def test_example_files_and_moons_config():
    from sklearn.datasets import make_moons
    from sklearn.metrics import adjusted_rand_score

    moons = np.loadtxt(os.path.join(ROOT, "examples", "moons.csv"), delimiter=",", skiprows=1)
    blob_rows = np.loadtxt(os.path.join(ROOT, "examples", "blobs.csv"), delimiter=",",
                           skiprows=1)
    assert moons.shape == (300, 2) and blob_rows.shape == (300, 3)
    X, y = make_moons(n_samples=300, noise=0.06, random_state=0)
    assert np.allclose(moons, np.round(X, 4))
    result = run(["fit", os.path.join(ROOT, "examples", "moons.csv"), "--config",
                  os.path.join(ROOT, "configs", "moons.yaml"), "--no-model", "--quiet"])
    assert adjusted_rand_score(y, labels_of(result.stdout)) > 0.95


def test_default_fit_on_moons_runs(tmp_path):
    result = run(["fit", "--kernel", "rbf", os.path.join(ROOT, "examples", "moons.csv"), "-k", "2", "-o",
                  tmp_path / "m.npz"])
    assert result.exit_code == 0
    labels = labels_of(result.stdout)
    assert labels.shape == (300,) and set(labels.tolist()) == {0, 1}


# -- interruption ---------------------------------------------------------------------------
def test_interrupt_during_fit_exits_130_without_files(tmp_path, data, monkeypatch):
    X, y, path = data
    (tmp_path / "old.npz").write_bytes(b"OLD")

    def interrupted(self, *args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(KernelKMeans, "fit", interrupted)
    result = run(["fit", "--kernel", "rbf", path, "-k", "3", "-o", tmp_path / "old.npz", "--labels",
                  tmp_path / "l.txt"])
    assert result.exit_code == 130
    assert "kkmeans: interrupted" in result.stderr
    assert (tmp_path / "old.npz").read_bytes() == b"OLD"
    assert not (tmp_path / "l.txt").exists()


def test_interrupt_while_writing_leaves_nothing(tmp_path, data, monkeypatch):
    X, y, path = data
    (tmp_path / "old.npz").write_bytes(b"OLD")
    from kkmeans_cli.model import model_file

    real_save = model_file.save_model

    def half_written(handle, *args):
        real_save(handle, *args)
        raise KeyboardInterrupt

    monkeypatch.setattr(model_file, "save_model", half_written)
    result = run(["fit", "--kernel", "rbf", path, "-k", "3", "-o", tmp_path / "old.npz", "--summary",
                  tmp_path / "s.json", *FAST])
    assert result.exit_code == 130
    assert (tmp_path / "old.npz").read_bytes() == b"OLD"
    assert sorted(os.listdir(tmp_path)) == ["data.csv", "old.npz"]


def test_readme_main_command_separates_the_rings(tmp_path):
    """The README's first command (the default kernel, only -k) clusters the bundled rings
    exactly."""
    from pathlib import Path

    from sklearn.metrics import adjusted_rand_score

    root = Path(__file__).resolve().parents[1]
    readme = (root / "README.md").read_text()
    assert "pip install . && kkmeans fit examples/circles.csv -k 2\n" in readme
    out = subprocess.run(
        [*kkmeans_command(), "fit", str(root / "examples/circles.csv"), "-k", "2",
         "--no-model"], capture_output=True, text=True, cwd=tmp_path, check=True)
    labels = np.array(out.stdout.split(), dtype=int)
    truth = np.loadtxt(root / "examples/circles_truth.txt")
    assert adjusted_rand_score(truth, labels) == 1.0
    assert not list(tmp_path.iterdir())
