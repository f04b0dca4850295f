"""Lets PySpark (4.0+) find the "kafkalog" data source by itself: Spark registers the
``DefaultSource`` of any top-level ``pyspark_*`` module on first use, so
``spark.read.format("kafkalog")`` works without calling ``kafkalog.spark.register(spark)``.
It plans as a registered source does: ``register`` only adds the cluster's default
parallelism (splits are otherwise sized for the cores of the planning process) and, when
asked, filter pushdown."""
from kafkalog.spark._source import KafkaLogDataSource as DefaultSource

__all__ = ["DefaultSource"]
