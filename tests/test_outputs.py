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

from helpers import (FAST, OLD, assert_one_error_line, kkmeans_command, labels_of, listing, run,
                     run_process)


def _expected_labels(fitted):
    result = run(["predict", fitted / "model.npz", fitted / "data.csv", "--quiet"])
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


# -- devices, FIFOs, standard output ------------------------------------------------------------
def test_character_device_is_written_to_not_replaced(fitted):
    null = _null_device(fitted)
    before = os.stat(null)
    for args in (["fit", "--kernel", "rbf", fitted / "data.csv", "-k", "3", *FAST, "-o", null, "--labels", null,
                  "--summary", null],
                 ["predict", fitted / "model.npz", fitted / "data.csv", "--labels", null,
                  "--distances", null]):
        result = run(args + ["--quiet"])
        assert result.exit_code == 0, result.stderr
        after = os.stat(null)
        assert stat.S_ISCHR(after.st_mode)
        assert (after.st_ino, after.st_rdev, after.st_mode) == (before.st_ino, before.st_rdev,
                                                                before.st_mode)
    assert not [name for name in os.listdir(fitted) if name.endswith(".tmp")]
    assert not [name for name in os.listdir(os.path.dirname(str(null))) if ".tmp" in name]


def test_fifo_is_written_to_not_replaced(fitted):
    fifo = fitted / "labels.fifo"
    os.mkfifo(fifo)
    received = []
    def read():
        with open(fifo, "rb") as stream:
            received.append(stream.read())

    reader = threading.Thread(target=read)
    reader.start()
    result = run(["predict", fitted / "model.npz", fitted / "data.csv", "--labels", fifo, "-q"])
    reader.join(timeout=60)
    assert result.exit_code == 0, result.stderr
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)
    assert received == [_expected_labels(fitted).encode()]
    assert listing(fitted) == ["data.csv", "labels.fifo", "model.npz"]


def test_dev_stdout_is_written_to_directly(fitted):
    expected = _expected_labels(fitted)
    result = run_process(["predict", "model.npz", "data.csv", "--labels", "/dev/stdout", "-q"],
                         fitted)
    assert result.returncode == 0, result.stderr
    assert result.stdout == expected
    # Standard output redirected to a file: the file is written through the descriptor (not
    # truncated or replaced), after what the shell put there.
    out = fitted / "out.txt"
    out.write_bytes(b"first line\n")
    with open(out, "ab") as handle:
        proc = subprocess.run(kkmeans_command() + ["predict", "model.npz", "data.csv",
                                                   "--distances", "/dev/stdout",
                                                   "--labels", "labels.txt", "-q"],
                              cwd=fitted, stdout=handle, stderr=subprocess.PIPE, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = out.read_text().splitlines()
    assert lines[0] == "first line" and len(lines) == 31
    assert np.loadtxt(lines[1:], delimiter=",").shape == (30, 3)
    assert (fitted / "labels.txt").read_text() == expected
    assert not [name for name in os.listdir(fitted) if name.endswith(".tmp")]


# -- links and modes ------------------------------------------------------------------------
def test_symbolic_link_is_followed_and_kept(fitted):
    (fitted / "real").mkdir()
    (fitted / "links").mkdir()
    target = fitted / "real" / "labels.txt"
    target.write_bytes(OLD)
    os.chmod(target, 0o640)
    link = fitted / "links" / "labels.txt"
    os.symlink("../real/labels.txt", link)
    dangling = fitted / "links" / "summary.json"
    os.symlink("../real/summary.json", dangling)  # a link to a file not yet there
    result = run(["fit", "--kernel", "rbf", fitted / "data.csv", "-k", "3", *FAST, "--no-model", "--labels", link,
                  "--summary", dangling, "-q"])
    assert result.exit_code == 0, result.stderr
    assert os.path.islink(link) and os.readlink(link) == "../real/labels.txt"
    assert os.path.islink(dangling) and (fitted / "real" / "summary.json").is_file()
    assert labels_of(target.read_text()).shape == (30,)
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o640
    assert listing(fitted / "links") == ["labels.txt", "summary.json"]
    assert listing(fitted / "real") == ["labels.txt", "summary.json"]


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o027, 0o640), (0o077, 0o600)])
def test_new_files_get_0666_less_the_umask(fitted, umask, mode):
    proc = subprocess.run(kkmeans_command() + ["fit", "--kernel", "rbf", "data.csv", "-k", "3", *FAST, "-o",
                                               "new.npz", "--labels", "new.txt", "--summary",
                                               "new.json", "-q"],
                          cwd=fitted, capture_output=True, timeout=120,
                          preexec_fn=lambda: os.umask(umask))
    assert proc.returncode == 0, proc.stderr
    for name in ("new.npz", "new.txt", "new.json"):
        assert stat.S_IMODE(os.stat(fitted / name).st_mode) == mode, name


