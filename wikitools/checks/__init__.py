"""Checks over the page model: lint, links and anchors, acronyms, the index, statuses and
the baseline."""
