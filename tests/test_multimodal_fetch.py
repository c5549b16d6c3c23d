"""http(s) media loading (``render.multimodal.media.load_url``) against real local HTTP and HTTPS
servers (the HTTPS one with a certificate authority made in the test, ``trustme``): streaming
size cap, redirects (each target re-checked, bounded), the fetch timeout, allowed domains,
certificate and host-name checks, HTTP errors as 502, and the non-public-address refusal that
is the default."""

from __future__ import annotations

import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
import trustme
from conftest import model_dir

from render_service.errors import InvalidRequest
from render_service.render.multimodal.media import FetchPolicy, MediaFetchFailed, load_url

PAYLOAD = b"\x89PNG" + bytes(range(256)) * 64
RELEASE = threading.Event()
"""Set when the tests are done with ``/slow`` (its answer waits for it, at most 30 s)."""


STALL = threading.Event()
"""Set when the test is done with ``/stall`` (each request to it waits for this)."""
STALLED: list[str] = []
STALL_LOCK = threading.Lock()


class Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server API
        if self.path == "/img.png":
            self.send_response(200)
            self.send_header("Content-Length", str(len(PAYLOAD)))
            self.end_headers()
            self.wfile.write(PAYLOAD)
        elif self.path.startswith("/hop/"):
            left = int(self.path.rsplit("/", 1)[1])
            self.send_response(302)
            self.send_header("Location", "/img.png" if left == 0 else f"/hop/{left - 1}")
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif self.path == "/stall":  # answers once the test lets it (at most 60 s)
            with STALL_LOCK:
                STALLED.append(self.path)
            STALL.wait(60)
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif self.path == "/nowhere":  # a redirect without a Location
            self.send_response(302)
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif self.path.startswith("/to?"):  # a redirect to the Location in the query, as given
            from urllib.parse import unquote

            self.send_response(302)
            self.send_header("Location", unquote(self.path[4:]))
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif self.path == "/chunked":
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for _ in range(8):
                self.wfile.write(b"1000\r\n" + b"x" * 4096 + b"\r\n")
            self.wfile.write(b"0\r\n\r\n")
        elif self.path == "/slow":
            RELEASE.wait(30)
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()
        else:
            self.send_response(404)
            self.send_header("Content-Length", "0")
            self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


LOCAL = FetchPolicy(allow_private=True, timeout=5, max_redirects=3)


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, str]]:
    """An HTTPS server on 127.0.0.1 with a certificate for ``localhost`` only, from a CA made
    here: ``(port, CA bundle path)``."""
    ca = trustme.CA()
    bundle = tmp_path_factory.mktemp("tls") / "ca.pem"
    ca.cert_pem.write_to_path(str(bundle))
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ca.issue_cert("localhost").configure_cert(ctx)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server.server_address[1], str(bundle)
    RELEASE.set()
    server.shutdown()


def test_https_fetch_checks_certificate_and_host_name(tls: tuple[int, str]) -> None:
    port, bundle = tls
    trusted = FetchPolicy(allow_private=True, timeout=5, ca_bundle=bundle)
    assert load_url(f"https://localhost:{port}/img.png", trusted) == PAYLOAD
    assert load_url(f"https://localhost:{port}/hop/1", trusted) == PAYLOAD  # redirects re-checked
    with pytest.raises(MediaFetchFailed, match="CERTIFICATE_VERIFY_FAILED") as err:
        load_url(f"https://localhost:{port}/img.png", LOCAL)  # the test CA is not trusted
    assert err.value.status_code == 502
    with pytest.raises(MediaFetchFailed, match="CERTIFICATE_VERIFY_FAILED"):
        load_url(f"https://127.0.0.1:{port}/img.png", trusted)  # the certificate names localhost only
    with pytest.raises(InvalidRequest, match="non-public address"):
        load_url(f"https://localhost:{port}/img.png", FetchPolicy(ca_bundle=bundle))


