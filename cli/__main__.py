"""``python -m cli``: the command line, as ``python -m bot`` runs it."""

from cli import main

raise SystemExit(main())
