"""``python -m calib_jax``: the ``calib-jax`` command (see :mod:`calib_jax.cli`)."""

import sys

from calib_jax.cli import main

if __name__ == "__main__":
    sys.exit(main())
