"""``python -m kafkalog``: the ``kafkalog`` command line (see :mod:`kafkalog.tools.cli`)."""
import sys

from .tools.cli import main

if __name__ == "__main__":
    sys.exit(main())