@pytest.mark.parametrize("mode", [0o600, 0o644, 0o664, 0o755])
def test_replaced_file_keeps_its_mode(fitted, mode):
    for name in ("labels.txt", "dist.csv"):
        (fitted / name).write_bytes(OLD)
        os.chmod(fitted / name, mode)
    result = run(["predict", fitted / "model.npz", fitted / "data.csv", "--labels",
                  fitted / "labels.txt", "--distances", fitted / "dist.csv", "-q"])
    assert result.exit_code == 0, result.stderr
    for name in ("labels.txt", "dist.csv"):
        assert (fitted / name).read_bytes() != OLD
        assert stat.S_IMODE(os.stat(fitted / name).st_mode) == mode


# -- read-only files ----------------------------------------------------------------------------
@pytest.mark.parametrize("command, option", [
    ("fit", "--labels"), ("fit", "-o"), ("fit", "--summary"), ("predict", "--labels"),
    ("predict", "--distances"), ("sweep", "--table"), ("sweep", "-o")])
def test_read_only_output_is_refused_without_force(fitted, command, option):
    ro = fitted / "ro.out"
    ro.write_bytes(OLD)
    os.chmod(ro, 0o444)
    args = {"fit": ["fit", "--kernel", "rbf", fitted / "data.csv", "-k", "3", *FAST, "--labels", fitted / "lab.txt",
                    "-o", fitted / "new.npz"],
            "predict": ["predict", fitted / "model.npz", fitted / "data.csv", "--labels",
                        fitted / "lab.txt"],
            "sweep": ["sweep", "--kernel", "rbf", fitted / "data.csv", "--k", "2..3", *FAST]}[command]
    if option == "-o" and command == "fit":
        args = args[:-2]
    before = listing(fitted)
    result = run(args + [option, ro])
    assert_one_error_line(result, f"cannot write the ", code=1)
    assert result.stderr.rstrip().endswith(f"to {ro}: the file is read-only (use --force to "
                                           f"replace it)")
    assert ro.read_bytes() == OLD and listing(fitted) == before  # nothing else written
    result = run(args + [option, ro, "--force", "-q"])
    assert result.exit_code == 0, result.stderr
    assert ro.read_bytes() != OLD
    assert stat.S_IMODE(os.stat(ro).st_mode) == 0o444  # replaced, mode kept


def test_force_is_documented(fitted):
    for command in ("fit", "predict", "sweep"):
        text = run([command, "--help"]).stdout
        assert "--force" in text and "read-only" in text


# -- two outputs, one file ------------------------------------------------------------------
@pytest.mark.parametrize("case", ["same", "relative", "symlink", "hardlink", "stdout",
                                  "predict", "sweep", "plot"])
def test_two_outputs_naming_one_file_is_a_usage_error(fitted, case, monkeypatch):
    monkeypatch.chdir(fitted)
    (fitted / "out.txt").write_bytes(OLD)
    os.symlink("out.txt", fitted / "link.txt")
    os.link(fitted / "out.txt", fitted / "hard.txt")
    fit = ["fit", "--kernel", "rbf", "data.csv", "-k", "3", *FAST]
    args, message = {
        "same": (fit + ["-o", "out.txt", "--labels", "out.txt"],
                 "-o/--model and --labels both name 'out.txt'"),
        "relative": (fit + ["--no-model", "--labels", "out.txt", "--summary",
                            f"../{fitted.name}/out.txt"],
                     f"--summary and --labels both name '../{fitted.name}/out.txt' and "
                     f"'out.txt', the same file"),
        "symlink": (fit + ["-o", "link.txt", "--labels", fitted / "out.txt"],
                    f"-o/--model and --labels both name 'link.txt' and '{fitted / 'out.txt'}', "
                    f"the same file"),
        "hardlink": (fit + ["-o", "hard.txt", "--summary", "out.txt"],
                     "-o/--model and --summary both name 'hard.txt' and 'out.txt'"),
        "stdout": (fit + ["-o", "/dev/stdout"],
                   "-o/--model and --labels both name '/dev/stdout' and '-', the same file"),
        "predict": (["predict", "model.npz", "data.csv", "--labels", "out.txt",
                     "--distances", "./out.txt"],
                    "--labels and --distances both name 'out.txt' and './out.txt'"),
        "sweep": (["sweep", "--kernel", "rbf", "data.csv", "--k", "2..3", *FAST, "-o", "out.txt", "--table",
                   "link.txt"], "-o/--model and --table both name 'out.txt' and 'link.txt'"),
        "plot": (fit + ["-o", "out.txt", "--plot", "out.txt"],
                 "-o/--model and --plot both name 'out.txt'"),
    }[case]
    before = listing(fitted)
    result = run(args)
    assert_one_error_line(result, message, code=2)
    assert result.stderr.rstrip().endswith("give each output its own file")
    assert listing(fitted) == before and (fitted / "out.txt").read_bytes() == OLD


