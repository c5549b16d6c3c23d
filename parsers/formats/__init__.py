"""Format specs, one small module per parser family and kind; each exposes ``SPEC`` (a
:class:`parsers.spec.FormatSpec`), some also variants registered under other names.

Naming scheme (find a format by its vLLM parser name):

* ``<name>_reasoning.py``: the reasoning parser ``<name>`` (``--reasoning-parser``), e.g.
  ``mistral_reasoning.py``, ``qwen3_reasoning.py``.
* ``<name>_tools.py``: the tool-call parser ``<name>`` (``--tool-call-parser``), e.g.
  ``mistral_tools.py``, ``hermes_tools.py``.
* A module serving several names is named after the first one; the others are aliases or
  variants in the same module (see the registry in :mod:`parsers`): ``deepseek_r1_reasoning``
  (also ``step5``), ``deepseek_v3_reasoning`` (also ``holo2``), ``glm45_*`` (also ``glm47``),
  ``minimax_m2_reasoning`` (also ``minimax_m2_append_think``), ``deepseek_v3_tools`` (also
  ``deepseek_v31``), ``deepseek_v32_tools`` (DSML, also ``deepseek_v4``), ``granite_tools``
  (also ``granite4``, ``granite-20b-fc``), ``hermes_tools`` (also ``qwen3_json``),
  ``llama3_json_tools`` (also ``llama4_json``), ``pythonic_tools`` (also ``llama4_pythonic``),
  ``qwen3_coder_tools`` (also ``qwen3_xml``, ``step3p5``, ``step5``, ``mimo``, SGLang's
  ``nanbeige``), ``deepseek_v4_reasoning`` (also ``deepseek_v41``), ``hy_v3_*`` (also ``hy_v4``;
  ``hy_v3_tools`` also ``k2_horizon``), ``gemma4_tools`` (also ``functiongemma``), ``dots_tools``
  (also ``muse``/``muse_glimmer``/``musespark1x``), ``deepseek_v3_reasoning`` (also
  ``poolside_v1``), ``cohere_command_*`` (``cohere_command3``/``4``), ``kimi_k2_reasoning`` (also
  SGLang's ``kimi``), ``qwen3_reasoning`` (also SGLang's ``qwen3-thinking``).
* ``response_template.py``: ``hf`` / ``beam``, built per model from its ``response_template``.
* ``harmony.py``: the one combined format (gpt-oss Harmony), a single spec registered as the
  reasoning parsers ``openai_gptoss`` / ``gpt-oss`` and the tool parser ``openai``.
* ``<syntax>_factory.py``: shared spec factories, no parser of their own: ``think_factory``
  (``<think>``-style reasoning), ``json_factory`` (a start marker then JSON calls),
  ``xml_factory`` (XML-style calls), ``pythonic_factory`` (pythonic calls);
  ``json_factory.atomic_tool_spec`` for blocks parsed whole at their end marker
  (:mod:`parsers.atomiccalls`).
"""
