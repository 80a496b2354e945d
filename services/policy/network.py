"""Network rules: which URLs, hosts, addresses and ports the web tools may reach.

Matching rules (also documented in ``profiles/policy-default.yaml``):

* Host names and patterns are compared case-insensitively after IDNA normalisation
  (``Bücher.example`` is ``xn--bcher-kva.example``) with any trailing dot stripped.
* ``deny_domains``: an entry ``example.com`` denies that host **and every subdomain**
  (``a.b.example.com``).  ``*.example.com`` means the same in a deny list: denying fails closed.
* ``allow_domains`` (when not empty, only matching hosts may be reached): ``example.com``
  allows exactly that host, not its subdomains; ``*.example.com`` allows every subdomain but
  not ``example.com`` itself (list both to allow both).  No other wildcard form is accepted.
* Loopback, private, link-local and reserved addresses (and names such as ``localhost``) are
  refused unless ``allow_private`` lists them **with ports**: ``127.0.0.1:8080``,
  ``localhost:11434``, ``[::1]:8080``, ``10.0.0.0/8:443`` or ``{host: 127.0.0.1, ports: [80, 443]}``.
  A private host listed without ports allows no port at all.
* Non-canonical IP forms (``2130706433``, ``0x7f.1``, ``127.1``) are refused outright.

``check_url`` checks scheme, host and port; the web tool calls it for the first URL and for
every redirect hop.  ``check_address`` checks an address a host name resolved to (DNS
rebinding); pass ``port=`` so the port rule applies to it too.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from services.errors import ConfigError
from services.policy.model import deny as _deny
from services.policy.model import invalid as _invalid

if TYPE_CHECKING:
    from services.policy.document import PrivateHost, Web

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
PRIVATE_NAMES = ("localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback")
_LABEL = re.compile(r"[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?")
_NONCANONICAL = re.compile(r"(0x[0-9a-f]+|[0-9]+)(\.(0x[0-9a-f]+|[0-9]+)){0,3}")


def normalize_host(host: str) -> str:
    """Lower case, IDNA (punycode), trailing dot stripped.  ``ValueError`` if not a host name."""
    host = host.strip().rstrip(".")
    if not host:
        raise ValueError("empty host")
    try:
        return host.encode("idna").decode("ascii").lower()
    except UnicodeError:
        raise ValueError(f"{host!r} is not a valid domain name") from None


def ip_is_private(ip: IPAddress) -> bool:
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return bool(
        ip.is_private
        or ip.is_loopback
        or ip.is_link_local
        or ip.is_multicast
        or ip.is_reserved
        or ip.is_unspecified
        or not ip.is_global
    )


def domain_matches(host: str, pattern: str) -> bool:
    """Allow-list semantics: ``a.com`` is that host only, ``*.a.com`` its subdomains only."""
    pattern = pattern.lower().rstrip(".")
    if pattern.startswith("*."):
        return host.endswith(pattern[1:])
    return host == pattern


def domain_denied_by(host: str, pattern: str) -> bool:
    """Deny-list semantics: ``a.com`` and ``*.a.com`` both cover ``a.com`` and every subdomain."""
    base = pattern.lower().rstrip(".").removeprefix("*.")
    return host == base or host.endswith("." + base)


@dataclass(frozen=True)
class PrivateAllow:
    """One ``allow_private`` entry: a host name or a network, and the ports it may be reached on."""

    ports: frozenset[int]
    host: str | None = None
    network: IPNetwork | None = None

    def covers_host(self, host: str) -> bool:
        if self.host is not None:
            return host == self.host
        try:
            ip = ipaddress.ip_address(host.strip("[]"))
        except ValueError:
            return False
        return self.covers_address(ip)

    def covers_address(self, ip: IPAddress) -> bool:
        if self.network is None:
            return False
        mapped = ip.ipv4_mapped if isinstance(ip, ipaddress.IPv6Address) else None
        if ip.version == self.network.version and ip in self.network:
            return True
        return mapped is not None and self.network.version == 4 and mapped in self.network


def _port(text: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise ValueError(f"{text!r} is not a port number (1-65535)")
    return int(text)


def parse_private_entry(entry: str | PrivateHost) -> PrivateAllow:
    """``host``, ``host:port``, ``[v6]:port``, ``net/len:port`` or ``{host: ..., ports: [...]}``."""
    ports: set[int] = set()
    if not isinstance(entry, str):
        target = entry.host
        ports.update(_port(str(p)) for p in entry.ports)
    else:
        target = str(entry)
        if target.startswith("["):
            inner, sep, rest = target[1:].partition("]")
            if not sep or (rest and not rest.startswith(":")):
                raise ValueError(f"{target!r}: write IPv6 entries as [address]:port")
            target = inner
            if rest:
                ports.add(_port(rest[1:]))
        elif target.count(":") == 1:
            target, port_text = target.split(":")
            ports.add(_port(port_text))
    try:
        return PrivateAllow(frozenset(ports), network=ipaddress.ip_network(target, strict=False))
    except ValueError:
        pass
    if not re.fullmatch(r"[A-Za-z0-9.-]+", target):
        raise ValueError(f"{target!r} is neither a host nor a network")
    return PrivateAllow(frozenset(ports), host=normalize_host(target))


def parse_domain_pattern(pattern: str) -> str:
    """Normalise a domain pattern; only a leading ``*.`` wildcard is accepted."""
    wildcard = pattern.startswith("*.")
    body = pattern[2:] if wildcard else pattern
    if "*" in body:
        raise ValueError(f"{pattern!r}: the only wildcard is a leading '*.' (subdomains)")
    host = normalize_host(body)
    if not all(_LABEL.fullmatch(label) for label in host.split(".")):
        raise ValueError(f"{pattern!r} is not a domain name")
    return ("*." if wildcard else "") + host


class NetworkRules:
    """The ``web:`` section of a policy, parsed and normalised."""

    def __init__(self, web: Web, error: Callable[[Sequence[Any], str], ConfigError]) -> None:
        self.searxng_url: str | None = web.searxng_url
        self.schemes: tuple[str, ...] = tuple(web.schemes or ("https",))
        lists: dict[str, tuple[str, ...]] = {}
        for key, given in (("allow_domains", web.allow_domains), ("deny_domains", web.deny_domains)):
            patterns: list[str] = []
            for i, pattern in enumerate(given):
                try:
                    patterns.append(parse_domain_pattern(pattern))
                except ValueError as exc:
                    raise error(("web", key, i), str(exc)) from None
            lists[key] = tuple(patterns)
        self.allow_domains = lists["allow_domains"]
        self.deny_domains = lists["deny_domains"]
        self.allow_private: list[PrivateAllow] = []
        for i, entry in enumerate(web.allow_private):
            try:
                self.allow_private.append(parse_private_entry(entry))
            except ValueError as exc:
                raise error(("web", "allow_private", i), str(exc)) from None

    @property
    def allow_private_hosts(self) -> set[str]:
        return {e.host for e in self.allow_private if e.host is not None}

    @property
    def allow_private_nets(self) -> list[IPNetwork]:
        return [e.network for e in self.allow_private if e.network is not None]

    # -- checks ---------------------------------------------------------------------------
    def check_url(self, url: Any, *, arg: str = "url") -> dict[str, Any]:
        if not isinstance(url, str) or not url or len(url) > 8192:
            raise _invalid("web.url", f"{arg} must be a non-empty URL of at most 8192 characters")
        if any(ord(c) < 33 or ord(c) == 127 for c in url):
            raise _invalid("web.url", f"{arg} contains white space or control characters")
        try:
            parts = urlsplit(url)
            port = parts.port
        except ValueError as exc:
            raise _invalid("web.url", f"{arg} is not a valid URL ({exc})") from None
        scheme = parts.scheme.lower()
        if scheme not in self.schemes:
            raise _deny(
                "web.schemes",
                f"scheme {scheme or '(none)'!r} is not allowed (allowed: {', '.join(self.schemes)})",
                url=url,
            )
        if parts.username is not None or parts.password is not None or "@" in parts.netloc:
            raise _deny("web.userinfo", "URLs with user information (user@host) are refused", url=url)
        if not (parts.hostname or "").rstrip("."):
            raise _invalid("web.url", f"{arg} has no host")
        try:
            host = normalize_host(parts.hostname or "")
        except ValueError:
            raise _invalid("web.url", f"{arg} has a host that is not a valid domain name") from None
        effective_port = port or (443 if scheme == "https" else 80)
        self.check_host(host, url=url, port=effective_port)
        return {"url": url, "scheme": scheme, "host": host, "port": effective_port}

    def check_host(self, host: str, *, url: str = "", port: int | None = None) -> None:
        host = host.lower().rstrip(".")
        for pattern in self.deny_domains:
            if domain_denied_by(host, pattern):
                raise _deny("web.deny_domains", f"host {host!r} is denied by {pattern!r}", url=url, host=host)
        private_entry = any(e.covers_host(host) for e in self.allow_private)
        if self.allow_domains and not any(domain_matches(host, p) for p in self.allow_domains) and not private_entry:
            raise _deny("web.allow_domains", f"host {host!r} is not on the allowed domain list", url=url, host=host)
        try:
            ip = ipaddress.ip_address(host.strip("[]"))
        except ValueError:
            if _NONCANONICAL.fullmatch(host):
                raise _deny(
                    "web.noncanonical_ip",
                    f"host {host!r} is a non-canonical IP address form; write the address in dotted decimal",
                    url=url,
                    host=host,
                ) from None
            if host in PRIVATE_NAMES or host.endswith(".localhost"):
                self._check_private(host, None, port, url=url)
            return
        self.check_address(ip, host=host, url=url, port=port)

    def check_address(self, ip: IPAddress | str, *, host: str = "", url: str = "", port: int | None = None) -> None:
        """Refuse loopback, private, link-local and other non-public addresses unless
        ``allow_private`` lists them with ``port``.  (``port=None``: the caller checked the
        port with ``check_url`` already; only the address is checked.)"""
        if isinstance(ip, str):
            ip = ipaddress.ip_address(ip.split("%", 1)[0])
        if ip_is_private(ip):
            self._check_private(host, ip, port, url=url)

    def _check_private(self, host: str, ip: IPAddress | None, port: int | None, *, url: str) -> None:
        host = host.lower().rstrip(".")
        entries = [
            e
            for e in self.allow_private
            if (host and e.host is not None and e.host == host) or (ip is not None and e.covers_address(ip))
        ]
        what = f"address {ip} ({host or 'literal'})" if ip is not None else f"host {host!r}"
        if not entries:
            raise _deny(
                "web.private_address",
                f"{what} is loopback, private or reserved; add it with its port to web.allow_private to reach it",
                url=url,
                host=host,
                address=str(ip) if ip is not None else None,
            )
        if port is not None and not any(port in e.ports for e in entries):
            allowed = sorted({p for e in entries for p in e.ports})
            raise _deny(
                "web.private_port",
                f"{what} may be reached only on the ports web.allow_private lists "
                f"({', '.join(map(str, allowed)) or 'none'}), not {port}",
                url=url,
                host=host,
                port=port,
            )
