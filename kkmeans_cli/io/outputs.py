"""Writing outputs.

Every output of a command, standard output included, goes through one
:class:`AtomicOutputs`: files are staged as temporary files beside their destination, what goes
to a descriptor, device or FIFO is held, and all of it is committed together at the end, after
every output is known to have been written (docs/cli.md). :func:`check_outputs` refuses, before
any work, an output that cannot be written or that names an input (a file DATA's glob matches
included).
"""
import errno
import fnmatch
import glob
import io
import json
import os
import select
import stat
import sys
import tempfile
from dataclasses import dataclass

import numpy as np

from .._signals import committed, deferred, pending
from .._streams import CLOSED_STREAMS
from ..errors import BrokenPipeOutput, OutputError, UsageError
from .readers import STDIN, is_glob, split_hdf5_spec


@dataclass
class OutputTarget:
    """Where an output path really goes.

    Attributes
    ----------
    kind : {'fd', 'special', 'file'}
        ``fd``: an open file descriptor (``-``, ``/dev/stdout``, ``/dev/fd/N``), written to as
        it is; ``special``: an existing character device or FIFO (``/dev/null``, a named pipe),
        opened and written to directly; ``file``: a regular file (existing or new), replaced
        atomically through a temporary file in its folder.
    path : str
        The path as given (for messages).
    real : str or None
        For ``special`` and ``file``: the path with every symbolic link resolved (a link is
        followed, its target written, the link itself kept).
    fd : int or None
        For ``fd``: the descriptor.
    status : os.stat_result or None
        Of the existing target.
    """

    kind: str
    path: str
    real: str = None
    fd: int = None
    status: os.stat_result = None

    def identity(self):
        """Keys that are equal for two outputs that would write the same file (empty for the
        null device, where any number of outputs may go)."""
        keys = set()
        if self.kind == "fd":
            keys.add(("fd", self.fd))
        elif self.real is not None:
            keys.add(("path", self.real))
        st = self.status
        if st is not None:
            if stat.S_ISCHR(st.st_mode) and st.st_rdev == _null_device():
                return set()
            keys.add(("inode", st.st_dev, st.st_ino))
        return keys


def _null_device():
    try:
        return os.stat(os.devnull).st_rdev
    except OSError:  # pragma: no cover - every POSIX system has one
        return None


def _fd_of_stream(name):
    """The descriptor and stat of ``sys.stdout``/``sys.stderr`` (None when it has none, as
    under click's test runner)."""
    stream = getattr(sys, name)
    try:
        fd = stream.fileno()
        return fd, os.fstat(fd)
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return None, None


def _fd_path(path):
    """The descriptor N when ``path`` (after following its links) is ``/dev/stdout``,
    ``/dev/stderr``, ``/dev/fd/N`` or ``/proc/self/fd/N``; else None."""
    own = os.path.realpath("/proc/self/fd")
    names = {"/dev/stdout": 1, "/dev/stderr": 2}
    current = os.path.abspath(path)
    for _ in range(40):  # the kernel's own limit on a chain of links
        if current in names:
            return names[current]
        base = os.path.basename(current)
        if base.isdigit() and os.path.realpath(os.path.dirname(current)) in (
                own, "/dev/fd", "/proc/self/fd"):
            return int(base)
        if not os.path.islink(current):
            return None
        current = os.path.normpath(os.path.join(os.path.dirname(current),
                                                os.readlink(current)))
    return None


def output_target(path):
    """Classify an output path (see :class:`OutputTarget`); no checks beyond that."""
    if path == STDIN:
        fd, st = _fd_of_stream("stdout")
        return OutputTarget("fd", path, fd=1, status=st)
    fd = _fd_path(path)
    if fd is not None:
        if fd in (1, 2):
            _, st = _fd_of_stream("stdout" if fd == 1 else "stderr")
        else:
            try:
                st = os.fstat(fd)
            except OSError:
                st = None
        return OutputTarget("fd", path, fd=fd, status=st)
    real = os.path.realpath(path)
    try:
        st = os.stat(real)
    except OSError:
        return OutputTarget("file", path, real=real)
    if stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode):
        return OutputTarget("special", path, real=real, status=st)
    return OutputTarget("file", path, real=real, status=st)


