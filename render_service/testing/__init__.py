"""Test helpers shipped with the package: a scripted tokens-only engine (:mod:`.engine`).

May import the base and ``derender`` (the usage block); never ``serving``.
"""
