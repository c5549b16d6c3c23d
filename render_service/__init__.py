"""render-service: the stateless CPU tier of disaggregated LLM serving (render and derender)."""

__version__ = "0.1.0"

__all__ = ["__version__", "create_app"]


def __getattr__(name: str):  # PEP 562: keep `import render_service` light
    if name == "create_app":
        from .serving.app import create_app

        return create_app
    raise AttributeError(name)