def check_output_path(path, what, force=False):
    """Fail early, before any work, when ``path`` cannot be written.

    Parameters
    ----------
    path : str
        Output file (``-`` is stdout and always fine).
    what : str
        What goes there, for messages (``"model"``, ``"labels"``).
    force : bool
        Replace an existing read-only file (``--force``); refused otherwise.

    Returns
    -------
    OutputTarget
    """
    target = output_target(path)
    fail = f"cannot write the {what} to {_shown(path)}"
    if path == "":
        raise OutputError(f"cannot write the {what}: the path is empty")
    if path.endswith(os.sep) or path in (".", ".."):
        raise OutputError(f"{fail}: it names a folder, not a file")
    try:
        os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise OutputError(f"{fail}: its symbolic links form a loop") from None
    if target.kind == "fd":
        if target.fd in (1, 2) and (target.fd in CLOSED_STREAMS or getattr(
                sys, "stdout" if target.fd == 1 else "stderr") is None):
            raise OutputError(f"{fail}: standard {'output' if target.fd == 1 else 'error'} "
                              f"is closed")
        if target.fd not in (1, 2) and target.status is None:
            raise OutputError(f"{fail}: file descriptor {target.fd} is not open")
        return target
    st = target.status
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise OutputError(f"{fail}: it is a folder")
    if st is not None and not (stat.S_ISREG(st.st_mode) or target.kind == "special"):
        raise OutputError(f"{fail}: it is not a regular file, FIFO or character device")
    if target.kind == "special":
        if not os.access(target.real, os.W_OK):
            raise OutputError(f"{fail}: permission denied")
        return target
    shown = path if target.real == os.path.abspath(path) else f"{path} (-> {target.real})"
    folder = os.path.dirname(target.real)
    existing = _existing_ancestor(folder)
    if not os.path.isdir(existing):
        raise OutputError(f"{fail}: {existing} is a file, not a folder")
    if existing != folder:
        raise OutputError(f"cannot write the {what} to {shown}: folder {folder} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise OutputError(f"cannot write the {what} to {shown}: folder {folder} is not "
                          f"writable")
    longest = _longest_name(folder)
    if len(os.fsencode(os.path.basename(target.real))) > longest:
        raise OutputError(f"{fail}: the name is longer than the {longest} bytes a file name "
                          f"may have there")
    if st is not None and not force and (not st.st_mode & 0o222
                                         or not os.access(target.real, os.W_OK)):
        raise OutputError(f"cannot write the {what} to {shown}: the file is read-only "
                          f"(use --force to replace it)")
    return target


def _temporary_name(folder, base, kind="tmp"):
    """``.BASE.XXXXXXXX.tmp`` (``kind``: also ``bak``), a file beside the output ``base`` in
    ``folder``: its staging file, or the backup of the file it replaces. BASE is cut short
    where the whole would pass the folder's longest name (NAME_MAX, 255 bytes on most file
    systems), at a character's start, so that any name the file system takes can be written
    and replaced together with the others."""
    suffix = f".{os.urandom(4).hex()}.{kind}"
    raw = os.fsencode(base)
    cut = max(1, _longest_name(folder) - 1 - len(suffix))
    if cut < len(raw):
        while cut > 1 and raw[cut] & 0xC0 == 0x80:     # not inside a UTF-8 character
            cut -= 1
        raw = raw[:cut]
    return "." + os.fsdecode(raw) + suffix


def _longest_name(folder):
    """The longest file name, in bytes, that ``folder``'s file system takes (NAME_MAX)."""
    try:
        return os.pathconf(folder or ".", "PC_NAME_MAX")
    except (OSError, ValueError, AttributeError):
        return 255


def check_outputs(outputs, force=False, inputs=()):
    """Check every output of a command before any work (see :func:`check_output_path`).

    Parameters
    ----------
    outputs : iterable of (path or None, what, option)
        ``option`` names the command-line option for messages (``"--labels"``); outputs
        whose path is None are not written.
    force : bool
    inputs : iterable of (path or None, option)
        Files the command reads (DATA, MODEL, ``--weights``...): no output may replace one.

    Raises
    ------
    UsageError
        Two outputs name the same file (also through links, ``..`` or ``/dev/stdout``), or an
        output names an input.
    OutputError
        An output cannot be written.
    """
    seen = {}
    patterns = []
    given = [(path, what, option) for path, what, option in outputs if path is not None]
    for spec, option in inputs:
        if spec is None or spec == STDIN:
            continue
        path = split_hdf5_spec(spec)[0]
        if is_glob(path) and not os.path.lexists(path):
            # DATA as a glob: every file it matches now is an input (a part of DATA), and so
            # is any file an output would add to it (the next run would read that as data).
            patterns.append((path, option))
            matched = sorted(glob.glob(path))
        else:
            matched = [path]
        for name in matched:
            target = output_target(name)
            if target.kind == "fd" or target.status is None:
                continue  # a missing input is reported when it is read
            for key in target.identity():
                seen.setdefault(key, (name, option, "input"))
    for path, what, option in given:
        target = output_target(path)
        for key in target.identity():
            if key in seen:
                other_path, other_option, role = seen[key]
                same = (f"'{path}'" if path == other_path
                        else f"'{other_path}' and '{path}', the same file")
                if role == "input":
                    raise UsageError(f"{option} names the input {other_option} ({same}); "
                                     f"writing there would replace it")
                raise UsageError(f"{other_option} and {option} both name {same}; give each "
                                 f"output its own file")
            seen[key] = (path, option, "output")
        for pattern, input_option in patterns:
            if target.kind == "file" and _glob_matches(pattern, path):
                raise UsageError(f"{option} {path} is matched by {input_option} '{pattern}': "
                                 f"the next run would read it as data; write it outside the "
                                 f"glob")
    for path, what, _ in given:
        check_output_path(path, what, force)


