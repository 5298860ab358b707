"""The 1 MiB body limit against the real server: with a Content-Length and sent chunked (no length).

A chunked body is refused with 413 as soon as the chunks read pass the limit, with the same error
document as a body whose Content-Length is over it, before the rest is sent; nothing is charged.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from fractions import Fraction
from urllib.parse import urlsplit

import httpx

from dpsense.core.privacy_loss import ApproxDP, PureDP
from tests.system.service.support import Service, new_key, spec

LIMIT = 1 << 20
CHUNK = 64 * 1024


def _spent(service: Service) -> Fraction:
    with service.ledger() as ledger:
        loss = ledger.budget("events").spent
    assert isinstance(loss, PureDP | ApproxDP)
    return loss.epsilon


def _releases(service: Service) -> int:
    with service.ledger() as ledger:
        return len(ledger.releases("events"))


def _oversize_json() -> bytes:
    """A valid release spec padded past the limit with spaces (JSON allows them)."""
    return json.dumps(spec()).encode() + b" " * (LIMIT + 10)


def _chunks(body: bytes, size: int = CHUNK) -> Iterator[bytes]:
    for i in range(0, len(body), size):
        yield body[i : i + size]


def _headers(service: Service, who: str, content_type: str = "application/json") -> dict[str, str]:
    return {
        "Authorization": f"Bearer {service.tokens[who]}",
        "Idempotency-Key": new_key(),
        "Content-Type": content_type,
    }


def test_an_oversize_chunked_body_is_413_like_an_oversize_content_length(service: Service) -> None:
    spent, stored = _spent(service), _releases(service)
    body = _oversize_json()
    with_length = httpx.post(service.url + "/v1/releases", content=body, headers=_headers(service, "alice"), timeout=60)
    assert with_length.status_code == 413, with_length.text
    expected = with_length.json()
    assert expected["error"]["code"] == "body_too_large"
    routes = [("/v1/releases", "application/json"), ("/v1/sql", "application/json")]
    routes.append(("/v1/releases/yaml", "application/yaml"))
    for path, content_type in routes:
        headers = _headers(service, "alice", content_type)
        chunked = httpx.post(service.url + path, content=_chunks(body), headers=headers, timeout=60)
        assert "content-length" not in chunked.request.headers
        assert chunked.request.headers["transfer-encoding"] == "chunked"
        assert chunked.status_code == 413, (path, chunked.text)
        assert chunked.json() == expected
        assert chunked.headers["content-type"] == "application/json"
    assert (_spent(service), _releases(service)) == (spent, stored)  # nothing charged, nothing stored
    assert "unexpected" not in service.log.read_text()


def test_a_chunked_body_is_refused_once_it_passes_the_limit_without_reading_the_rest(service: Service) -> None:
    """A raw socket sends the limit plus two chunks and no terminating chunk: the 413 comes anyway."""
    spent = _spent(service)
    address = urlsplit(service.url)
    head = (
        "POST /v1/releases HTTP/1.1\r\n"
        f"Host: {address.netloc}\r\n"
        f"Authorization: Bearer {service.tokens['bob']}\r\n"
        f"Idempotency-Key: {new_key()}\r\n"
        "Content-Type: application/json\r\n"
        "Transfer-Encoding: chunked\r\n\r\n"
    ).encode("ascii")
    chunk = f"{CHUNK:x}\r\n".encode() + b" " * CHUNK + b"\r\n"
    with socket.create_connection((address.hostname, address.port), timeout=30) as sock:
        sock.sendall(head + b"1\r\n{\r\n")
        for _ in range(LIMIT // CHUNK + 2):
            sock.sendall(chunk)
        # the body is not finished (no "0\r\n\r\n"): a server waiting for all of it would never answer
        deadline = time.monotonic() + 20
        received = b""
        while b"\r\n\r\n" not in received or not _complete(received):
            assert time.monotonic() < deadline, received[:200]
            data = sock.recv(65536)
            if not data:
                break
            received += data
    status_line, _, rest = received.partition(b"\r\n")
    assert status_line.split()[1] == b"413", received[:300]
    payload = json.loads(rest.partition(b"\r\n\r\n")[2])
    assert payload["error"]["code"] == "body_too_large"
    assert _spent(service) == spent


def _complete(response: bytes) -> bool:
    head, _, body = response.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return len(body) >= int(value)
    return False


def test_a_chunked_body_under_the_limit_is_released(service: Service) -> None:
    spent = _spent(service)
    body = json.dumps(spec(0.5)).encode()
    response = httpx.post(
        service.url + "/v1/releases", content=_chunks(body, 16), headers=_headers(service, "carol"), timeout=60
    )
    assert response.request.headers["transfer-encoding"] == "chunked"
    assert response.status_code == 200, response.text
    assert response.json()["charged"] is not None
    assert _spent(service) == spent + Fraction(1, 2)
    yaml_body = b"dataset: events\nepsilon: 0.25\naggregates:\n  people: {kind: count_units}\n"
    response = httpx.post(
        service.url + "/v1/releases/yaml",
        content=_chunks(yaml_body, 7),
        headers=_headers(service, "dave", "application/yaml"),
        timeout=60,
    )
    assert response.status_code == 200, response.text
