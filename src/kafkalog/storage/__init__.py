"""The storage engine: what a Kafka broker keeps on disk, and the code that reads and writes it.

``fs`` (byte access: regular files only, every OS error a ``KafkaStorageError``), ``files``
(Kafka's file-name grammar, atomic checkpoint writes), ``logdir`` (the read-only model of a log
root: partitions, segments, checkpoints), ``index`` (offset, time and transaction indexes),
``segment`` (one ``.log`` with its indexes), ``log`` (a partition: ``Log``), ``cleaner``
(compaction) and ``producer_state`` (producer snapshots).  ``kafkalog.Log`` and the other public
names are re-exported at the package root.
"""
