"""Runs of many runbooks on many hosts through a Ray cluster (`wiki fleet`)."""