def test_https_fetch_honours_domains_size_and_timeout(tls: tuple[int, str]) -> None:
    port, bundle = tls
    url = f"https://localhost:{port}/img.png"
    other = FetchPolicy(allowed_media_domains=("example.org",), allow_private=True, ca_bundle=bundle)
    with pytest.raises(InvalidRequest) as err:
        load_url(url, other)
    assert str(err.value) == (
        "The URL must be from one of the allowed domains: ['example.org']. Input URL domain: localhost"
    )
    allowed = FetchPolicy(allowed_media_domains=("localhost",), allow_private=True, ca_bundle=bundle)
    assert load_url(url, allowed) == PAYLOAD
    small = FetchPolicy(allow_private=True, timeout=5, max_bytes=10_000, ca_bundle=bundle)
    with pytest.raises(InvalidRequest, match="larger than 10000 bytes"):
        load_url(url, small)  # declared length
    with pytest.raises(InvalidRequest, match="larger than 10000 bytes"):
        load_url(f"https://localhost:{port}/chunked", small)  # counted while streaming
    quick = FetchPolicy(allow_private=True, timeout=0.5, ca_bundle=bundle)
    with pytest.raises(MediaFetchFailed, match=r"timed out after 0.5 s \(--media-fetch-timeout\)") as err2:
        load_url(f"https://localhost:{port}/slow", quick)
    assert err2.value.status_code == 502
    assert Path(bundle).read_text().startswith("-----BEGIN CERTIFICATE-----")


def test_fetch_and_redirects(base: str) -> None:
    assert load_url(f"{base}/img.png", LOCAL) == PAYLOAD
    assert load_url(f"{base}/hop/2", LOCAL) == PAYLOAD  # 3 redirects: allowed
    host = base.split("//", 1)[1].rsplit(":", 1)[0]  # named as the other fetch errors name it
    with pytest.raises(MediaFetchFailed, match=rf"^Failed to fetch media from {host}: more than 3 redirects "
                                               r"\(--media-max-redirects\)$"):
        load_url(f"{base}/hop/3", LOCAL)


def test_errors_are_502_or_400(base: str) -> None:
    with pytest.raises(MediaFetchFailed, match="HTTP 404") as err:
        load_url(f"{base}/missing", LOCAL)
    assert err.value.status_code == 502
    small = FetchPolicy(allow_private=True, timeout=5, max_bytes=10_000)
    with pytest.raises(InvalidRequest, match="larger than 10000 bytes"):
        load_url(f"{base}/img.png", small)  # declared length
    with pytest.raises(InvalidRequest, match="larger than 10000 bytes"):
        load_url(f"{base}/chunked", small)  # counted while streaming
    with pytest.raises(MediaFetchFailed):
        load_url("http://127.0.0.1:9/none.png", LOCAL)  # connection refused


def test_non_public_addresses_refused_by_default(base: str) -> None:
    for url in (f"{base}/img.png", "http://10.0.0.1/a.png", "http://[fe80::1]/a.png", "http://0.0.0.0/a",
                "http://[::ffff:127.0.0.1]/a"):
        with pytest.raises(InvalidRequest, match="non-public address"):
            load_url(url, FetchPolicy())
    with pytest.raises(InvalidRequest, match="allowed domains"):
        load_url(f"{base}/img.png", FetchPolicy(allowed_media_domains=("example.org",), allow_private=True))
    with pytest.raises(InvalidRequest, match="either a HTTP, data or file URL"):
        load_url("ftp://example.org/a.png", FetchPolicy())


def test_data_and_file_urls(tmp_path: object) -> None:
    assert load_url("data:image/png;base64,iVBORw==", FetchPolicy()) == b"\x89PNG"
    with pytest.raises(InvalidRequest, match="Non-base64 digit found"):
        load_url("data:image/png;base64,@@", FetchPolicy())
    with pytest.raises(InvalidRequest, match="without `--allowed-local-media-path`"):
        load_url("file:///etc/hostname", FetchPolicy())


@pytest.mark.parametrize("url", [
    "http://example.com:99999/a.png", "http://example.com:abc/a.png", "http://example.com:-1/a.png",
    "http://[::1/a.png", "http://[zz::1]/a.png", "http://a..b.com/a.png", "http://.com/a.png",
    f"http://{'a' * 64}.com/a.png", "http://\u00ad.com/a.png",
])
def test_a_malformed_url_is_a_400(url: str) -> None:
    """A port out of range or not a number, a bracketed host that is no IPv6 address, a host the
    IDNA codec refuses: each a 400 naming the URL or host (round 31's newcomer: ``ValueError`` /
    ``UnicodeError`` from urllib and the resolver → 500), before any connection is made."""
    with pytest.raises(InvalidRequest, match="Invalid media URL"):
        load_url(url, FetchPolicy(allow_private=True, timeout=5))


