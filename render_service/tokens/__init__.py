"""Tokens: prompt text → token ids, as fast as proven identical to the model's Hugging Face
tokenizer (the tiktoken fast encoder, the multi-turn prefix cache, plain encode/decode helpers).

The lowest wing: imports only the base modules ``errors``, ``settings`` and ``memory``; never
``models``, ``render``, ``derender`` or ``serving``.
"""
