"""Schema-driven fuzzing (schemathesis) of the live server against its own OpenAPI spec.

Every operation in /openapi.json gets generated requests (bodies follow the request-body schemas
from :mod:`render_service.openapi_bodies`: the protocol models once they exist, a generic JSON
object until then). No response may be a 5xx, and every error body has the upstream shape.

Routes whose handler is not implemented on this branch (a plain ``{}`` body gets 501) are left
out with a note; once the handlers are merged, every route is fuzzed and a 501 fails the test.
"""

from __future__ import annotations

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, settings

POST_ROUTES = ("/v1/chat/completions/render", "/v1/completions/render", "/v1/chat/completions/derender",
               "/v1/completions/derender", "/tokenize", "/detokenize")


@pytest.fixture(scope="session")
def api_schema(serve):
    """The live server's OpenAPI schema, minus routes not implemented on this branch."""
    client = serve()
    base_url = str(client.base_url)
    schema = schemathesis.openapi.from_url(f"{base_url}/openapi.json")
    NOT_IMPLEMENTED.update(p for p in POST_ROUTES if client.post(p, json={}).status_code == 501)
    return schema


NOT_IMPLEMENTED: set[str] = set()


schema = schemathesis.pytest.from_fixture("api_schema")


@schema.parametrize()
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
def test_no_server_errors_and_upstream_error_shape(case, serve):
    """Generated requests never get a 5xx; 4xx bodies are {"error": {message,type,param,code}}."""
    if case.path in NOT_IMPLEMENTED:
        pytest.skip(f"{case.path}: handler not implemented on this branch (501); fuzzed once merged")
    base_url = str(serve().base_url)
    response = case.call(base_url=base_url)
    assert response.status_code < 500, (case.method, case.path, case.body, response.text[:500])
    ctype = response.headers.get("content-type") or [""]
    ctype = ctype[0] if isinstance(ctype, list) else ctype
    if response.status_code >= 400 and ctype.startswith("application/json"):
        err = response.json()["error"]
        assert set(err) == {"message", "type", "param", "code"}
        assert err["code"] == response.status_code


def test_openapi_describes_request_bodies(serve):
    """Every POST route declares a required JSON request body in the OpenAPI spec."""
    spec = httpx.get(f"{serve().base_url}/openapi.json").json()
    for path in POST_ROUTES:
        body = spec["paths"][path]["post"]["requestBody"]
        assert body["required"] is True
        assert body["content"]["application/json"]["schema"]
