"""Records back into pages: result regions (tables, charts, provenance), status lines and
serving views. Reads records and blocks; never runs anything."""
