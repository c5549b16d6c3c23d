"""``python -m render_service ...`` is the same as the ``render-service`` command."""

from .serving.cli import main

raise SystemExit(main())
