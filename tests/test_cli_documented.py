"""The command line as the README documents it: bare ``kkmeans``, exit codes, messages in
command-line words that name the option and the file, one config for every command,
``--with-data``, shell completion and the small print (plurals, restart numbers, units,
threads). Every failing case checks the message, the exit code and the files left behind,
in-process (CliRunner) and, where the process matters, as a real subprocess."""
import json
import io
import os
import shutil

import numpy as np
import pytest
import yaml

from helpers import ROOT, blobs, labels_of, listing, run, run_process, write_csv
from kkmeans_cli import KernelKMeans, __version__
from kkmeans_cli._text import plural
from kkmeans_cli.cli import cli
from kkmeans_cli.cli.inputs import format_data_with_labels
from kkmeans_cli.engine import _openmp
from kkmeans_cli.io.config import configurable_params
from kkmeans_cli.io.readers import read_data

FAST = ["--threads", "1", "--n-init", "2"]
CONFIGS = sorted(os.listdir(os.path.join(ROOT, "configs")))


@pytest.fixture
def data_dir(tmp_path):
    """A folder holding ``data.csv``: 60 points in 3 blobs (seed 1), no model."""
    X, y = blobs(n=60, d=2, k=3, seed=1)
    write_csv(tmp_path / "data.csv", X)
    return tmp_path


def _fails(folder, args, code, *fragments, process=False):
    """Run a command that must fail: one error line holding every fragment, the exit code,
    nothing on stdout and no file added to or changed in ``folder``."""
    before = {name: (folder / name).read_bytes() for name in listing(folder)}
    if process:
        result = run_process(args, folder)
        stdout, stderr, exit_code = result.stdout, result.stderr, result.returncode
    else:
        cwd = os.getcwd()
        os.chdir(folder)
        try:
            result = run(args)
        finally:
            os.chdir(cwd)
        stdout, stderr, exit_code = result.stdout, result.stderr, result.exit_code
    assert exit_code == code, stderr
    assert stdout == ""
    # Warnings found on the way may come first; the error is one line, the last.
    *warnings, error = stderr.splitlines()
    assert error.startswith("kkmeans: error: "), stderr
    assert all(line.startswith("kkmeans: warning: ") for line in warnings), stderr
    for fragment in fragments:
        assert fragment in error, (fragment, error)
    after = {name: (folder / name).read_bytes() for name in listing(folder)}
    assert after == before
    return error


# -- bare kkmeans, --version, --help ----------------------------------------------------------
def test_bare_kkmeans_prints_usage_and_commands_exit_2(tmp_path):
    for result in (run([]), run_process([], tmp_path)):
        stderr = result.stderr
        code = getattr(result, "exit_code", getattr(result, "returncode", None))
        assert code == 2
        assert result.stdout == ""
        assert stderr.startswith("Usage: kkmeans [OPTIONS] COMMAND [ARGS]...\n")
        assert "kkmeans: error" not in stderr
        assert "\nCommands:\n" in stderr
        for command in ("fit", "predict", "sweep", "info"):
            assert f"\n  {command} " in stderr
        assert "kkmeans --help" in stderr
    assert listing(tmp_path) == []


def test_version_says_how_the_engine_was_built():
    out = run(["--version"]).stdout.splitlines()
    assert out[0] == f"kkmeans {__version__}"
    if _openmp.openmp_enabled():
        assert out[1].startswith("engine: built with OpenMP, ")
        assert f"{max(1, _openmp.max_threads())} thread" in out[1]
    else:
        assert out[1].startswith("engine: built without OpenMP")


def test_help_documents_shell_completion():
    text = run(["--help"]).stdout
    for shell in ("bash", "zsh", "fish"):
        assert f"_KKMEANS_COMPLETE={shell}_source kkmeans" in text


def test_shell_completion_works(tmp_path):
    source = run_process([], tmp_path, env={"_KKMEANS_COMPLETE": "bash_source"})
    assert source.returncode == 0 and "_kkmeans_completion()" in source.stdout
    words = run_process([], tmp_path, env={"_KKMEANS_COMPLETE": "bash_complete",
                                            "COMP_WORDS": "kkmeans fit data.csv --ker",
                                            "COMP_CWORD": "3"})
    assert words.returncode == 0 and "plain,--kernel" in words.stdout.splitlines()