def _glob_matches(pattern, path):
    """Whether ``glob.glob(pattern)`` would list ``path`` once it exists: each component of
    the path (as given, and with its links resolved) matches the pattern's, and a hidden
    name only a pattern that starts with a dot (glob's rule)."""
    def parts(p):
        return os.path.abspath(p).split(os.sep)

    literal = pattern.split("*")[0].split("?")[0].split("[")[0]
    head = os.path.dirname(literal)
    patterns = {tuple(parts(pattern))}
    if head:
        real_head = os.path.realpath(head)
        patterns.add(tuple(parts(os.path.join(real_head, os.path.relpath(pattern, head)))))
    paths = {tuple(parts(path)),
             tuple(parts(os.path.join(os.path.realpath(os.path.dirname(os.path.abspath(path))),
                                      os.path.basename(path))))}
    for want in patterns:
        for have in paths:
            if len(want) == len(have) and all(
                    fnmatch.fnmatchcase(h, w) and (not h.startswith(".") or w.startswith("."))
                    for w, h in zip(want, have)):
                return True
    return False


def _existing_ancestor(folder):
    """``folder`` or its nearest ancestor that exists."""
    while not os.path.exists(folder) and os.path.dirname(folder) != folder:
        folder = os.path.dirname(folder)
    return folder


_DIRECT_BUFFER = 32 * 2 ** 20  # staged in memory up to this, then in a temporary file


class AtomicOutputs:
    """All the outputs of one command, committed together after every one of them is known
    to have been written, or none of them (docs/cli.md, "Outputs appear whole or not at
    all").

    Use as a context manager; ``open(path, what)`` returns a binary file object for each
    output, standard output (``-``) included. A regular file is staged as a temporary file
    in the folder of its real path (a symbolic link is followed and kept); what goes to a
    descriptor (standard output, ``/dev/stdout``, ``/dev/fd/N``), a character device such as
    ``/dev/null`` or a FIFO is held in memory (or an anonymous temporary file) and written to
    it directly. When the block ends without an exception the commit runs in three steps:

    1. every staged file is flushed, given its mode and synced to the disk;
    2. what goes to devices and FIFOs, then to descriptors, is written there and flushed;
    3. the staged files are renamed onto their destinations, signals held meanwhile; when a
       rename fails (or a signal came) the destinations already replaced are put back from
       hard links made just before.

    A failure in any step (a full disk, a closed standard output, a reader that went away)
    or an exception or signal before the commit removes every temporary file and leaves
    every existing destination as it was; only bytes already sent to a descriptor, device
    or FIFO in step 2 cannot be taken back.

    A new file gets mode ``0666 & ~umask`` like any file a program creates; a replaced file
    keeps its mode (and, for root, its owner). An existing read-only file is refused unless
    ``force``.

    Parameters
    ----------
    force : bool
        Replace existing read-only files.
    """

    def __init__(self, force=False):
        self.force = force
        self._staged = []
        self._identities = {}

    def __enter__(self):
        return self

    def open(self, path, what):
        """A writable binary file that becomes ``path`` when the block succeeds."""
        target = check_output_path(path, what, self.force)
        for key in target.identity():
            if key in self._identities:
                raise UsageError(f"the {self._identities[key]} and the {what} both go to "
                                 f"{_shown(path)}; give each output its own file")
            self._identities[key] = what
        fail = f"cannot write the {what} to {_shown(path)}"
        if target.kind != "file":
            handle = tempfile.SpooledTemporaryFile(max_size=_DIRECT_BUFFER)
            self._staged.append(_Staged(handle, None, target, what))
            return _GuardedFile(handle, fail)
        folder = os.path.dirname(target.real)
        base = os.path.basename(target.real)
        with deferred():  # a temporary file is known for removal as soon as it exists
            while True:
                tmp = os.path.join(folder, _temporary_name(folder, base))
                try:
                    # 0o666 and the umask: the mode any newly created file gets.
                    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
                    break
                except FileExistsError:
                    continue
                except OSError as exc:
                    raise OutputError(f"{fail}: {_reason(exc)}") from None
            handle = os.fdopen(fd, "wb")
            self._staged.append(_Staged(handle, tmp, target, what))
        return _GuardedFile(handle, fail)

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None:
            self._discard()
            return False
        try:
            self._commit()
        except BaseException:
            self._discard()
            raise
        return False

    def _commit(self):
        files = [entry for entry in self._staged if entry.tmp is not None]
        direct = [entry for entry in self._staged if entry.tmp is None]
        for entry in files:
            _finish_file(entry)
        # Devices and FIFOs first, standard output and other descriptors last: a device that
        # refuses its bytes (/dev/full) leaves nothing printed.
        for entry in sorted(direct, key=lambda entry: entry.target.kind == "fd"):
            with entry.handle:
                entry.handle.seek(0)
                _write_direct(entry.handle, entry.target, entry.what)
        with deferred():
            if _rename_all(files):
                self._staged = []
                committed()

    def _discard(self):
        with deferred():
            for entry in self._staged:
                try:
                    entry.handle.close()
                except (OSError, ValueError):
                    pass  # a full disk refuses the buffered bytes again: the file goes anyway
                if entry.tmp is not None:
                    try:
                        os.unlink(entry.tmp)
                    except OSError:
                        pass
            self._staged = []