def test_same_file_found_before_any_work(fitted):
    """The check runs before DATA is read: a missing DATA file is not even noticed."""
    result = run(["fit", "--kernel", "rbf", fitted / "missing.csv", "-k", "3", "-o", fitted / "m.npz", "--labels",
                  fitted / "m.npz"])
    assert_one_error_line(result, "both name", code=2)


def test_null_device_may_take_several_outputs(fitted):
    null = _null_device(fitted)
    result = run(["predict", fitted / "model.npz", fitted / "data.csv", "--labels", null,
                  "--distances", null, "-q"])
    assert result.exit_code == 0, result.stderr
    assert stat.S_ISCHR(os.stat(null).st_mode)


# -- plot formats ---------------------------------------------------------------------------
@pytest.mark.parametrize("name, magic", [("p.png", b"\x89PNG"), ("p.PDF", b"%PDF"),
                                         ("p.svg", b"<?xml")])
def test_plot_format_follows_the_extension(fitted, name, magic):
    result = run(["fit", "--kernel", "rbf", fitted / "data.csv", "-k", "3", *FAST, "--no-model", "--plot",
                  fitted / name, "-q"])
    assert result.exit_code == 0, result.stderr
    assert (fitted / name).read_bytes().startswith(magic)
    if name.endswith("svg"):
        assert b"<svg" in (fitted / name).read_bytes()[:2000]
    sweep_plot = fitted / ("s" + name)
    result = run(["sweep", "--kernel", "rbf", fitted / "data.csv", "--k", "2..3", *FAST, "--plot", sweep_plot,
                  "-q"])
    assert result.exit_code == 0, result.stderr
    assert sweep_plot.read_bytes().startswith(magic)


@pytest.mark.parametrize("command", ["fit", "sweep"])
def test_unknown_plot_extension_is_refused_up_front(fitted, command):
    args = (["fit", "--kernel", "rbf", fitted / "missing.csv", "-k", "3", "-o", fitted / "m.npz"] if command == "fit"
            else ["sweep", "--kernel", "rbf", fitted / "missing.csv", "--k", "2..3", "-o", fitted / "m.npz"])
    before = listing(fitted)
    result = run(args + ["--plot", fitted / "p.jpg"])
    assert_one_error_line(result, f"--plot {fitted / 'p.jpg'}: unknown plot format '.jpg'; "
                                  f"name the file .png, .pdf or .svg", code=2)
    assert listing(fitted) == before


# -- relatives: inputs, folders, full disks -----------------------------------------------------
@pytest.mark.parametrize("args, message", [
    (["fit", "--kernel", "rbf", "data.csv", "-k", "3", "-o", "data.csv"],
     "-o/--model names the input DATA ('data.csv'); writing there would replace it"),
    (["fit", "--kernel", "rbf", "data.csv", "-k", "3", "--no-model", "--labels", "./data.csv"],
     "--labels names the input DATA ('data.csv' and './data.csv', the same file); writing "
     "there would replace it"),
    (["fit", "--kernel", "rbf", "data.csv", "-k", "3", "--weights", "w.txt", "--summary", "w.txt"],
     "--summary names the input --weights ('w.txt'); writing there would replace it"),
    (["predict", "model.npz", "data.csv", "--labels", "model.npz"],
     "--labels names the input MODEL ('model.npz'); writing there would replace it"),
    (["sweep", "--kernel", "rbf", "data.csv", "--k", "2..3", "--table", "data.csv"],
     "--table names the input DATA ('data.csv'); writing there would replace it"),
])
def test_an_output_never_replaces_an_input(fitted, monkeypatch, args, message):
    monkeypatch.chdir(fitted)
    np.savetxt(fitted / "w.txt", np.ones(30))
    saved = {name: (fitted / name).read_bytes() for name in os.listdir(fitted)}
    result = run(args)
    assert_one_error_line(result, message, code=2)
    assert {name: (fitted / name).read_bytes() for name in os.listdir(fitted)} == saved


