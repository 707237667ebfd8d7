from wikitools.cli import main

raise SystemExit(main())