# -- exit codes and messages -------------------------------------------------------------------
def test_object_npy_is_a_data_error(data_dir):
    np.save(data_dir / "obj.npy", np.array([[1, "a"], [2, "b"]], dtype=object))
    for process in (False, True):
        _fails(data_dir, ["fit", "--kernel", "rbf", "obj.npy", "-k", "2"], 1, "obj.npy: ", "Python objects",
               process=process)


@pytest.mark.parametrize("value, hint", [
    ("kmeans++", "; did you mean --init k-means++?"),
    ("Random", "; did you mean --init random?"),
    ("labels", ""),
])
def test_init_that_is_neither_method_nor_file_is_a_usage_error(data_dir, value, hint):
    for process in (False, True):
        line = _fails(data_dir, ["fit", "--kernel", "rbf", "data.csv", "-k", "3", "--init", value], 2,
                      f"--init {value}: not a start method (k-means++, spectral, random) and "
                      f"no such file", process=process)
        assert line.endswith("file" + hint)
    _fails(data_dir, ["sweep", "--kernel", "rbf", "data.csv", "--k", "2..3", "--init", value], 2, f"--init {value}: ")


def test_missing_init_file_is_a_data_error(data_dir):
    _fails(data_dir, ["fit", "--kernel", "rbf", "data.csv", "-k", "3", "--init", "start.txt"], 1,
           "--init start.txt: no such file", process=True)


def test_per_row_files_are_named_with_their_option(data_dir):
    _fails(data_dir, ["fit", "--kernel", "rbf", "data.csv", "-k", "3", "--weights", "w.txt"], 1,
           "--weights w.txt: no such file")
    (data_dir / "w.txt").write_text("1\n2\n3\n")
    _fails(data_dir, ["fit", "--kernel", "rbf", "data.csv", "-k", "3", "--weights", "w.txt"], 1,
           "--weights w.txt: has 3 weights, data.csv has 60 rows")
    (data_dir / "w.txt").write_text("1\n" * 59 + "-2\n")
    _fails(data_dir, ["fit", "--kernel", "rbf", "data.csv", "-k", "3", "--weights", "w.txt"], 1,
           "--weights w.txt: weight 60 is negative (-2)")
    (data_dir / "one.txt").write_text("1\n")
    _fails(data_dir, ["fit", "--kernel", "rbf", "data.csv", "-k", "3", "--weights", "one.txt"], 1,
           "--weights one.txt: has 1 weight, data.csv has 60 rows")
    (data_dir / "start.txt").write_text("0\n1\n2\n" * 19 + "0\n1\n5\n")
    _fails(data_dir, ["fit", "--kernel", "rbf", "data.csv", "-k", "3", "--init", "start.txt"], 1,
           "--init start.txt: label 5 (value 60) is outside 0..2 (-k 3)")


def test_elkan_on_a_kernel_found_not_psd_is_a_usage_error_in_cli_words(data_dir):
    line = _fails(data_dir, ["fit", os.path.join(ROOT, "examples", "blobs.csv"), "-k", "3",
                         "--kernel", "sigmoid", "--algorithm", "elkan", *FAST], 2,
                  "--algorithm elkan needs a positive semidefinite kernel",
                  "Use --algorithm lloyd or --psd-repair lingoes", process=True)
    assert "='" not in line


def test_ncut_with_a_distance_matrix_is_a_usage_error_before_reading(data_dir):
    # DATA does not even exist: the conflict is found from the options alone.
    line = _fails(data_dir, ["fit", "none.csv", "-k", "2", "--kernel", "precomputed-distance",
                         "--objective", "ncut"], 2,
                  "--objective ncut needs positive degrees",
                  "(--kernel precomputed-distance, Gower double centring)",
                  "use --objective kmeans")
    assert "='" not in line


def test_ncut_on_a_kernel_with_a_negative_degree_is_a_usage_error(data_dir):
    K = np.array([[1.0, -3.0, 0.1], [-3.0, 1.0, 0.1], [0.1, 0.1, 1.0]])
    np.savetxt(data_dir / "k.csv", K, delimiter=",")
    line = _fails(data_dir, ["fit", "k.csv", "-k", "2", "--kernel", "precomputed", "--objective",
                         "ncut", "--no-model"], 2,
                  "--objective ncut needs positive degrees", "or --objective kmeans")
    assert "='" not in line


