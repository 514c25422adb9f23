"""The one handler of the signals that end a command: SIGINT (Ctrl-C), SIGTERM, SIGHUP and
SIGQUIT (Ctrl-\\), and the other signals whose default action ends a process (SIGUSR1, SIGUSR2,
SIGALRM, SIGXCPU, ...) while no one else handles them.

While a command runs (:func:`handled`), each of them raises :class:`Interrupted` in the main
thread, a ``KeyboardInterrupt``, so every library that stops on Ctrl-C (Dask's client among
them) stops the same way on the others, the ``with`` blocks unwind and the outputs staged by
``io.outputs.AtomicOutputs`` are removed. The command line reports it on one line and exits
with 128 + the signal's number (130, 143, 129, 131, ...), as a shell reports a program the
signal ended.

Once the outputs are committed (:func:`committed`) the command has done its work: a signal
that comes while it prints its report is noted and the command still ends with exit code 0, so
that a non-zero exit code always means that no output was changed; a second signal then ends
it at once. After the command, while the process ends (the interpreter's teardown takes a
fraction of a second), the signals are ignored (:func:`ignored_to_the_end`): the exit code is
decided, and a signal's default action there would end a complete run with 143.

A signal may reach a thread other than the main one (the BLAS, OpenMP and Dask threads), or
the main thread just before it blocks in a system call (reading a FIFO, writing to a pipe): its
Python handler then waits until the main thread next runs Python code, which may be never. A
watchdog thread sees every signal through ``signal.set_wakeup_fd`` and, while the handler has
not run, nudges the main thread with SIGURG (whose handler does nothing), which ends the
blocking call with EINTR so that the handler runs.

A signal the process was started with ignored (``nohup`` ignores SIGHUP, a shell's background
job SIGINT) stays ignored. Inside :func:`deferred` (the renames that commit the outputs, the
removal of staged files) a signal is held, and raised when the outermost such block ends.
"""
import contextlib
import os
import signal
import threading

#: The signals that end a command, by name (those this platform has).
SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT")
                if hasattr(signal, name))
#: Other signals whose default action ends the process (without any clean-up): handled the
#: same way while nothing else in the process has a handler for them.
IF_DEFAULT = tuple(getattr(signal, name) for name in ("SIGUSR1", "SIGUSR2", "SIGALRM",
                                                       "SIGXCPU", "SIGVTALRM", "SIGPROF")
                   if hasattr(signal, name))


class Interrupted(KeyboardInterrupt):
    """A signal ended the command (``signum``: which one)."""

    def __init__(self, signum):
        super().__init__(int(signum))
        self.signum = int(signum)

    @property
    def name(self):
        return signal.Signals(self.signum).name


def exit_code(exc):
    """128 + the signal's number (130 for Ctrl-C, and for a plain ``KeyboardInterrupt``)."""
    return 128 + getattr(exc, "signum", signal.SIGINT)


#: The signal that wakes the main thread up (its handler does nothing).
NUDGE = getattr(signal, "SIGURG", None)

_depth = 0          # nesting of deferred() blocks
_seen = 0           # signals the handler has run for
_pending = None     # the first signal received inside them
_done = False       # the outputs are committed
_late = None        # a signal received after that
_raised = None      # the signal whose Interrupted the handler raised (raised())


def _handler(signum, frame):
    global _pending, _late, _seen
    _seen += 1
    if _depth:
        if _pending is None:
            _pending = signum
        return
    if _done and _late is None:
        _late = signum
        return
    _raise(signum)


def _raise(signum):
    global _raised
    _raised = signum
    raise Interrupted(signum)


def raised():
    """The :class:`Interrupted` a signal raised in :func:`handled`'s block, or None. Where an
    error other than it reaches the command's end, the signal was turned into that error on
    the way (an import turns a ``KeyboardInterrupt`` raised while an extension module
    initializes into ``ImportError: initialization failed``): the signal ended the command
    all the same."""
    return None if _raised is None else Interrupted(_raised)


def committed():
    """The command's outputs are in place: from now on a first signal does not end it (see
    the module's text)."""
    global _done
    _done = True


