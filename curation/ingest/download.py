"""The one client that fetches images from the web, with SSRF protection.

Every hop (the URL and each redirect) is checked before anything is sent: the scheme must be
http(s), the host must resolve only to global addresses (no loopback, private, link-local, cloud
metadata, multicast or reserved ranges) unless its network is listed in
DOWNLOAD_ALLOWED_PRIVATE_NETWORKS, and the connection goes to the address that was checked, so a
DNS answer that changes between check and connect (rebinding) cannot redirect it. The body is read
in chunks up to DOWNLOAD_MAX_BYTES within DOWNLOAD_TIMEOUT seconds overall: the deadline is a
wall clock for the whole response (headers and body of every hop), enforced by a watchdog that
shuts the socket down when it passes, so a server trickling one byte a second cannot hold a worker
slot past it (a per-read socket timeout alone would reset with every byte).
"""
from __future__ import annotations

import http.client
import ipaddress
import re
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

from django.conf import settings

from .report import RowError

USER_AGENT = "CaptionLab-ingest/0.1 (+image-caption dataset curation)"
MAX_URL_LENGTH = 2048


@dataclass
class Fetched:
    url: str
    data: bytes
    content_type: str


# The shape of nearly every image URL: checked with one regex; anything else takes the full parse.
_SIMPLE_URL = re.compile(r"(https?)://([A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?)(?::(\d{1,5}))?(?:[/?#][^\s@\\]*)?", re.ASCII)


def check_url_syntax(url: str) -> tuple[str, str, int]:
    """Scheme, host and port of an image URL, or a RowError saying what is wrong with it."""
    simple = _SIMPLE_URL.fullmatch(url)
    if simple and len(url) <= MAX_URL_LENGTH:
        scheme, host, port = simple.groups()
        if port is None or 0 < int(port) < 65536:
            return scheme, host.lower(), int(port) if port else (443 if scheme == "https" else 80)
    if len(url) > MAX_URL_LENGTH:
        raise RowError("bad_url", f"URL longer than {MAX_URL_LENGTH} characters")
    if any(ch.isspace() for ch in url):
        raise RowError("bad_url", "URL contains whitespace")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise RowError("bad_url", f"not a valid URL: {exc}") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise RowError("bad_url", f"only http and https image URLs are imported, not {scheme or 'no scheme'!r}")
    if not parts.hostname:
        raise RowError("bad_url", "URL has no host")
    if parts.username or parts.password:
        raise RowError("bad_url", "URLs with credentials are refused")
    return scheme, parts.hostname, port or (443 if scheme == "https" else 80)


def _allowed_private(ip) -> bool:
    for net in settings.DOWNLOAD_ALLOWED_PRIVATE_NETWORKS:
        try:
            if ip in ipaddress.ip_network(net, strict=False):
                return True
        except ValueError:
            continue
    return False


def check_address(ip_text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    ip = ipaddress.ip_address(ip_text.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:
        ip = ip.ipv4_mapped
    if not ip.is_global or ip.is_multicast:
        if not _allowed_private(ip):
            kind = (
                "loopback" if ip.is_loopback else
                "link-local (cloud metadata)" if ip.is_link_local else
                "private" if ip.is_private else "non-public"
            )
            raise RowError("blocked_address", f"host resolves to a {kind} address ({ip}); refused")
    return ip


def resolve_public(host: str, port: int) -> str:
    """The first address of ``host``, after checking that every address it resolves to is allowed."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise RowError("dns_error", f"cannot resolve {host}: {exc.strerror}") from None
    addresses = [info[4][0] for info in infos]
    if not addresses:
        raise RowError("dns_error", f"{host} has no address")
    for address in addresses:
        check_address(address)
    return addresses[0]


class _Watchdog:
    """Shuts a connection's socket down at a wall-clock deadline; ``fired`` says whether it did."""

    def __init__(self, conn, seconds: float):
        self.fired = False
        self._conn = conn
        self._timer = threading.Timer(max(seconds, 0.0), self._fire)
        self._timer.daemon = True
        self._timer.start()

    def _fire(self):
        self.fired = True
        sock = getattr(self._conn, "sock", None)
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cancel(self):
        self._timer.cancel()


class _PinnedHTTPConnection(http.client.HTTPConnection):
    def __init__(self, host, port, address, timeout):
        super().__init__(host, port, timeout=timeout)
        self._address = address

    def connect(self):
        self.sock = socket.create_connection((self._address, self.port), self.timeout)


class _PinnedHTTPSConnection(http.client.HTTPSConnection):
    def __init__(self, host, port, address, timeout):
        super().__init__(host, port, timeout=timeout, context=ssl.create_default_context())
        self._address = address

    def connect(self):
        sock = socket.create_connection((self._address, self.port), self.timeout)
        self.sock = self._context.wrap_socket(sock, server_hostname=self.host)


def fetch(url: str, *, max_bytes: int | None = None, timeout: float | None = None) -> Fetched:
    max_bytes = max_bytes or settings.DOWNLOAD_MAX_BYTES
    timeout = timeout or settings.DOWNLOAD_TIMEOUT
    deadline = time.monotonic() + timeout
    for _hop in range(settings.DOWNLOAD_MAX_REDIRECTS + 1):
        scheme, host, port = check_url_syntax(url)
        address = resolve_public(host, port)
        parts = urlsplit(url)
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        conn_class = _PinnedHTTPSConnection if scheme == "https" else _PinnedHTTPConnection
        remaining = max(deadline - time.monotonic(), 0.1)
        conn = conn_class(host, port, address, timeout=min(remaining, timeout))
        watchdog = _Watchdog(conn, remaining)
        try:
            conn.request("GET", target, headers={"User-Agent": USER_AGENT, "Accept": "image/*"})
            response = conn.getresponse()
            if response.status in (301, 302, 303, 307, 308):
                location = response.getheader("Location")
                if not location:
                    raise RowError("http_error", f"redirect {response.status} without a Location")
                url = urljoin(url, location)
                continue
            if response.status != 200:
                raise RowError("http_error", f"server answered {response.status} {response.reason}")
            length = response.getheader("Content-Length")
            if length and length.isdigit() and int(length) > max_bytes:
                raise RowError("too_large", f"image is {length} bytes; the limit is {max_bytes}")
            chunks, size = [], 0
            while True:
                if time.monotonic() > deadline:
                    raise RowError("timeout", f"download took longer than {timeout:g} s")
                chunk = response.read1(64 * 1024)
                if not chunk:
                    break
                size += len(chunk)
                if size > max_bytes:
                    raise RowError("too_large", f"image is larger than the {max_bytes}-byte limit")
                chunks.append(chunk)
            if watchdog.fired:
                raise RowError("timeout", f"download took longer than {timeout:g} s")
            return Fetched(url=url, data=b"".join(chunks), content_type=response.getheader("Content-Type", ""))
        except (socket.timeout, TimeoutError):
            raise RowError("timeout", f"no answer within {timeout:g} s") from None
        except (OSError, http.client.HTTPException) as exc:
            if watchdog.fired:
                raise RowError("timeout", f"download took longer than {timeout:g} s") from None
            raise RowError("network_error", f"{type(exc).__name__}: {exc}") from None
        finally:
            watchdog.cancel()
            conn.close()
    raise RowError("too_many_redirects", f"more than {settings.DOWNLOAD_MAX_REDIRECTS} redirects")
