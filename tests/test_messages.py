"""Messages name what the user can act on: an option the user set (not an inner step's own
bound), the option whose value is at fault, what the command line can do; ``--help`` shows
real ranges. Each case checks the exit code and the message."""
import re

import numpy as np
import pytest

from helpers import FAST, blobs, run, write_csv


@pytest.fixture
def data(tmp_path):
    X, _ = blobs(n=300, d=3, k=3, seed=2)
    return write_csv(tmp_path / "d.csv", X)


@pytest.mark.parametrize("seed", [0, 1])
def test_an_inner_step_bound_is_not_reported_as_the_users_max_iter(data, seed):
    """The spectral start of a Nyström fit runs k-means on its embedding for at most 100
    iterations; with one landmark it may stop there, which is no concern of the fit's."""
    result = run(["fit", "--kernel", "rbf", data, "-k", "3", "--approx", "nystroem", "--landmarks", "1",
                  "--max-iter", "500", "--seed", seed, "--no-model"])
    assert result.exit_code == 0, result.stderr
    assert "--max-iter 100" not in result.stderr
    assert "did not converge" not in result.stderr or "--max-iter 500" in result.stderr


@pytest.mark.parametrize("command", ["fit", "sweep", "predict"])
def test_help_shows_no_empty_range(command):
    text = run([command, "--help"]).stdout
    assert not re.search(r"\[[^\]]*None[^\]]*\]", text), text
    if command != "predict":
        assert re.search(r"--coef0 FLOAT\s+Offset of the poly and sigmoid kernels\.\s+"
                         r"\[default: 1\.0\]", text)


def test_distances_of_a_precomputed_model_say_what_to_do(tmp_path):
    X, _ = blobs(n=20, d=2, k=2, seed=1)
    K = np.exp(-((X[:, None] - X[None]) ** 2).sum(-1) / 10)
    np.savetxt(tmp_path / "K.csv", K, delimiter=",")
    result = run(["fit", tmp_path / "K.csv", "-k", "2", "--kernel", "precomputed", *FAST,
                  "-o", tmp_path / "m.npz", "-q"])
    assert result.exit_code == 0, result.stderr
    result = run(["predict", tmp_path / "m.npz", tmp_path / "K.csv", "--distances",
                  tmp_path / "d.csv", "--labels", tmp_path / "l.txt"])
    assert result.exit_code == 2
    assert result.stderr.startswith("kkmeans: error: --distances: the distances to a "
                                    "precomputed model's centres need K(x, x)")
    assert "kernel_diag" not in result.stderr and "drop --distances" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["K.csv", "m.npz"]


@pytest.mark.parametrize("args, needle", [
    (["--coef0=1e308"], "--coef0 1e+308 with --degree 3: 4·|coef0|^degree overflows floating "
                        "point (1.8e+308) whatever the data"),
    (["--coef0=-1e50", "--degree", "7"], "--coef0 -1e+50 with --degree 7"),
    (["--degree", "1000000"], "--degree 1000000: (gamma·‖x‖² + |coef0|)^degree overflows "
                              "floating point (1.8e+308) on the data's largest rows; with gamma "
                              "from 'median'"),
    (["--degree", "100000", "--gamma", "scale"], "with gamma from 'scale'"),
])
def test_poly_options_at_fault_are_named_not_the_data(data, args, needle):
    for command in (["fit", "--kernel", "rbf", data, "-k", "3"], ["sweep", data, "--k", "2..3"]):
        result = run(command + ["--kernel", "poly", *args, *FAST, "-q", "-o",
                                str(data) + ".npz"])
        assert result.exit_code == 2, result.stderr
        assert result.stderr.startswith("kkmeans: error: ") and needle in result.stderr
        assert "rescale the data" not in result.stderr


def test_poly_data_too_large_for_a_numeric_gamma_still_blames_the_data(data):
    result = run(["fit", data, "-k", "3", "--kernel", "poly", "--degree", "1000", "--gamma",
                  "1", *FAST, "--no-model", "-q"])
    assert result.exit_code == 1
    assert result.stderr.rstrip().endswith("rescale the data, or use a smaller gamma or degree")


