"""`python -m wikitools`: the same as the `wiki` command."""

from wikitools.cli import main

raise SystemExit(main())
