"""Runbook blocks as a page writes them: the block model, reading blocks out of a page
(extract), marker regions, and finding and marking unmarked launch commands (scan, adopt)."""
