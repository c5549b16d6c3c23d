"""Pydantic wire models mirroring the OpenAI and vLLM 0.33 shapes (data only, no logic).

Modules: ``common`` (base model with the extra-field policy, usage, errors), ``chat``
(``ChatCompletionRequest``), ``completion`` (``CompletionRequest``), ``generate``
(``GenerateRequest``, sampling params, generate responses/chunks), ``derender`` (derender
requests and responses).

The base of the package: imports nothing of ours, so every wing may import it.
"""