def test_ncut_with_the_clip_repair_is_a_usage_error(data_dir):
    """Clip gives the kernel of centred features, whose rows sum to 0: with the normalized cut
    every degree was about 0 and the error blamed the kernel, even rbf's ('use a
    non-negative kernel (rbf, ...)'). Said up front; Lingoes' repair keeps the degrees."""
    line = _fails(data_dir, ["fit", os.path.join(ROOT, "examples", "blobs.csv"), "-k", "3",
                             "--kernel", "rbf", "--objective", "ncut", "--psd-repair", "clip",
                             "--no-model"], 2,
                  "--objective ncut needs positive degrees Σ_j K_ij, but --psd-repair clip "
                  "gives the kernel of centred features", "use --psd-repair lingoes")
    assert "='" not in line
    with pytest.raises(ValueError, match="psd_repair='clip' gives the kernel of centred"):
        KernelKMeans(3, objective="ncut", kernel="rbf", psd_repair="clip").fit(np.eye(5))
    result = run(["fit", os.path.join(ROOT, "examples", "blobs.csv"), "-k", "3", "--kernel",
                  "sigmoid", "--objective", "ncut", "--psd-repair", "lingoes", "--no-model",
                  "-q", *FAST])
    assert result.exit_code == 0, result.stderr


def test_ncut_on_a_kernel_with_a_degree_too_small_for_floating_point(data_dir):
    """A point all but unlinked (degree 1e-300): 1/d² overflowed, 'divide by zero' warnings
    on fit and a raw RuntimeWarning on predict; one usage error now, and a new point of such
    a degree is a ValueError."""
    K = np.array([[1.0, 0.5, 0.0], [0.5, 1.0, 0.0], [0.0, 0.0, 1e-300]])
    np.savetxt(data_dir / "k.csv", K, delimiter=",")
    line = _fails(data_dir, ["fit", "k.csv", "-k", "2", "--kernel", "precomputed", "--objective",
                         "ncut", "--no-model"], 2,
                  "--objective ncut: training point 2 has degree Σ_j u_j K_ij = 1e-300, too "
                  "small for floating point", "or use --objective kmeans")
    assert "='" not in line
    K[2, 2] = 1.0
    est = KernelKMeans(2, kernel="precomputed", objective="ncut", random_state=0).fit(K)
    with pytest.raises(ValueError, match="new point 0 has degree Σ_j u_j K_ij = 1e-300, too "
                                         "small for floating point"):
        est.predict(np.array([[0.0, 0.0, 1e-300]]), kernel_diag=np.ones(1))


def test_engine_warnings_are_in_cli_words(data_dir):
    result = run(["fit", os.path.join(ROOT, "examples", "blobs.csv"), "-k", "3", "--kernel",
                  "sigmoid", "--no-model", *FAST])
    assert result.exit_code == 0
    warning = [line for line in result.stderr.splitlines() if "positive semidefinite" in line]
    assert warning and warning[0].startswith("kkmeans: warning: ")
    assert "--psd-repair lingoes repairs it" in warning[0] and "psd_repair=" not in warning[0]


# -- one config for every command --------------------------------------------------------------
@pytest.mark.parametrize("config", CONFIGS)
def test_sweep_and_predict_accept_every_bundled_config(data_dir, config):
    path = os.path.join(ROOT, "configs", config)
    swept = run(["sweep", data_dir / "data.csv", "--k", "2..3", "--config", path, "-q", *FAST])
    assert swept.exit_code == 0, swept.stderr
    header = "k,objective,ncut," if config == "knn.yaml" else "k,inertia,"
    assert swept.stdout.splitlines()[0].startswith(header)
    fitted = run(["fit", "--kernel", "rbf", data_dir / "data.csv", "-k", "3", "-o", data_dir / "m.npz", "-q", *FAST])
    assert fitted.exit_code == 0
    plain = run(["predict", data_dir / "m.npz", data_dir / "data.csv", "-q"])
    with_config = run(["predict", data_dir / "m.npz", data_dir / "data.csv", "--config", path,
                       "-q"])
    assert with_config.exit_code == 0, with_config.stderr
    assert with_config.stdout == plain.stdout == fitted.stdout


def test_fit_accepts_every_bundled_config(data_dir):
    for config in CONFIGS:
        result = run(["fit", data_dir / "data.csv", "-k", "3", "--config",
                      os.path.join(ROOT, "configs", config), "--no-model", "-q", *FAST])
        assert result.exit_code == 0, (config, result.stderr)


