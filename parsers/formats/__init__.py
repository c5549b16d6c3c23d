"""One small module per parser family; each exposes ``SPEC`` (a :class:`parsers.spec.FormatSpec`)."""
