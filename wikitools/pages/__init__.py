"""Pages: the source text, the one parse, the page model, fences, the glossary, a tree's layout."""
