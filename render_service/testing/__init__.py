"""Test helpers shipped with the package (e.g. a scripted tokens-only engine)."""
