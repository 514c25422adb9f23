"""Output paths: devices, FIFOs and standard output are written to directly, links are followed
and kept, modes follow the umask or stay, read-only files need --force, two outputs never share
a file, and a plot's format follows its extension. Each case checks the message, the exit code
and the files left behind."""
import os
import stat
import subprocess
import threading

import numpy as np
import pytest

from cli_helpers import FAST, blobs, kkmeans_command, labels_of, run, run_process, write_csv

OLD = b"OLD CONTENT\n"


@pytest.fixture
def work(tmp_path):
    X, _ = blobs(n=30, d=2, k=3)
    write_csv(tmp_path / "data.csv", X)
    result = run(["fit", tmp_path / "data.csv", "-k", "3", "-o", tmp_path / "model.npz",
                  *FAST, "--quiet"])
    assert result.exit_code == 0, result.stderr
    return tmp_path


def _listing(folder):
    return sorted(os.listdir(folder))


def _expected_labels(work):
    result = run(["predict", work / "model.npz", work / "data.csv", "--quiet"])
    assert result.exit_code == 0
    return result.stdout


def _null_device(folder):
    """A character device that discards writes: a private one made with mknod when we may
    (as root), else /dev/null itself (which a user who is not root cannot replace)."""
    if os.geteuid() == 0:
        path = folder / "null"
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
        return path
    return "/dev/null"


def _assert_one_error_line(result, code, message):
    assert result.exit_code == code, result.stderr
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("kkmeans: error: "), result.stderr
    assert message in lines[0], lines[0]
    assert result.stdout == ""


# -- devices, FIFOs, standard output ------------------------------------------------------------
def test_character_device_is_written_to_not_replaced(work):
    null = _null_device(work)
    before = os.stat(null)
    for args in (["fit", work / "data.csv", "-k", "3", *FAST, "-o", null, "--labels", null,
                  "--summary", null],
                 ["predict", work / "model.npz", work / "data.csv", "--labels", null,
                  "--distances", null]):
        result = run(args + ["--quiet"])
        assert result.exit_code == 0, result.stderr
        after = os.stat(null)
        assert stat.S_ISCHR(after.st_mode)
        assert (after.st_ino, after.st_rdev, after.st_mode) == (before.st_ino, before.st_rdev,
                                                                before.st_mode)
    assert not [name for name in os.listdir(work) if name.endswith(".tmp")]
    assert not [name for name in os.listdir(os.path.dirname(str(null))) if ".tmp" in name]


def test_fifo_is_written_to_not_replaced(work):
    fifo = work / "labels.fifo"
    os.mkfifo(fifo)
    received = []
    def read():
        with open(fifo, "rb") as stream:
            received.append(stream.read())

    reader = threading.Thread(target=read)
    reader.start()
    result = run(["predict", work / "model.npz", work / "data.csv", "--labels", fifo, "-q"])
    reader.join(timeout=60)
    assert result.exit_code == 0, result.stderr
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert received == [_expected_labels(work).encode()]
    assert _listing(work) == ["data.csv", "labels.fifo", "model.npz"]