def test_a_key_of_another_command_is_ignored_an_unknown_key_refused(data_dir):
    (data_dir / "run.yaml").write_text("n_clusters: 3\nmetric: davies-bouldin\ndistances: d.csv\n"
                                   "k: 2..3\n")
    fitted = run(["fit", data_dir / "data.csv", "--config", data_dir / "run.yaml", "--no-model",
                  "-q", *FAST])
    assert fitted.exit_code == 0 and len(set(labels_of(fitted.stdout))) == 3
    swept = run(["sweep", "--kernel", "rbf", data_dir / "data.csv", "--config", data_dir / "run.yaml", "-q", *FAST])
    assert swept.exit_code == 0 and [r.split(",")[0] for r in swept.stdout.split()[1:]] == [
        "2", "3"]
    (data_dir / "bad.yaml").write_text("n_inti: 3\n")
    for command in (["fit", "--kernel", "rbf", "data.csv", "-k", "3"], ["sweep", "data.csv", "--k", "2..3"],
                    ["predict", "m.npz", "data.csv"]):
        _fails(data_dir, [*command, "--config", "bad.yaml"], 2,
               "config bad.yaml: unknown key 'n_inti'; did you mean 'n_init'?")


@pytest.mark.parametrize("name, kernel", [("knn.yaml", "knn"), ("rbf.yaml", "rbf")])
def test_shipped_config_is_the_defaults_spelled_out(name, kernel):
    """knn.yaml is the defaults of fit; rbf.yaml the same for the rbf kernel (the kernel is
    the one key it changes)."""
    with open(os.path.join(ROOT, "configs", name)) as f:
        config = yaml.safe_load(f)
    params = configurable_params(cli.commands["fit"])
    assert config, "empty config"
    assert config["kernel"] == kernel
    for key, value in config.items():
        if key != "kernel":
            assert params[key].default == value, key
    assert params["kernel"].default == "knn"


# -- --with-data --------------------------------------------------------------------------------
def test_with_data_keeps_the_header_and_adds_a_label_column(data_dir):
    result = run(["fit", "--kernel", "rbf", data_dir / "data.csv", "-k", "3", "--no-model", "-q", "--with-data",
                  *FAST])
    labels = run(["fit", "--kernel", "rbf", data_dir / "data.csv", "-k", "3", "--no-model", "-q", *FAST]).stdout
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    original = (data_dir / "data.csv").read_text().splitlines()
    assert lines[0] == original[0] + ",label"
    assert len(lines) == len(original)
    for line, source, label in zip(lines[1:], original[1:], labels.split()):
        values, got = line.rsplit(",", 1)
        assert got == label
        assert [float(v) for v in values.split(",")] == [float(v) for v in source.split(",")]


def test_with_data_without_header_and_dropped_rows(data_dir):
    (data_dir / "raw.csv").write_text("1,2\n1.5,2.5\n,3\n10,11\n10.5,11\n")
    fitted = run(["fit", "--kernel", "rbf", data_dir / "raw.csv", "-k", "2", "--missing", "drop", "-o",
                  data_dir / "m.npz", "-q", "--with-data", "--labels", data_dir / "out.csv"])
    assert fitted.exit_code == 0 and fitted.stdout == ""
    text = (data_dir / "out.csv").read_text()
    rows = [line.split(",") for line in text.splitlines()]
    assert [r[:2] for r in rows] == [["1", "2"], ["1.5", "2.5"], ["", ""], ["10", "11"],
                                     ["10.5", "11"]]
    assert rows[2][2] == "-1"
    assert rows[0][2] == rows[1][2] != rows[3][2] == rows[4][2]
    predicted = run(["predict", data_dir / "m.npz", data_dir / "raw.csv", "--missing", "drop", "-q",
                     "--with-data"])
    assert predicted.exit_code == 0 and predicted.stdout == text


def test_with_data_values_read_back_exactly():
    data = read_data("-", stdin=io.StringIO("x,y\n0.1,3\n1e-300,-2.5\n"))
    text = format_data_with_labels(data, np.array([0, 1]))
    assert text == "x,y,label\n0.1,3,0\n1e-300,-2.5,1\n"


