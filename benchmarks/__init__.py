"""Benchmarks for txmq and the brokers users would pick instead (see issue 8)."""
