"""``python -m kafkalog``: the ``kafkalog`` command line (see :mod:`kafkalog.cli`)."""
import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