def test_output_path_naming_a_folder(fitted):
    result = run(["fit", "--kernel", "rbf", fitted / "data.csv", "-k", "3", "--no-model", "--labels",
                  str(fitted / "newdir") + "/"])
    assert_one_error_line(result, f"cannot write the labels to {fitted / 'newdir'}/: it "
                                  f"names a folder, not a file", code=1)
    assert not (fitted / "newdir").exists()


def test_names_up_to_the_file_systems_longest_are_written(fitted):
    """The staging file .NAME.XXXXXXXX.tmp adds 14 bytes: names of 242-255 bytes, which the
    file system takes, were refused after the fit ('File name too long'). Now written; a
    name longer than the longest is refused before any work, nothing written."""
    longest = os.pathconf(fitted, "PC_NAME_MAX")
    want = _expected_labels(fitted)
    for name in ("m" * (longest - 13), "n" * longest, "é" * (longest // 2)):
        result = run(["predict", fitted / "model.npz", fitted / "data.csv", "--quiet",
                      "--labels", fitted / name])
        assert result.exit_code == 0, result.stderr
        assert (fitted / name).read_text() == want
        fit = run(["fit", "--kernel", "rbf", fitted / "data.csv", "-k", "3", *FAST, "-q",
                   "-o", fitted / (name[:-4] + ".npz"), "--labels", os.devnull])
        assert fit.exit_code == 0, fit.stderr
    before = listing(fitted)
    result = run(["fit", "--kernel", "rbf", fitted / "data.csv", "-k", "3", "--no-model",
                  "--labels", fitted / ("x" * (longest + 1))])
    assert_one_error_line(result, f"the name is longer than the {longest} bytes a file name "
                                  f"may have there", code=1)
    assert listing(fitted) == before


def test_a_name_cut_short_keeps_whole_characters(tmp_path):
    """The staging and backup names of a long output name are cut at a character's start:
    a name of 127 'é' (254 bytes) gave a staging name ending in half of one (invalid UTF-8,
    which some file systems refuse)."""
    from kkmeans_cli.io.outputs import _temporary_name

    longest = os.pathconf(tmp_path, "PC_NAME_MAX")
    for base in ("é" * 127, "a" + "€" * 84, "m" * 300, "short"):
        for kind in ("tmp", "bak"):
            name = _temporary_name(str(tmp_path), base, kind)
            raw = os.fsencode(name)
            assert len(raw) <= longest and name.endswith(f".{kind}")
            stem = raw.decode("utf-8")[1:-13]                      # valid UTF-8, else raises
            assert base.startswith(stem) and len(stem) >= min(len(base), 1)


def test_full_device_is_a_one_line_error(fitted):
    result = run(["predict", fitted / "model.npz", fitted / "data.csv", "--labels", "/dev/full"])
    assert_one_error_line(result, "cannot write the labels to /dev/full: No space left on "
                                  "device", code=1)
    proc = subprocess.run(f"{' '.join(kkmeans_command())} predict model.npz data.csv -q "
                          f"> /dev/full", shell=True, cwd=fitted, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 1
    assert proc.stderr == ("kkmeans: error: cannot write the labels to standard output: No space "
                           "left on device\n")


def test_disk_full_while_staging_leaves_nothing(fitted, monkeypatch):
    import errno

    (fitted / "labels.txt").write_bytes(OLD)
    real_fsync = os.fsync

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    before = listing(fitted)
    result = run(["predict", fitted / "model.npz", fitted / "data.csv", "--labels",
                  fitted / "labels.txt", "--distances", fitted / "d.csv"])
    monkeypatch.setattr(os, "fsync", real_fsync)
    assert_one_error_line(result, f"cannot write the labels to {fitted / 'labels.txt'}: No "
                                  f"space left on device", code=1)
    assert listing(fitted) == before and (fitted / "labels.txt").read_bytes() == OLD


def test_symbolic_link_loop_is_refused(fitted):
    os.symlink("b", fitted / "a")
    os.symlink("a", fitted / "b")
    result = run(["predict", fitted / "model.npz", fitted / "data.csv", "--labels", fitted / "a"])
    assert_one_error_line(result, f"cannot write the labels to {fitted / 'a'}: its symbolic "
                                  f"links form a loop", code=1)
    assert os.readlink(fitted / "a") == "b" and os.readlink(fitted / "b") == "a"