@dataclass
class _Staged:
    handle: object
    tmp: str       # the temporary file of a regular file; None for a direct output
    target: OutputTarget
    what: str


def _shown(path):
    """An output path for messages (``-`` is standard output)."""
    return "standard output" if path == STDIN else path


def _reason(err):
    """The reason of an OSError for a message: its text, without the file name repeated."""
    return err.strerror or str(err) or type(err).__name__


def _finish_file(entry):
    """Flush a staged file, give it the mode (and owner) of the file it replaces, sync it to
    the disk and close it."""
    handle, target = entry.handle, entry.target
    try:
        handle.flush()
        if target.status is not None:  # a replaced file keeps its mode and owner
            os.fchmod(handle.fileno(), stat.S_IMODE(target.status.st_mode))
            if os.geteuid() == 0 and (target.status.st_uid, target.status.st_gid) != (
                    os.geteuid(), os.getegid()):
                try:
                    os.fchown(handle.fileno(), target.status.st_uid, target.status.st_gid)
                except OSError:
                    pass
        os.fsync(handle.fileno())
        handle.close()
    except OSError as err:
        raise OutputError(f"cannot write the {entry.what} to {_shown(target.path)}: "
                          f"{_reason(err)}") from None


def _rename_all(files):
    """Rename every staged file onto its destination, or none: a destination that exists is
    first linked to a backup name, so a failed rename (or a signal held meanwhile) puts the
    ones already replaced back. Files whose backup cannot be made (no hard links there) go
    last. Returns True when all are in place, False when a held signal undid them."""
    plans = []
    for entry in files:
        real = entry.target.real
        backup = None
        existed = os.path.lexists(real)
        if existed:
            folder = os.path.dirname(real)
            backup = os.path.join(folder, _temporary_name(folder, os.path.basename(real),
                                                          "bak"))
            try:
                os.link(real, backup)
            except OSError:
                backup = None
        plans.append((entry, existed, backup))
    plans.sort(key=lambda plan: plan[1] and plan[2] is None)
    done = []
    try:
        for entry, existed, backup in plans:
            try:
                os.replace(entry.tmp, entry.target.real)
            except OSError as err:
                raise OutputError(f"cannot write the {entry.what} to "
                                  f"{_shown(entry.target.path)}: {_reason(err)}") from None
            done.append((entry, existed, backup))
            entry.tmp = None
        if pending() is not None:  # a signal came: the command did not succeed
            raise _Undo()
        return True
    except BaseException as exc:
        for entry, existed, backup in reversed(done):
            try:
                if backup is not None:
                    os.replace(backup, entry.target.real)
                elif not existed:
                    os.unlink(entry.target.real)
            except OSError:
                pass
        if not isinstance(exc, _Undo):
            raise
        return False
    finally:
        for _, _, backup in plans:
            if backup is not None and os.path.lexists(backup):
                try:
                    os.unlink(backup)
                except OSError:
                    pass


