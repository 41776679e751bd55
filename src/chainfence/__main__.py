"""``python -m chainfence``: the same as the ``chainfence`` command."""

import sys

from .cli import main

sys.exit(main())
