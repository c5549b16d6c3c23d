"""Schema-driven fuzzing (schemathesis) of the live server against its own OpenAPI spec.

Every operation in /openapi.json gets generated requests whose bodies follow the real request
models (:mod:`render_service.serving.openapi`). No response may be a 5xx, and every JSON error body
has the upstream shape. Two servers are fuzzed: the plain one and one with parsers
(``--reasoning-parser qwen3 --tool-call-parser hermes --enable-auto-tool-choice``).

Examples per operation: ``RENDER_FUZZ_EXAMPLES`` (default 200). With schemathesis' coverage phase
and both servers that is well over 5,000 generated POST requests (counted in ``REQUESTS`` and
printed by the last test with ``-s``), about two minutes on two cores. Run by hand with a larger
value for a deeper search.
"""

from __future__ import annotations

import os
from collections import Counter

import httpx
import pytest
import schemathesis
from conftest import examples
from hypothesis import HealthCheck, settings
from openapi_spec_validator import validate

POST_ROUTES = ("/v1/chat/completions/render", "/v1/completions/render", "/v1/chat/completions/derender",
               "/v1/completions/derender", "/tokenize", "/detokenize")
PARSERS = {"reasoning_parser": "qwen3", "tool_call_parser": "hermes", "enable_auto_tool_choice": True}
EXAMPLES = int(os.environ.get("RENDER_FUZZ_EXAMPLES", str(examples(200))))
REQUESTS: Counter[tuple[str, str]] = Counter()
STATUSES: Counter[tuple[str, int]] = Counter()


@pytest.fixture(scope="session")
def api_schema(serve):
    """The plain server's OpenAPI schema."""
    return schemathesis.openapi.from_url(f"{serve().base_url}/openapi.json")


@pytest.fixture(scope="session")
def api_schema_parsers(serve):
    """The OpenAPI schema of a server with reasoning and tool-call parsers."""
    return schemathesis.openapi.from_url(f"{serve(**PARSERS).base_url}/openapi.json")


def _check(case, client: httpx.Client, config: str) -> None:
    response = case.call(base_url=str(client.base_url))
    if case.path in POST_ROUTES:
        REQUESTS[(config, case.path)] += 1
        STATUSES[(case.path, response.status_code)] += 1
    assert response.status_code < 500, (case.method, case.path, case.body, response.text[:500])
    ctype = response.headers.get("content-type") or [""]
    ctype = ctype[0] if isinstance(ctype, list) else ctype
    if response.status_code >= 400 and ctype.startswith("application/json"):
        err = response.json()["error"]
        assert set(err) == {"message", "type", "param", "code"}
        assert err["code"] == response.status_code


FUZZ = settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck))


@schemathesis.pytest.from_fixture("api_schema").parametrize()
@FUZZ
def test_no_server_errors_and_upstream_error_shape(case, serve):
    """Generated requests never get a 5xx; 4xx bodies are {"error": {message,type,param,code}}."""
    _check(case, serve(), "plain")


@schemathesis.pytest.from_fixture("api_schema_parsers").parametrize()
@FUZZ
def test_no_server_errors_with_parsers(case, serve):
    """Same as above on a server with the qwen3 reasoning and hermes tool-call parsers."""
    _check(case, serve(**PARSERS), "parsers")


def test_openapi_is_valid_and_describes_real_request_bodies(serve):
    """/openapi.json is a valid OpenAPI document; every POST route declares a required JSON body
    from its real request model (derender: batch or streaming body, as ``oneOf``)."""
    spec = httpx.get(f"{serve().base_url}/openapi.json").json()
    validate(spec)
    schemas = spec["components"]["schemas"]
    for path in POST_ROUTES:
        body = spec["paths"][path]["post"]["requestBody"]
        assert body["required"] is True
        schema = body["content"]["application/json"]["schema"]
        assert schema.get("properties") or schema.get("oneOf"), path
    assert "messages" in spec["paths"][POST_ROUTES[0]]["post"]["requestBody"]["content"][
        "application/json"]["schema"]["properties"]
    for path, names in ((POST_ROUTES[2], {"DerenderChatRequest", "DerenderChatStreamRequest"}),
                        (POST_ROUTES[3], {"DerenderCompletionRequest", "DerenderCompletionStreamRequest"})):
        one_of = spec["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]["oneOf"]
        assert {ref["$ref"].rsplit("/", 1)[1] for ref in one_of} == names
        assert names <= set(schemas)


def test_fuzz_request_count_is_reported():
    """Runs after the fuzz tests (same module): prints how many POST requests were generated and
    checks every POST route was fuzzed, and at the default budget over both servers at least 5,000
    POST requests were sent (skipped when run alone)."""
    if not REQUESTS:
        pytest.skip("fuzz tests did not run in this session")
    print(f"\nschemathesis POST requests: {sum(REQUESTS.values())} {dict(REQUESTS)}")
    print(f"statuses: {dict(sorted(STATUSES.items()))}")
    assert {path for _, path in REQUESTS} == set(POST_ROUTES)
    if EXAMPLES >= 200 and {config for config, _ in REQUESTS} == {"plain", "parsers"}:
        assert sum(REQUESTS.values()) >= 5000
