"""``python -m render_service ...`` is the same as the ``render-service`` command."""

from .cli import main

raise SystemExit(main())