def test_with_data_and_json_is_a_usage_error(data_dir):
    _fails(data_dir, ["fit", "--kernel", "rbf", "data.csv", "-k", "3", "--json", "--with-data"], 2,
           "--with-data cannot be used with it")


@pytest.mark.parametrize("process", [False, True])
def test_labels_on_stdout_asked_for_beside_json_is_a_usage_error(data_dir, process):
    """--json took stdout and dropped the labels that --labels - asked for there, exit 0."""
    _fails(data_dir, ["fit", "data.csv", "-k", "3", "--json", "--labels", "-", "--no-model"], 2,
           "--labels - asks for them there too", process=process)
    for config, flags in (("labels: '-'\njson: true\n", []), ("labels: '-'\n", ["--json"])):
        (data_dir / "run.yaml").write_text(config)
        _fails(data_dir, ["fit", "data.csv", "-k", "3", "--config", "run.yaml", "--no-model",
                          *flags], 2, "--labels - asks for them there too", process=process)
        (data_dir / "run.yaml").unlink()
    written = run(["fit", data_dir / "data.csv", "-k", "3", "--json", "--no-model", "-q"])
    assert written.exit_code == 0 and written.stdout.lstrip().startswith("{")


# -- the small print ---------------------------------------------------------------------------
def test_plural():
    assert plural(1, "sample") == "1 sample" and plural(0, "move") == "0 moves"
    assert plural(2, "k") == "2 ks" and plural(40000, "row", thousands=True) == "40,000 rows"
    assert plural(1, "weight", "weights") == "1 weight"


def test_one_sample_and_one_feature_are_singular(data_dir):
    (data_dir / "one.csv").write_text("x\n5\n")
    result = run(["fit", "--kernel", "rbf", data_dir / "one.csv", "-k", "1", "--no-model", "--threads", "1"])
    assert result.exit_code == 0
    assert "data:          " in result.stderr
    assert "one.csv: 1 sample × 1 feature\n" in result.stderr
    assert "(0 moves, " in result.stderr
    predicted = run(["fit", "--kernel", "rbf", data_dir / "data.csv", "-k", "2", "-o", data_dir / "m.npz", "-q",
                     *FAST])
    assert predicted.exit_code == 0
    (data_dir / "new.csv").write_text("x0,x1\n1,2\n")
    result = run(["predict", data_dir / "m.npz", data_dir / "new.csv"])
    assert "new.csv: 1 row\n" in result.stderr


def test_best_restart_is_one_based_in_report_json_and_model(data_dir):
    result = run(["fit", "--kernel", "rbf", data_dir / "data.csv", "-k", "3", "--threads", "1", "--n-init", "5",
                  "--summary", data_dir / "s.json", "-o", data_dir / "m.npz"])
    assert result.exit_code == 0
    summary = json.loads((data_dir / "s.json").read_text())
    best = summary["best_restart"]
    assert 1 <= best <= 5
    assert f"restarts:      5 (best: #{best})" in result.stderr
    inertias = summary["restart_inertias"]
    assert inertias[best - 1] == min(inertias)
    info = json.loads(run(["info", data_dir / "m.npz", "--json"]).stdout)
    assert info["fit_stats"]["best_restart"] == best


def test_sweep_table_has_no_trailing_spaces(data_dir):
    result = run(["sweep", "--kernel", "rbf", data_dir / "data.csv", "--k", "2..4", *FAST])
    assert result.exit_code == 0
    table = result.stderr.split("\nkkmeans sweep\n")[0].splitlines()
    assert len(table) >= 7
    assert all(line == line.rstrip() for line in result.stderr.splitlines())


@pytest.mark.parametrize("given, echoed", [("100K", "100 KiB"), ("1M", "1 MiB"),
                                           ("1.2M", "1.2 MiB"), ("200000", "195 KiB")])
def test_memory_limit_is_echoed_in_binary_units(data_dir, given, echoed):
    # 300 points: the kernel matrix alone is 300² · 8 bytes = 703 KiB.
    shutil.copy(os.path.join(ROOT, "examples", "circles.csv"), data_dir / "circles.csv")
    _fails(data_dir, ["fit", "--kernel", "rbf", "circles.csv", "-k", "2", "--memory-limit", given], 1,
           f"the limit is {echoed} (--memory-limit)", "(kernel matrix 703 KiB + ",
           process=given == "1M")


