"""Differential harness: the same generated requests and model outputs sent to this service and
to vLLM 0.33's render server (``vllm launch render``), whole responses compared field by field.

Run by hand, never by CI (it needs vLLM in its own venv)::

    python -m tools.differential --models all --requests 300 --outputs 200
    python -m tools.differential --quick

Modules: ``servers`` (start/stop both servers per model), ``generate`` (seeded hypothesis
strategies for requests and model outputs), ``normalise`` (the README's deliberate differences,
one normaliser per README line), ``compare`` (field-by-field diff and the kinds of difference),
``run`` (the driver and the report).
"""
