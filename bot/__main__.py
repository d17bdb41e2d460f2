"""``python -m bot``: the command line (see ``bot.cli``)."""

from bot.cli import main

raise SystemExit(main())
