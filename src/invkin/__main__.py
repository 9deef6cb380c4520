"""``python -m invkin ...``: the ``invkin`` command, for an environment whose scripts folder is
not on PATH."""
import sys

from .cli import main

sys.exit(main())