def test_dev_stdout_is_written_to_directly(work):
    expected = _expected_labels(work)
    result = run_process(["predict", "model.npz", "data.csv", "--labels", "/dev/stdout", "-q"],
                         work)
    assert result.returncode == 0, result.stderr
    assert result.stdout == expected
    # Standard output redirected to a file: the file is written through the descriptor (not
    # truncated or replaced), after what the shell put there.
    out = work / "out.txt"
    out.write_bytes(b"first line\n")
    with open(out, "ab") as handle:
        proc = subprocess.run(kkmeans_command() + ["predict", "model.npz", "data.csv",
                                                   "--distances", "/dev/stdout",
                                                   "--labels", "labels.txt", "-q"],
                              cwd=work, stdout=handle, stderr=subprocess.PIPE, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = out.read_text().splitlines()
    assert lines[0] == "first line" and len(lines) == 31
    assert np.loadtxt(lines[1:], delimiter=",").shape == (30, 3)
    assert (work / "labels.txt").read_text() == expected
    assert not [name for name in os.listdir(work) if name.endswith(".tmp")]


# -- links and modes ------------------------------------------------------------------------
def test_symbolic_link_is_followed_and_kept(work):
    (work / "real").mkdir()
    (work / "links").mkdir()
    target = work / "real" / "labels.txt"
    target.write_bytes(OLD)
    os.chmod(target, 0o640)
    link = work / "links" / "labels.txt"
    os.symlink("../real/labels.txt", link)
    dangling = work / "links" / "summary.json"
    os.symlink("../real/summary.json", dangling)  # a link to a file not yet there
    result = run(["fit", work / "data.csv", "-k", "3", *FAST, "--no-model", "--labels", link,
                  "--summary", dangling, "-q"])
    assert result.exit_code == 0, result.stderr
    assert os.path.islink(link) and os.readlink(link) == "../real/labels.txt"
    assert os.path.islink(dangling) and (work / "real" / "summary.json").is_file()
    assert labels_of(target.read_text()).shape == (30,)
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o640
    assert _listing(work / "links") == ["labels.txt", "summary.json"]
    assert _listing(work / "real") == ["labels.txt", "summary.json"]


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o027, 0o640), (0o077, 0o600)])
def test_new_files_get_0666_less_the_umask(work, umask, mode):
    proc = subprocess.run(kkmeans_command() + ["fit", "data.csv", "-k", "3", *FAST, "-o",
                                               "new.npz", "--labels", "new.txt", "--summary",
                                               "new.json", "-q"],
                          cwd=work, capture_output=True, timeout=120,
                          preexec_fn=lambda: os.umask(umask))
    assert proc.returncode == 0, proc.stderr
    for name in ("new.npz", "new.txt", "new.json"):
        assert stat.S_IMODE(os.stat(work / name).st_mode) == mode, name


@pytest.mark.parametrize("mode", [0o600, 0o644, 0o664, 0o755])
def test_replaced_file_keeps_its_mode(work, mode):
    for name in ("labels.txt", "dist.csv"):
        (work / name).write_bytes(OLD)
        os.chmod(work / name, mode)
    result = run(["predict", work / "model.npz", work / "data.csv", "--labels",
                  work / "labels.txt", "--distances", work / "dist.csv", "-q"])
    assert result.exit_code == 0, result.stderr
    for name in ("labels.txt", "dist.csv"):
        assert (work / name).read_bytes() != OLD
        assert stat.S_IMODE(os.stat(work / name).st_mode) == mode


# -- read-only files ----------------------------------------------------------------------------
@pytest.mark.parametrize("command, option", [
    ("fit", "--labels"), ("fit", "-o"), ("fit", "--summary"), ("predict", "--labels"),
    ("predict", "--distances"), ("sweep", "--table"), ("sweep", "-o")])
def test_read_only_output_is_refused_without_force(work, command, option):
    ro = work / "ro.out"
    ro.write_bytes(OLD)
    os.chmod(ro, 0o444)
    args = {"fit": ["fit", work / "data.csv", "-k", "3", *FAST, "--labels", work / "lab.txt",
                    "-o", work / "new.npz"],
            "predict": ["predict", work / "model.npz", work / "data.csv", "--labels",
                        work / "lab.txt"],
            "sweep": ["sweep", work / "data.csv", "--k", "2..3", *FAST]}[command]
    if option == "-o" and command == "fit":
        args = args[:-2]
    before = _listing(work)
    result = run(args + [option, ro])
    _assert_one_error_line(result, 1, f"cannot write the ")
    assert result.stderr.rstrip().endswith(f"to {ro}: the file is read-only (use --force to "
                                           f"replace it)")
    assert ro.read_bytes() == OLD and _listing(work) == before  # nothing else written
    result = run(args + [option, ro, "--force", "-q"])
    assert result.exit_code == 0, result.stderr
    assert ro.read_bytes() != OLD
    assert stat.S_IMODE(os.stat(ro).st_mode) == 0o444  # replaced, mode kept


