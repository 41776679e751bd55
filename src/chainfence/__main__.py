"""``python -m chainfence``: the same as the ``chainfence`` command."""

from .cli import run

run()
