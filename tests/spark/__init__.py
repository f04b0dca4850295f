"""Spark data source tests (one local SparkSession per run; see conftest.py)."""
