"""Executable runbooks: blocks in wiki pages that start an engine and run clients against it."""
