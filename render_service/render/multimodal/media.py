"""Media URLs → bytes: ``data:`` URLs, ``file://`` under ``--allowed-local-media-path``, and
``http(s)`` fetched with httpx (vLLM 0.33 ``MediaConnector``; reference multimodal.md §6, §8).

Safer than upstream: an http(s) fetch streams with a byte cap and a timeout, connects only to the
address it checked (resolved addresses that are loopback, link-local, private, multicast or
reserved are refused unless ``--allow-private-media-urls``), follows at most
``--media-max-redirects`` redirects and checks each target again; a fetch that fails is a 502
(a refused address or size a 400), never a 500.
"""

from __future__ import annotations

import functools
import ipaddress
import os
import socket
import ssl
import stat
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit

import pybase64

from ...errors import InvalidRequest, NotImplementedFeature, RenderServiceError


class MediaFetchFailed(RenderServiceError):
    """The media server could not be reached or answered with an error (502)."""

    status_code = 502
    error_type = "BadGatewayError"


@dataclass(frozen=True, slots=True)
class FetchPolicy:
    """How URLs may be loaded (from the settings).

    ``ca_bundle``: PEM file of the certificate authorities https media servers are checked
    against; ``None`` = httpx's default (``SSL_CERT_FILE`` / ``SSL_CERT_DIR`` when set, else
    certifi's bundle)."""

    allowed_local_media_path: str | None = None
    allowed_media_domains: tuple[str, ...] = ()
    allow_private: bool = False
    timeout: float = 10.0
    max_bytes: int = 64 * 1024 * 1024
    max_redirects: int = 3
    ca_bundle: str | None = None


@functools.lru_cache(maxsize=8)
def _tls_context(ca_bundle: str | None) -> ssl.SSLContext:
    """The TLS client context of https fetches, built once (loading a CA bundle costs
    milliseconds of CPU; one context serves every fetch and thread)."""
    if ca_bundle is not None:
        return ssl.create_default_context(cafile=ca_bundle)
    import httpx  # here, not at module level: see _http_url

    return httpx.create_ssl_context()


def _data_url(url: str) -> bytes:
    """The bytes of a ``data:`` URL (RFC 2397), read as vLLM 0.33's ``MediaConnector._load_data_url``:
    only base64 ones (the last ``;`` parameter is ``base64``).

    Raises:
        InvalidRequest: no ``,`` (vLLM's message), or payload that is not base64.
        NotImplementedFeature: not a base64 data URL (501, vLLM's message).
    """
    head, sep, payload = url[5:].partition(",")
    if not sep:
        raise InvalidRequest(f"Invalid data URL {url[:32]!r}: missing ',' separator.")
    _, sep, encoding = head.rpartition(";")
    if not sep or encoding != "base64":
        raise NotImplementedFeature("Only base64 data URLs are supported for now.")
    try:
        return bytes(pybase64.b64decode(payload, validate=True))
    except Exception as exc:
        raise InvalidRequest(str(exc)) from None


def _file_url(url: str, policy: FetchPolicy) -> bytes:
    if policy.allowed_local_media_path is None:
        raise InvalidRequest("Cannot load local files without `--allowed-local-media-path`.")
    parts = urlsplit(url)
    path = Path(unquote(parts.netloc + parts.path))
    if "\0" in str(path):
        raise InvalidRequest(f"Invalid file URL {url[:80]!r}: the path holds a NUL character")
    allowed = Path(policy.allowed_local_media_path).resolve()
    if allowed not in path.resolve().parents:
        # vLLM's text with both paths filled in (its error handler turns them into "<path>";
        # the path is the client's own and the folder is what it must use: README
        # "Deliberate differences").
        raise InvalidRequest(
            f"The file path {path} must be a subpath of "
            f"`--allowed-local-media-path {policy.allowed_local_media_path}`."
        )
    try:
        # O_NONBLOCK: opening a FIFO for reading waits for a writer, which would hold the thread
        # for good; it and any other file that is not a regular one (devices, sockets) is refused
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                raise InvalidRequest(f"Cannot read the file {path}: not a regular file")
            data = f.read(policy.max_bytes + 1)
    except OSError as exc:
        raise InvalidRequest(f"Cannot read the file {path}: {exc.strerror}") from None
    if len(data) > policy.max_bytes:
        raise InvalidRequest(f"The media file is larger than {policy.max_bytes} bytes (--media-max-bytes)")
    return data


def _is_public(addr: str) -> bool:
    ip = ipaddress.ip_address(addr)
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return not (
        ip.is_private
        or ip.is_loopback
        or ip.is_link_local
        or ip.is_multicast
        or ip.is_reserved
        or ip.is_unspecified
    )


def _check_target(url: str, policy: FetchPolicy) -> tuple[str, str, int]:
    """``(host, checked ip, port)`` of an http(s) URL allowed by the policy.

    Raises:
        InvalidRequest: other scheme, domain not allowed (upstream text), unresolvable host, or a
            non-public address without ``--allow-private-media-urls``.
    """
    try:  # urlsplit / .port raise ValueError for a bad port or a bracketed host that is no IPv6
        parts = urlsplit(url)
        host, port = parts.hostname, parts.port
    except ValueError as exc:
        raise InvalidRequest(f"Invalid media URL {url[:80]!r}: {exc}") from None
    if parts.scheme not in ("http", "https") or not host:
        raise InvalidRequest("The URL must be either a HTTP, data or file URL.")
    if policy.allowed_media_domains and host not in policy.allowed_media_domains:
        raise InvalidRequest(
            f"The URL must be from one of the allowed domains: {list(policy.allowed_media_domains)}. "
            f"Input URL domain: {host}"
        )
    port = port or (443 if parts.scheme == "https" else 80)
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except UnicodeError as exc:  # the IDNA codec refuses the host (empty or over-long label, ...)
        raise InvalidRequest(f"Invalid media URL host {host[:80]!r}: {exc}") from None
    except OSError as exc:
        raise MediaFetchFailed(f"Failed to fetch media from {host}: cannot resolve host ({exc})") from None
    # a scoped IPv6 address comes back as "fe80::1%eth0": ipaddress reads it without the scope
    addrs = [str(info[4][0]).split("%", 1)[0] for info in infos]
    if not policy.allow_private:
        refused = [a for a in addrs if not _is_public(a)]
        if refused:
            raise InvalidRequest(
                f"The URL host {host} resolves to a non-public address ({refused[0]}); "
                "media URLs may not reach loopback, link-local or private networks "
                "(start the server with --allow-private-media-urls to allow them)."
            )
    return host, addrs[0], port


