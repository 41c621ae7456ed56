"""Measured vs model: nccl-tests logs, comparison, acceptance expectations, golden figures."""
