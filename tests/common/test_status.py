"""metav1.Status bodies: built as the apiserver writes them, read back from bytes, text or JSON."""

from __future__ import annotations

import json

import pytest

from common.status import Status, parse_status, status_body


def test_body_has_the_apiserver_shape() -> None:
    body = status_body(422, "", "x is invalid", {"causes": [{"field": "spec.x", "message": "bad"}]})
    assert body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "x is invalid",
        "reason": "Invalid",
        "details": {"causes": [{"field": "spec.x", "message": "bad"}]},
        "code": 422,
    }


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        pytest.param(
            json.dumps(status_body(410, "Expired", "too old")).encode(),
            Status(410, "Expired", "too old"),
            id="bytes",
        ),
        pytest.param(
            status_body(404, "NotFound", 'pods "p" not found'),
            Status(404, "NotFound", 'pods "p" not found'),
            id="parsed JSON",
        ),
        pytest.param('{"kind": "Pod"}', None, id="not a Status"),
        pytest.param("<html>bad gateway</html>", None, id="not JSON"),
        pytest.param("", None, id="empty"),
        pytest.param({"kind": "Status", "code": "500"}, Status(0, "", ""), id="code not a number"),
    ],
)
def test_parse(body: object, expected: Status | None) -> None:
    assert parse_status(body) == expected


def test_parse_keeps_the_causes() -> None:
    body = status_body(422, "Invalid", "m", {"causes": [{"field": "a"}, "junk"]})
    parsed = parse_status(body)
    assert parsed is not None and parsed.causes == ({"field": "a"},)