@contextlib.contextmanager
def handled():
    """Install the handler for the block (in the main thread; elsewhere nothing changes)
    and put back the previous handlers after it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    global _done, _late, _pending, _raised
    _done, _late, _pending, _raised = False, None, None, None
    previous = {}
    for signum in SIGNALS + IF_DEFAULT:
        old = signal.getsignal(signum)
        if old == signal.SIG_IGN:
            continue  # nohup, a background job: the user asked for it to be ignored
        if signum in IF_DEFAULT and old != signal.SIG_DFL:
            continue  # someone else's (a timer of the caller's)
        previous[signum] = old
        signal.signal(signum, _handler)
    watchdog = _Watchdog.start_for(previous) if previous else None
    try:
        yield
    finally:
        if watchdog is not None:
            watchdog.stop()
        for signum, old in previous.items():
            signal.signal(signum, old if old is not None else signal.SIG_DFL)


class _Watchdog(threading.Thread):
    """Nudges the main thread while a signal's handler has not run (see the module's
    text)."""

    def __init__(self, read_fd, write_fd, old_wakeup, old_nudge):
        super().__init__(name="kkmeans-signals", daemon=True)
        self.read_fd, self.write_fd = read_fd, write_fd
        self.old_wakeup, self.old_nudge = old_wakeup, old_nudge
        self.main = threading.main_thread().ident
        self.stopped = threading.Event()

    @classmethod
    def start_for(cls, handled_signals):
        if NUDGE is None or not hasattr(signal, "pthread_kill"):
            return None
        read_fd, write_fd = os.pipe()
        os.set_blocking(write_fd, False)
        try:
            old_wakeup = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
        except (ValueError, OSError):
            os.close(read_fd)
            os.close(write_fd)
            return None
        old_nudge = signal.signal(NUDGE, _nudged)
        watchdog = cls(read_fd, write_fd, old_wakeup, old_nudge)
        watchdog.wanted = {int(s) for s in handled_signals}
        watchdog.start()
        return watchdog

    def run(self):
        while not self.stopped.is_set():
            try:
                data = os.read(self.read_fd, 64)
            except OSError:
                return
            if not data:
                return
            if not self.wanted.intersection(data):
                continue  # the nudge itself, or a signal handled elsewhere
            seen = _seen
            # The handler usually runs at once; else wake the main thread until it has.
            for _ in range(200):
                if self.stopped.wait(0.05) or _seen != seen:
                    break
                try:
                    signal.pthread_kill(self.main, NUDGE)
                except (OSError, ValueError):
                    return

    def stop(self):
        self.stopped.set()
        try:
            signal.set_wakeup_fd(self.old_wakeup)
        except (ValueError, OSError):
            pass
        signal.signal(NUDGE, self.old_nudge if self.old_nudge is not None else signal.SIG_DFL)
        os.close(self.write_fd)  # ends the thread's read
        self.join(timeout=5)
        os.close(self.read_fd)


def ignored_to_the_end():
    """From here to the end of the process each signal :func:`handled` takes is ignored
    (``SIG_IGN``, which CPython's teardown keeps, where it resets a Python handler to the
    default action), but one that someone else handles (of ``IF_DEFAULT``). For the command
    line's own process only, once its exit code is decided; in the main thread."""
    if threading.current_thread() is not threading.main_thread():
        return
    for signum in SIGNALS + IF_DEFAULT:
        if signum in IF_DEFAULT and signal.getsignal(signum) not in (signal.SIG_DFL,
                                                                     signal.SIG_IGN):
            continue
        signal.signal(signum, signal.SIG_IGN)


def _nudged(signum, frame):
    """SIGURG from the watchdog: nothing to do (the pending handlers run on the way)."""


@contextlib.contextmanager
def deferred():
    """Hold the signals for the block; one that came during it is raised when the outermost
    block ends (after the block's own clean-up)."""
    global _depth, _pending
    _depth += 1
    try:
        yield
    finally:
        _depth -= 1
        if _depth == 0 and _pending is not None:
            signum, _pending = _pending, None
            _raise(signum)


def pending():
    """The signal held by :func:`deferred` so far (None when none came)."""
    return _pending
