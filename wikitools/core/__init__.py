"""Shared ground: errors, diagnostics, files, YAML, configuration, locating the wiki."""
