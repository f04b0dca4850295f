"""The operator tools: the ``kafkalog`` command line (``cli``) and what it runs: ``dump`` (the
``kafka-dump-log.sh`` output and JSON lines), ``decoders`` (its ``--*-decoder`` options),
``verify``, ``salvage``, ``stats``, and ``demo`` (the main job: ``python -m kafkalog.tools.demo``).
They read log directories only through :mod:`kafkalog.storage`.
"""
