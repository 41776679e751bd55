"""``python -m chainfence.cli``: the same as ``chainfence``."""

from . import run

if __name__ == "__main__":
    run()
