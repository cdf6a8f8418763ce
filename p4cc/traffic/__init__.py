"""Workloads, the experiment spec and runner, the run store, analysis and reports."""
