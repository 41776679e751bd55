"""``python -m chainfence.cli``: the same as ``chainfence``."""

import sys

from . import main

if __name__ == "__main__":
    sys.exit(main())
