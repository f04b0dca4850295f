"""The operator tools: the ``kafkalog`` command line (``cli``) and what it runs: ``dump`` (the
``kafka-dump-log.sh`` output and JSON lines), ``decoders`` (its ``--*-decoder`` options),
``verify``, ``salvage`` and ``stats``, with their inputs (``_inputs``).  They read log
directories only through :mod:`kafkalog.storage`; the main job is :mod:`kafkalog.demo`.
"""