def test_the_api_raises_usage_errors_for_poly_parameters():
    from kkmeans_cli import KernelKMeans
    from kkmeans_cli.errors import OptionConflictError, UsageError

    X, _ = blobs(n=40, d=2, k=2)
    with pytest.raises(UsageError, match="coef0=1e\\+300 with degree=3"):
        KernelKMeans(2, kernel="poly", coef0=1e300).fit(X)
    with pytest.raises(OptionConflictError, match="degree=100000"):
        KernelKMeans(2, kernel="poly", degree=100000).fit(X)


@pytest.mark.parametrize("params", [dict(n_clusters=True), dict(n_clusters=np.bool_(True)),
                                    dict(n_clusters=2, n_init=True),
                                    dict(n_clusters=2, max_iter=False),
                                    dict(n_clusters=2, gamma=True),
                                    dict(n_clusters=2, random_state=True),
                                    dict(n_clusters=2, n_threads=True)])
def test_a_bool_for_a_number_is_an_invalid_parameter(params):
    from kkmeans_cli import KernelKMeans
    from kkmeans_cli.model.params import InvalidParameterError

    X, _ = blobs(n=30, d=2, k=2)
    name = next(key for key, value in params.items() if isinstance(value, (bool, np.bool_)))
    with pytest.raises(InvalidParameterError, match=f"The '{name}' parameter of KernelKMeans "
                                                    f"must be a number, not a bool"):
        KernelKMeans(**{"kernel": "rbf", **params}).fit(X)


def test_a_column_name_with_a_comma_can_be_selected_in_quotes(tmp_path):
    (tmp_path / "q.csv").write_text('"a,b",c\n1,20\n3,40\n5,60\n7,80\n')
    result = run(["fit", "--kernel", "rbf", tmp_path / "q.csv", "-k", "2", *FAST, "--columns", '"a,b"',
                  "--no-model", "-q", "--with-data"])
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines()[0] == '"a,b",label'
    assert [line.split(",")[0] for line in result.stdout.splitlines()[1:]] == ["1", "3", "5", "7"]
    result = run(["fit", "--kernel", "rbf", tmp_path / "q.csv", "-k", "2", *FAST, "--columns", '"a,b',
                  "--no-model", "-q"])
    assert result.exit_code == 2
    assert "a name in double quotes must end in one" in result.stderr


@pytest.mark.parametrize("item", ["１", "٢", "-１"])
def test_an_index_is_written_in_ascii_digits(tmp_path, item):
    X, _ = blobs(n=20, d=3, k=2)
    np.save(tmp_path / "x.npy", X)
    result = run(["fit", "--kernel", "rbf", tmp_path / "x.npy", "-k", "2", *FAST, "--columns", item,
                  "--labels", tmp_path / "l.txt", "--no-model"])
    assert result.exit_code == 2
    assert result.stderr == (f"kkmeans: error: --columns: {item!r} is not an index: write "
                             f"indexes with the digits 0-9\n")
    assert not (tmp_path / "l.txt").exists()


@pytest.mark.parametrize("args, warning", [
    (["--landmarks", "50"], "--landmarks applies with --approx nystroem only; ignored"),
    (["--rank", "3"], "--rank applies with --approx nystroem only; ignored"),
    (["--worker-memory", "1G"], "--worker-memory sets the memory of the workers of --cluster "
                                "local[:N]; ignored"),
    (["--chunk-rows", "100"], "--chunk-rows applies on a cluster (--cluster or --scheduler) "
                              "only; ignored"),
])
def test_an_option_that_does_not_apply_is_warned_about(data, args, warning):
    command = ["fit", "--kernel", "rbf", data, "-k", "3"]
    result = run(command + args + [*FAST, "--no-model"])
    assert result.exit_code == 0, result.stderr
    assert f"kkmeans: warning: {warning}\n" in result.stderr
    plain = run(command + [*FAST, "--no-model"])
    assert plain.stdout == result.stdout  # ignored indeed
    if "--worker-memory" in args or "--chunk-rows" in args:
        model = run(["fit", "--kernel", "rbf", data, "-k", "3", *FAST, "-o", str(data) + ".npz", "-q"])
        assert model.exit_code == 0
        result = run(["predict", str(data) + ".npz", data] + args)
        assert f"kkmeans: warning: {warning}\n" in result.stderr


