"""Serving: the HTTP app and its operations (routes, limits, API keys, metrics, request ids and
logs, OpenAPI bodies), the ``render-service`` command and the worker processes.

The top wing: may import everything of ours; nothing imports it but ``render_service/__init__``
(``create_app``) and ``__main__``.
"""
