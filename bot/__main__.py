"""``python -m bot``: the command line (see ``cli``), kept because the README and scripts use it."""

from cli import main

raise SystemExit(main())