def test_force_is_documented(work):
    for command in ("fit", "predict", "sweep"):
        text = run([command, "--help"]).stdout
        assert "--force" in text and "read-only" in text


# -- two outputs, one file ------------------------------------------------------------------
@pytest.mark.parametrize("case", ["same", "relative", "symlink", "hardlink", "stdout",
                                  "predict", "sweep", "plot"])
def test_two_outputs_naming_one_file_is_a_usage_error(work, case, monkeypatch):
    monkeypatch.chdir(work)
    (work / "out.txt").write_bytes(OLD)
    os.symlink("out.txt", work / "link.txt")
    os.link(work / "out.txt", work / "hard.txt")
    fit = ["fit", "data.csv", "-k", "3", *FAST]
    args, message = {
        "same": (fit + ["-o", "out.txt", "--labels", "out.txt"],
                 "-o/--model and --labels both name 'out.txt'"),
        "relative": (fit + ["--no-model", "--labels", "out.txt", "--summary",
                            f"../{work.name}/out.txt"],
                     f"--summary and --labels both name '../{work.name}/out.txt' and "
                     f"'out.txt', the same file"),
        "symlink": (fit + ["-o", "link.txt", "--labels", work / "out.txt"],
                    f"-o/--model and --labels both name 'link.txt' and '{work / 'out.txt'}', "
                    f"the same file"),
        "hardlink": (fit + ["-o", "hard.txt", "--summary", "out.txt"],
                     "-o/--model and --summary both name 'hard.txt' and 'out.txt'"),
        "stdout": (fit + ["-o", "/dev/stdout"],
                   "-o/--model and --labels both name '/dev/stdout' and '-', the same file"),
        "predict": (["predict", "model.npz", "data.csv", "--labels", "out.txt",
                     "--distances", "./out.txt"],
                    "--labels and --distances both name 'out.txt' and './out.txt'"),
        "sweep": (["sweep", "data.csv", "--k", "2..3", *FAST, "-o", "out.txt", "--table",
                   "link.txt"], "-o/--model and --table both name 'out.txt' and 'link.txt'"),
        "plot": (fit + ["-o", "out.txt", "--plot", "out.txt"],
                 "-o/--model and --plot both name 'out.txt'"),
    }[case]
    before = _listing(work)
    result = run(args)
    _assert_one_error_line(result, 2, message)
    assert result.stderr.rstrip().endswith("give each output its own file")
    assert _listing(work) == before and (work / "out.txt").read_bytes() == OLD


def test_same_file_found_before_any_work(work):
    """The check runs before DATA is read: a missing DATA file is not even noticed."""
    result = run(["fit", work / "missing.csv", "-k", "3", "-o", work / "m.npz", "--labels",
                  work / "m.npz"])
    _assert_one_error_line(result, 2, "both name")


def test_null_device_may_take_several_outputs(work):
    null = _null_device(work)
    result = run(["predict", work / "model.npz", work / "data.csv", "--labels", null,
                  "--distances", null, "-q"])
    assert result.exit_code == 0, result.stderr
    assert stat.S_ISCHR(os.stat(null).st_mode)


# -- plot formats ---------------------------------------------------------------------------
@pytest.mark.parametrize("name, magic", [("p.png", b"\x89PNG"), ("p.PDF", b"%PDF"),
                                         ("p.svg", b"<?xml")])
def test_plot_format_follows_the_extension(work, name, magic):
    result = run(["fit", work / "data.csv", "-k", "3", *FAST, "--no-model", "--plot",
                  work / name, "-q"])
    assert result.exit_code == 0, result.stderr
    assert (work / name).read_bytes().startswith(magic)
    if name.endswith("svg"):
        assert b"<svg" in (work / name).read_bytes()[:2000]
    sweep_plot = work / ("s" + name)
    result = run(["sweep", work / "data.csv", "--k", "2..3", *FAST, "--plot", sweep_plot,
                  "-q"])
    assert result.exit_code == 0, result.stderr
    assert sweep_plot.read_bytes().startswith(magic)