def test_a_config_value_that_does_not_apply_says_where_it_came_from(data, tmp_path):
    (tmp_path / "run.yaml").write_text("landmarks: 40\n")
    result = run(["fit", data, "-k", "3", *FAST, "--no-model", "--config",
                  tmp_path / "run.yaml"])
    assert result.exit_code == 0
    assert (f"kkmeans: warning: --landmarks applies with --approx nystroem only; ignored "
            f"(--landmarks is key 'landmarks' of config {tmp_path / 'run.yaml'})\n"
            in result.stderr)


@pytest.mark.parametrize("extra", [[], ["--refine", "hartigan"]])
def test_a_nystroem_fit_reports_the_starts_it_ran_and_no_kernel_matrix(data, extra):
    import json

    result = run(["fit", "--kernel", "rbf", data, "-k", "3", "--approx", "nystroem", "--threads", "1",
                  "--n-init", "6", "--no-model", "--json", *extra])
    assert result.exit_code == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["n_init"] == 6
    assert summary["n_completed"] == len(summary["restart_inertias"])
    assert "kernel matrix" not in result.stderr.replace("no kernel matrix", "")
    assert re.search(r"time: +Nyström features [0-9.]+ s \(no kernel matrix\)", result.stderr)
    if not extra:  # the explicit-feature engine screens the starts on a sample
        assert re.search(r"restarts: +6 screened on a sample of 300 points, "
                         rf"{summary['n_completed']} completed on all the data \(best: "
                         r"candidate #\d\)", result.stderr)
    else:
        assert re.search(r"restarts: +6 \(best: #\d\)", result.stderr)


def test_the_elkan_refusal_of_a_blocked_fit_offers_what_blocked_allows(data):
    result = run(["fit", data, "-k", "3", "--kernel", "sigmoid", "--storage", "blocked",
                  "--algorithm", "elkan", *FAST, "--no-model"])
    assert result.exit_code == 2
    assert result.stderr.rstrip().endswith(
        "the sigmoid kernel is not positive semidefinite in general. Use --algorithm lloyd, "
        "or --storage matrix with --psd-repair lingoes")
    follow = run(["fit", data, "-k", "3", "--kernel", "sigmoid", "--storage", "blocked",
                  "--psd-repair", "lingoes", *FAST, "--no-model"])
    assert follow.exit_code == 2  # why the advice no longer offers it alone
    matrix = run(["fit", data, "-k", "3", "--kernel", "sigmoid", "--storage", "matrix",
                  "--algorithm", "elkan", *FAST, "--no-model"])
    assert matrix.exit_code == 2 and matrix.stderr.rstrip().endswith(
        "Use --algorithm lloyd or --psd-repair lingoes")


def test_a_blocked_sigmoid_fit_warns_as_the_matrix_route_does(data):
    blocked = run(["fit", data, "-k", "3", "--kernel", "sigmoid", "--storage", "blocked",
                   *FAST, "--no-model"])
    assert blocked.exit_code == 0, blocked.stderr
    assert ("kkmeans: warning: the sigmoid kernel is not positive semidefinite in general, and "
            "a blocked fit holds no kernel matrix to check it" in blocked.stderr)
    matrix = run(["fit", data, "-k", "3", "--kernel", "sigmoid", "--storage", "matrix",
                  *FAST, "--no-model"])
    assert "kkmeans: warning: the kernel matrix is not positive semidefinite" in matrix.stderr
    rbf = run(["fit", "--kernel", "rbf", data, "-k", "3", "--storage", "blocked", *FAST, "--no-model"])
    assert "warning" not in rbf.stderr


def test_a_zarr_folder_in_one_process_says_where_it_is_read(tmp_path):
    (tmp_path / "x.zarr").mkdir()
    result = run(["fit", "--kernel", "rbf", tmp_path / "x.zarr", "-k", "2", "--no-model", "-q"])
    assert result.exit_code == 1
    assert result.stderr == (f"kkmeans: error: {tmp_path / 'x.zarr'}: is a folder, not a data "
                             f"file; a Zarr array is read by the workers of a cluster (--cluster "
                             f"local[:N] --approx nystroem), or save it as .npy or HDF5\n")
    (tmp_path / "plain").mkdir()
    result = run(["fit", "--kernel", "rbf", tmp_path / "plain", "-k", "2", "--no-model", "-q"])
    assert result.stderr == f"kkmeans: error: {tmp_path / 'plain'}: is a folder, not a data file\n"


