"""Carrying a runbook out on a host: plan, preflight, host and GPU reading, processes and
containers, readiness, run state and locks, the executor and assembling its record."""
