"""``python -m kkmeans_cli``: the ``kkmeans`` command line."""
from ._entry import main

main()