def test_running_out_of_memory_suggests_what_the_kernel_accepts(tmp_path, monkeypatch):
    """A MemoryError during a fit is one line, exit 1, nothing written, and the remedies it
    names are options of the kernel at hand (knn takes neither --dtype float32 nor
    --approx nystroem: fewer neighbours)."""
    from kkmeans_cli.kernels import graph as kgraph

    def no_memory(*args, **kwargs):
        raise MemoryError

    monkeypatch.setattr(kgraph, "knn_graph", no_memory)
    data = write_csv(tmp_path / "d.csv", blobs(n=60, k=2)[0])
    result = run(["fit", data, "-k", "2", "-o", tmp_path / "m.npz"])
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr == ("kkmeans: error: not enough memory (try fewer rows; with a dense "
                             "kernel --dtype float32 or --approx nystroem; with knn fewer "
                             "--n-neighbors)\n")
    assert not (tmp_path / "m.npz").exists()


# -- what a name read from a file can do to a terminal ----------------------------------------
def test_printable_escapes_what_drives_a_terminal_and_nothing_else():
    from kkmeans_cli._text import one_line, printable

    for kept in ("data.csv", "naïve 日本", "東京\u3000都", "temp\xa0°C", "👩\u200d🔬"):
        assert printable(kept) == kept
    assert printable("x\x1b[2Jq") == "x\\x1b[2Jq"
    assert printable("a\nfake: line\u2028b\tc") == "a\\nfake: line\\u2028b\\tc"
    assert printable("d\x7fe\x9bf\u202eg") == "d\\x7fe\\x9bf\\u202eg"
    # a message's line breaks and runs of spaces are one space; a tab in a name is escaped
    assert one_line("a\n  b\tc\r\nd ") == "a b\\tc d"


def test_a_warning_of_many_lines_is_one_line():
    import io
    from contextlib import redirect_stderr

    from kkmeans_cli.cli.report import Reporter

    err = io.StringIO()
    with redirect_stderr(err):
        Reporter().warn('\nThe keyword...\n\nFile "x.py", line 3:\n\tdef f(): ...')
    assert err.getvalue() == ('kkmeans: warning: The keyword... File "x.py", line 3: '
                              '\\tdef f(): ...\n')


def test_names_from_files_cannot_clear_a_terminal_or_fake_a_line(tmp_path):
    """A column named with an escape sequence is shown escaped by info, and a path holding
    control characters is shown escaped in the error line."""
    (tmp_path / "e.csv").write_text("x\x1b[2Jq,y\n1,2\n3,4\n5,6\n7,8\n")
    fitted = run(["fit", tmp_path / "e.csv", "-k", "2", "-o", tmp_path / "e.npz", "--quiet"])
    assert fitted.exit_code == 0, fitted.stderr
    shown = run(["info", tmp_path / "e.npz"])
    assert shown.exit_code == 0 and "\x1b" not in shown.stdout
    assert re.search(r"^features: +2 \(x\\x1b\[2Jq, y\)$", shown.stdout, re.M)
    missing = tmp_path / "a\x1bc\x07b\tc.csv"      # ESC c resets a terminal
    failed = run(["fit", missing, "-k", "2", "--no-model"])
    assert failed.exit_code == 1
    assert failed.stderr == (f"kkmeans: error: {tmp_path}/a\\x1bc\\x07b\\tc.csv: no such "
                             f"file\n")


def test_report_rows_on_a_terminal_are_never_rich_markup():
    """On a terminal the report is a rich grid: a file named '[red]x.csv' was shown as a red
    'x.csv', and '[/x]' in a value ended the command with rich's MarkupError."""
    import io

    from rich.console import Console

    from kkmeans_cli.cli.report import Reporter

    reporter = Reporter()
    out = io.StringIO()
    reporter._console = Console(file=out, force_terminal=True, color_system=None, width=200)
    reporter.table("kkmeans fit", [("data", "d/[red]x.csv"), ("model", "a[/x]b\x1b[2J.npz")])
    assert [line.rstrip() for line in out.getvalue().splitlines()] == [
        "kkmeans fit", "data   d/[red]x.csv",
        "model  a[/x]b\\x1b[2J.npz"]
