"""The standard streams of the process: which ones it was started without (``>&-``), and
how a stream whose reader went away is quietened.

Imported by the command line at start-up, so nothing heavy here.
"""
import os
import sys


#: Whether this process ends with the command (the ``kkmeans`` script sets it; a command run
#: in a test runner's process does not), so that what is set for the rest of the process
#: (Dask's noise while it closes, ``distributed.command``) may be.
WHOLE_PROCESS = False

#: Standard streams (0, 1, 2) that were closed when the command started (``>&-``); each is
#: held by /dev/null opened the wrong way, so no file the command opens takes its number and
#: a write to it fails.
CLOSED_STREAMS = set()


def guard_standard_streams():
    """Note which of stdin, stdout and stderr the command was started without (Python then
    sets ``sys.stdout`` etc. to None) and hold their descriptors (see
    :data:`CLOSED_STREAMS`). Called first thing by the command line."""
    for fd, name, flags in ((0, "stdin", os.O_WRONLY), (1, "stdout", os.O_RDONLY),
                            (2, "stderr", os.O_RDONLY)):
        if getattr(sys, name, None) is not None:
            continue
        CLOSED_STREAMS.add(fd)
        try:
            os.fstat(fd)
            continue   # taken since by a file Python opened: never written as a stream
        except OSError:
            pass
        try:
            held = os.open(os.devnull, flags)
        except OSError:
            continue
        if held != fd:
            os.dup2(held, fd)
            os.close(held)


def silence_stream(fd):
    """Point descriptor ``fd`` (1 or 2) at /dev/null after its reader went away, so that
    Python's own flush at exit does not fail again (and turn the exit code into 120)."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, fd)
        os.close(null)
    except OSError:
        pass