def test_a_file_url_that_is_no_regular_file_is_refused_at_once(tmp_path: Path) -> None:
    """A FIFO inside ``--allowed-local-media-path`` is a 400 at once (its open for reading waited
    for a writer: round 31's newcomer held every worker thread of a server so, text renders too);
    so is a path with a NUL character (was ``ValueError: embedded null byte`` → 500)."""
    import os

    fifo = tmp_path / "fifo.png"
    os.mkfifo(fifo)
    policy = FetchPolicy(allowed_local_media_path=str(tmp_path))
    with pytest.raises(InvalidRequest, match="not a regular file"):
        load_url(f"file://{fifo}", policy)
    for url in (f"file://{tmp_path}/a%00b.png", f"file://{tmp_path}/a\0b.png"):
        with pytest.raises(InvalidRequest, match="NUL character"):
            load_url(url, policy)
    (tmp_path / "ok.png").write_bytes(PAYLOAD)
    assert load_url(f"file://{tmp_path}/ok.png", policy) == PAYLOAD


@pytest.mark.parametrize("location", ["data:image/png;base64,AAAA", "data:,x", "javascript:alert(1)",
                                      "mailto:a@b", "http:x", "x:y", "http://xn--/", "ftp://a/b.png",
                                      "file:///etc/passwd"])
def test_a_redirect_that_cannot_be_followed_is_a_502(base: str, location: str) -> None:
    """A media server answering 302 with a Location httpx cannot follow (not http(s), malformed,
    an IDNA label it refuses) is the server's fault: 502 naming the host (round 31's second
    newcomer: ``InvalidURL`` / ``IDNAError`` → 500 on every render route)."""
    from urllib.parse import quote

    with pytest.raises(MediaFetchFailed, match="Failed to fetch media from 127.0.0.1"):
        load_url(f"{base}/to?{quote(location, safe='')}", LOCAL)


def test_a_redirect_without_a_location_is_a_502(base: str) -> None:
    """A 302 with no Location is the media server's failure (502 naming the status), not an empty
    image (was 400 ``cannot identify image file``: round 31's fourth newcomer)."""
    with pytest.raises(MediaFetchFailed, match="Failed to fetch media from 127.0.0.1: HTTP 302"):
        load_url(f"{base}/nowhere", LOCAL)


@pytest.mark.shared
@pytest.mark.parametrize("padding", [0, 70_000])
def test_a_stalled_media_server_holds_no_worker_slot(serve: Any, base: str, padding: int) -> None:
    """Renders whose image URL a media server does not answer hold I/O threads while they wait,
    not the ``--renderer-threads`` slots: with 2 slots and 4 such renders in flight, all 4 fetches
    reach the server and a text render is answered meanwhile (round 31's second newcomer: 8
    renders of one hanging URL made a text render wait 9.7 s; 60 of them made it a 503). Also for
    a body over the lane's inline bound (``padding``: 70 KB of text beside the image; the fourth
    newcomer's such renders still fetched on the pool)."""
    client = serve(model=str(model_dir("Qwen--Qwen3-VL-2B-Instruct")), allow_private_media_urls=True,
                   renderer_threads=2, media_fetch_timeout=60.0)
    image = {"type": "image_url", "image_url": {"url": f"{base}/stall"}}
    body = {"messages": [{"role": "user", "content": [image, {"type": "text", "text": "?" + " x" * (padding // 2)}]}]}
    answers: list[Any] = []
    STALL.clear()
    STALLED.clear()
    with httpx.Client(base_url=str(client.base_url), timeout=90) as other:
        threads = [threading.Thread(target=lambda: answers.append(other.post(
            "/v1/chat/completions/render", json=body))) for _ in range(4)]
        try:
            for t in threads:
                t.start()
            for _ in range(600):  # all four fetches arrive (only two did when each held a slot)
                with STALL_LOCK:
                    if len(STALLED) == 4:
                        break
                STALL.wait(0.05)
            assert len(STALLED) == 4, STALLED
            text = client.post("/v1/chat/completions/render",
                               json={"messages": [{"role": "user", "content": "hi"}]}, timeout=30)
            assert text.status_code == 200 and not answers  # answered while the 4 still wait
        finally:
            STALL.set()
            for t in threads:
                t.join(90)
    assert [a.status_code for a in answers] == [502] * 4, [a.text[:200] for a in answers]
