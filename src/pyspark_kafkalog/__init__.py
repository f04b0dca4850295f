"""Lets PySpark (4.0+) find the "kafkalog" data source by itself: Spark registers the
``DefaultSource`` of any top-level ``pyspark_*`` module on first use, so
``spark.read.format("kafkalog")`` works without calling ``kafkalog.spark.register(spark)``
(which additionally turns on filter pushdown where the Spark version supports it)."""
from kafkalog.spark._source import KafkaLogDataSource as DefaultSource

__all__ = ["DefaultSource"]
