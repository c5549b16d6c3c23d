"""Requests the schema fuzzer (tests/test_ops_schemathesis.py) found answered with a 500; each is
now a 400 in the upstream error shape."""

from __future__ import annotations

import pytest


def _assert_400(r, param_prefix: str) -> None:
    assert r.status_code == 400, r.text
    err = r.json()["error"]
    assert err["code"] == 400 and err["param"].startswith(param_prefix), err


@pytest.mark.parametrize("path", ["/v1/chat/completions/render", "/tokenize"])
@pytest.mark.parametrize("kind", [{}, [], 3, None])
def test_content_part_type_that_is_not_a_string(serve, path, kind):
    """A content part whose ``type`` is an object, list, number or null (was TypeError:
    unhashable type → 500) is a 400 naming the part."""
    body = {"messages": [{"role": "user", "content": [{"type": kind, "text": "hi"}]}]}
    _assert_400(serve().post(path, json=body), "messages.0")
