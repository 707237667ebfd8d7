"""The MkDocs plugin `wiki` (entry point `mkdocs.plugins`): what the wiki tools add to a site at
build time, read from the wiki's own files (glossary, front matter, run records)."""