def _timed_out(host: str, policy: FetchPolicy) -> MediaFetchFailed:
    return MediaFetchFailed(
        f"Failed to fetch media from {host}: timed out after {policy.timeout} s (--media-fetch-timeout)"
    )


def _http_url(url: str, policy: FetchPolicy) -> bytes:
    # httpx (~0.2 CPU-s to import, most of it its command-line part: click, rich) is imported on
    # the first URL fetch, not by every server process at start: most never fetch a URL.
    import httpx

    # --media-fetch-timeout bounds the whole fetch (redirects, a slow trickle of bytes), as
    # vLLM's total fetch timeout; httpx's own timeout applies per connect / read.
    deadline = time.monotonic() + policy.timeout
    start = url
    for hop in range(policy.max_redirects + 1):
        if hop and not url[:8].lower().startswith(("http://", "https://")):
            # the media server redirected to ftp:, file:, ...: its fault (502), not the client's
            raise MediaFetchFailed(f"Failed to fetch media from {urlsplit(start).hostname or start}: "
                                   f"redirected to a URL that is not http(s) ({url[:60]!r})")
        host, ip, port = _check_target(url, policy)
        parts = urlsplit(url)
        # Connect to the checked address (no second lookup an attacker could change), keep the
        # Host header and the TLS server name of the URL.
        netloc = f"[{ip}]" if ":" in ip else ip
        target = parts._replace(netloc=f"{netloc}:{port}").geturl()
        headers = {"Host": parts.netloc.rsplit("@", 1)[-1]}
        ext = {"sni_hostname": host} if parts.scheme == "https" else {}
        try:
            with (
                httpx.Client(
                    timeout=max(0.001, deadline - time.monotonic()),
                    follow_redirects=False,
                    verify=_tls_context(policy.ca_bundle),
                ) as client,
                client.stream("GET", target, headers=headers, extensions=ext) as resp,
            ):
                if resp.is_redirect and "location" in resp.headers:
                    url = urljoin(url, resp.headers["location"])  # ValueError: 502 below
                    continue
                if resp.status_code >= 400 or resp.is_redirect:  # a redirect without a Location too
                    raise MediaFetchFailed(f"Failed to fetch media from {host}: HTTP {resp.status_code}")
                declared = resp.headers.get("content-length")
                if declared is not None and declared.isdigit() and int(declared) > policy.max_bytes:
                    raise InvalidRequest(
                        f"The media at {host} is larger than {policy.max_bytes} bytes (--media-max-bytes)"
                    )
                chunks, total = [], 0
                for chunk in resp.iter_bytes():
                    if time.monotonic() > deadline:
                        raise _timed_out(host, policy)
                    total += len(chunk)
                    if total > policy.max_bytes:
                        raise InvalidRequest(
                            f"The media at {host} is larger than {policy.max_bytes} bytes (--media-max-bytes)"
                        )
                    chunks.append(chunk)
                return b"".join(chunks)
        except httpx.TimeoutException:
            raise _timed_out(host, policy) from None
        except httpx.HTTPError as exc:
            raise MediaFetchFailed(
                f"Failed to fetch media from {host}: {type(exc).__name__}: {exc}"
            ) from None
        except RenderServiceError:
            raise
        except (httpx.InvalidURL, ValueError, UnicodeError) as exc:
            # httpx builds the redirect request from the answer's Location as it reads the head,
            # also with follow_redirects off: a Location it (or urljoin) cannot take (``data:...``,
            # ``mailto:``, ``http://xn--/``) raises here, the media server's fault
            raise MediaFetchFailed(
                f"Failed to fetch media from {host}: its answer cannot be followed ({type(exc).__name__}: {exc})"
            ) from None
    first = urlsplit(start).hostname or start
    raise MediaFetchFailed(
        f"Failed to fetch media from {first}: more than {policy.max_redirects} redirects (--media-max-redirects)"
    )


def load_url(url: str, policy: FetchPolicy) -> bytes:
    """The bytes behind a media URL.

    Raises:
        InvalidRequest: bad data URL / base64 (upstream text ``Non-base64 digit found``), file
            outside the allowed folder (upstream text), domain not allowed, non-public address,
            over the byte cap, unknown scheme.
        MediaFetchFailed: the http(s) fetch failed (502).
    """
    if not isinstance(url, str):
        raise InvalidRequest("the media URL must be a string")
    scheme = url[:8].lower()
    if scheme.startswith("data:"):
        data = _data_url(url)
        if len(data) > policy.max_bytes:
            raise InvalidRequest(f"The media is larger than {policy.max_bytes} bytes (--media-max-bytes)")
        return data
    if scheme.startswith("file:"):
        return _file_url(url, policy)
    if scheme.startswith(("http:", "https:")):
        return _http_url(url, policy)
    raise InvalidRequest("The URL must be either a HTTP, data or file URL.")
