"""Benchmarks (see docs/performance.md). Not run by the test suite."""