def test_threads_are_reported_honestly(data_dir):
    one = run(["fit", "--kernel", "rbf", data_dir / "data.csv", "-k", "3", "--no-model", *FAST])
    assert one.stderr.rstrip().endswith(" s (1 thread)")
    two = run(["fit", "--kernel", "rbf", data_dir / "data.csv", "-k", "3", "--no-model", "--threads", "2",
               "--n-init", "2"])
    if _openmp.openmp_enabled():
        assert two.stderr.rstrip().endswith(" s (1 of 2 threads: fewer than 2,000 points)")
    else:
        assert two.stderr.rstrip().endswith(" s (1 thread: engine built without OpenMP)")
    summary = run(["fit", "--kernel", "rbf", data_dir / "data.csv", "-k", "3", "--no-model", "--threads", "2",
                   "--n-init", "2", "--json"])
    assert json.loads(summary.stdout)["n_threads"] == 1


def test_no_click_deprecated_stream_helpers():
    # click.get_text_stream is deprecated (removed in Click 9): stdin and stderr are used
    # directly (CliRunner swaps them too).
    for name in ("app.py", "options.py", "fit.py", "predict.py", "sweep.py", "info.py",
                 "report.py"):
        with open(os.path.join(ROOT, "kkmeans_cli", "cli", name)) as f:
            assert "get_text_stream" not in f.read()


def test_api_words_become_command_line_words():
    from kkmeans_cli.cli.report import cli_wording

    assert cli_wording("Use algorithm='lloyd' or psd_repair='lingoes'") == (
        "Use --algorithm lloyd or --psd-repair lingoes")
    assert cli_wording("--psd-repair lingoes (psd_repair='lingoes') repairs it") == (
        "--psd-repair lingoes repairs it")
    assert cli_wording("n_clusters=5 is larger; random_state=3; n_threads, n_landmarks=40") == (
        "-k 5 is larger; --seed 3; --threads, --landmarks 40")
    assert cli_wording("sample_weight must be >= 0; approx, psd_repair need K") == (
        "--weights must be >= 0; approx, --psd-repair need K")
    # Ordinary words and other names stay as they are.
    for text in ("the median heuristic for gamma; using gamma = 1.0", "n_samples = 3",
                 "the kernel matrix", "x_n_init"):
        assert cli_wording(text) == text


def test_init_labels_from_an_hdf5_dataset_or_stdin(data_dir):
    import h5py

    X, y = blobs(n=60, d=2, k=3, seed=1)
    with h5py.File(data_dir / "start.h5", "w") as f:
        f.create_dataset("labels", data=y.astype(np.int64).reshape(-1, 1))
    from_h5 = run(["fit", "--kernel", "rbf", data_dir / "data.csv", "-k", "3", "--init",
                   f"{data_dir / 'start.h5'}:/labels", "--no-model", "-q", "--threads", "1"])
    assert from_h5.exit_code == 0, from_h5.stderr
    from_stdin = run(["fit", "--kernel", "rbf", data_dir / "data.csv", "-k", "3", "--init", "-", "--no-model", "-q",
                      "--threads", "1"], input="".join(f"{v}\n" for v in y))
    assert from_stdin.exit_code == 0, from_stdin.stderr
    assert from_h5.stdout == from_stdin.stdout
    assert len(set(labels_of(from_h5.stdout))) == 3


def test_the_readme_memory_limit_example_is_what_the_plan_says(tmp_path):
    """README's graph-memory sentence (5,000 points with --n-neighbors 4999, the need and the
    most neighbours --memory-limit 100M allows) is the refusal the command prints."""
    import re

    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as readme:
        text = " ".join(readme.read().split())
    said = re.search(r"5,000 points with `--n-neighbors 4999` need ([\d.]+ GiB) .*?"
                     r"`--memory-limit 100M` allows (\d+)\.", text)
    assert said, "README no longer holds the example"
    np.save(tmp_path / "p.npy", np.random.default_rng(0).normal(size=(5000, 2)))
    result = run(["fit", tmp_path / "p.npy", "-k", "2", "--n-neighbors", "4999",
                  "--memory-limit", "100M", "--no-model"])
    assert result.exit_code == 1 and result.stdout == ""
    assert f"needs {said.group(1)} " in result.stderr, result.stderr
    assert f"try --n-neighbors {said.group(2)} " in result.stderr, result.stderr