@pytest.mark.parametrize("command", ["fit", "sweep"])
def test_unknown_plot_extension_is_refused_up_front(work, command):
    args = (["fit", work / "missing.csv", "-k", "3", "-o", work / "m.npz"] if command == "fit"
            else ["sweep", work / "missing.csv", "--k", "2..3", "-o", work / "m.npz"])
    before = _listing(work)
    result = run(args + ["--plot", work / "p.jpg"])
    _assert_one_error_line(result, 2, f"--plot {work / 'p.jpg'}: unknown plot format '.jpg'; "
                                      f"name the file .png, .pdf or .svg")
    assert _listing(work) == before


# -- relatives: inputs, folders, full disks -----------------------------------------------------
@pytest.mark.parametrize("args, message", [
    (["fit", "data.csv", "-k", "3", "-o", "data.csv"],
     "-o/--model names the input DATA ('data.csv'); writing there would replace it"),
    (["fit", "data.csv", "-k", "3", "--no-model", "--labels", "./data.csv"],
     "--labels names the input DATA ('data.csv' and './data.csv', the same file); writing "
     "there would replace it"),
    (["fit", "data.csv", "-k", "3", "--weights", "w.txt", "--summary", "w.txt"],
     "--summary names the input --weights ('w.txt'); writing there would replace it"),
    (["predict", "model.npz", "data.csv", "--labels", "model.npz"],
     "--labels names the input MODEL ('model.npz'); writing there would replace it"),
    (["sweep", "data.csv", "--k", "2..3", "--table", "data.csv"],
     "--table names the input DATA ('data.csv'); writing there would replace it"),
])
def test_an_output_never_replaces_an_input(work, monkeypatch, args, message):
    monkeypatch.chdir(work)
    np.savetxt(work / "w.txt", np.ones(30))
    saved = {name: (work / name).read_bytes() for name in os.listdir(work)}
    result = run(args)
    _assert_one_error_line(result, 2, message)
    assert {name: (work / name).read_bytes() for name in os.listdir(work)} == saved


def test_output_path_naming_a_folder(work):
    result = run(["fit", work / "data.csv", "-k", "3", "--no-model", "--labels",
                  str(work / "newdir") + "/"])
    _assert_one_error_line(result, 1, f"cannot write the labels to {work / 'newdir'}/: it "
                                      f"names a folder, not a file")
    assert not (work / "newdir").exists()


def test_full_device_is_a_one_line_error(work):
    result = run(["predict", work / "model.npz", work / "data.csv", "--labels", "/dev/full"])
    _assert_one_error_line(result, 1, "cannot write the labels to /dev/full: No space left on "
                                      "device")
    proc = subprocess.run(f"{' '.join(kkmeans_command())} predict model.npz data.csv -q "
                          f"> /dev/full", shell=True, cwd=work, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 1
    assert proc.stderr == ("kkmeans: error: cannot write the labels to standard output: No space "
                           "left on device\n")


def test_disk_full_while_staging_leaves_nothing(work, monkeypatch):
    import errno

    (work / "labels.txt").write_bytes(OLD)
    real_fsync = os.fsync

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    before = _listing(work)
    result = run(["predict", work / "model.npz", work / "data.csv", "--labels",
                  work / "labels.txt", "--distances", work / "d.csv"])
    monkeypatch.setattr(os, "fsync", real_fsync)
    _assert_one_error_line(result, 1, f"cannot write the labels to {work / 'labels.txt'}: No "
                                      f"space left on device")
    assert _listing(work) == before and (work / "labels.txt").read_bytes() == OLD


def test_symbolic_link_loop_is_refused(work):
    os.symlink("b", work / "a")
    os.symlink("a", work / "b")
    result = run(["predict", work / "model.npz", work / "data.csv", "--labels", work / "a"])
    _assert_one_error_line(result, 1, f"cannot write the labels to {work / 'a'}: its symbolic "
                                      f"links form a loop")
    assert os.readlink(work / "a") == "b" and os.readlink(work / "b") == "a"