class _Undo(Exception):
    """Internal: a signal held during the renames undoes them."""


class _GuardedFile:
    """A staged output whose errors (a full disk on a write, a flush, a seek) are one-line
    OutputErrors naming the output."""

    def __init__(self, handle, fail):
        self._handle = handle
        self._fail = fail

    def write(self, data):
        try:
            return self._handle.write(data)
        except OSError as err:
            raise OutputError(f"{self._fail}: {_reason(err)}") from None

    def __getattr__(self, name):
        attr = getattr(self._handle, name)
        if not callable(attr):
            return attr

        def guarded(*args, **kwargs):
            try:
                return attr(*args, **kwargs)
            except OutputError:
                raise
            except OSError as err:
                raise OutputError(f"{self._fail}: {_reason(err)}") from None

        return guarded

    def __repr__(self):
        return f"<staged output: {self._fail.split(' to ', 1)[-1]}>"


def _write_direct(source, target, what):
    """Copy the staged bytes to a descriptor, character device or FIFO as they are, and
    flush them; a reader that went away is :class:`BrokenPipeOutput`."""
    fail = f"cannot write the {what} to {_shown(target.path)}"
    try:
        if target.kind == "fd" and target.fd in (1, 2):
            _write_stream(source, target.fd)
            return
        close = target.kind != "fd"
        fd = target.fd if target.kind == "fd" else os.open(target.real, os.O_WRONLY)
        try:
            _copy(source, lambda chunk: _write_all(fd, chunk))
        finally:
            if close:
                os.close(fd)
    except BrokenPipeError:
        raise BrokenPipeOutput(f"{fail}: its reader went away (broken pipe)") from None
    except OSError as exc:
        if isinstance(exc, OutputError):
            raise
        raise OutputError(f"{fail}: {_reason(exc)}") from None


def _write_stream(source, fd):
    """Standard output or error, through ``sys.stdout``/``sys.stderr`` (click's test runner
    replaces them): flushed first (what was printed before stays before) and after."""
    stream = sys.stdout if fd == 1 else sys.stderr
    if stream is None or fd in CLOSED_STREAMS:
        raise OSError(errno.EBADF, f"standard {'output' if fd == 1 else 'error'} is closed")
    stream.flush()
    binary = getattr(stream, "buffer", None)
    if binary is not None:
        # Unbuffered (python -u, PYTHONUNBUFFERED) the binary layer is the raw file, whose
        # write may take part of a chunk (a full pipe): the rest is written until all is.
        _copy(source, lambda chunk: _write_all_with(binary.write, chunk, binary))
        binary.flush()
    else:
        stream.write(source.read().decode())
        stream.flush()


def _copy(source, write):
    while True:
        chunk = source.read(2 ** 20)
        if not chunk:
            return
        write(chunk)


def _write_all(fd, data):
    _write_all_with(lambda view: os.write(fd, view), data)


def _write_all_with(write, data, stream=None):
    """``write`` until all of ``data`` is written: a raw write may take part of it, or none
    (None: a non-blocking ``stream`` is full, and the write waits until it takes more)."""
    view = memoryview(data)
    while view:
        written = write(view)
        if written is None:
            select.select([], [stream.fileno()], [])
            continue
        view = view[written:]


def format_labels(labels, kept=None):
    """Labels one per line; rows that were dropped (``kept`` False) get ``-1``.

    Parameters
    ----------
    labels : array of int, shape (n_kept,)
    kept : array of bool, shape (n_rows,), optional

    Returns
    -------
    str
    """
    labels = np.asarray(labels, dtype=np.int64)
    if kept is not None and not np.all(kept):
        full = np.full(kept.shape[0], -1, dtype=np.int64)
        full[kept] = labels
        labels = full
    if labels.size == 0:
        return ""
    return "\n".join(map(str, labels.tolist())) + "\n"


def format_json(obj):
    """Indented JSON text ending in a newline."""
    return json.dumps(obj, indent=2, allow_nan=False) + "\n"


def write_matrix(handle, path, M):
    """Write a matrix to an open binary file: ``.npy`` by suffix, else CSV text."""
    if path.lower().endswith(".npy"):
        np.save(handle, M, allow_pickle=False)
        return
    text = io.StringIO()
    np.savetxt(text, M, delimiter=",", fmt="%.10g")
    handle.write(text.getvalue().encode())
