"""Where push deliveries may connect (server-side request forgery): a tenant admin chooses a
webhook's URL, and the server POSTs to it from inside the cluster. By default an address in any
range below is refused — checked on the address actually connected to, after resolving the name,
when the subscription is declared and again at every delivery (a name can be pointed elsewhere
after it was declared):

- loopback, unspecified and link-local addresses (the cloud metadata services live at
  169.254.169.254 and its neighbours), and the other metadata addresses clouds use;
- **private ranges** (RFC 1918, unique local IPv6, the RFC 6598 shared space): the Kubernetes
  API's Service, cluster DNS, pods, nodes and the database live there, so a receiver inside the
  cluster must be allowed by name or range;
- multicast, broadcast and reserved ranges.

An operator lets through what the cluster legitimately needs with an allow-list (``orbit server
--webhook-allow``): CIDRs, single addresses, host names, or ``*.suffix`` patterns. A host allowed
by name may resolve to anything; an address inside an allowed range is allowed whatever name led
to it. `orbit dev` allows loopback.
"""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass

import httpx

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

#: (what the range is, the networks): refused unless allowed.
REFUSED_BY_DEFAULT: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("a loopback address", ("127.0.0.0/8", "::1/128")),
    ("an unspecified address", ("0.0.0.0/8", "::/128")),
    ("a link-local address (cloud metadata lives there)", ("169.254.0.0/16", "fe80::/10")),
    ("a cloud metadata address", ("100.100.100.200/32", "fd00:ec2::254/128")),
    (
        "a private address (RFC 1918 or unique local)",
        ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7"),
    ),
    ("a shared address (RFC 6598)", ("100.64.0.0/10",)),
    ("a multicast address", ("224.0.0.0/4", "ff00::/8")),
    ("a reserved or broadcast address", ("240.0.0.0/4",)),
)
_REFUSED = [
    (what, ipaddress.ip_network(cidr)) for what, cidrs in REFUSED_BY_DEFAULT for cidr in cidrs
]
#: The well-known NAT64 prefix: its addresses reach the IPv4 address in their last 32 bits.
_NAT64 = ipaddress.ip_network("64:ff9b::/96")
#: Loopback, which `orbit dev` allows: its receivers run on the same machine.
LOOPBACK = ("127.0.0.0/8", "::1/128")


class EgressRefused(Exception):
    """The URL's host may not be connected to; the message says why and what to do."""


class Unresolvable(EgressRefused):
    """The URL's host name does not resolve (now: it may later)."""


@dataclass(frozen=True)
class EgressPolicy:
    """What is allowed beyond the public internet."""

    networks: tuple[Network, ...] = ()
    hosts: tuple[str, ...] = ()  # lower-case names, or "*.suffix"

    @classmethod
    def parse(cls, entries: Iterable[str]) -> EgressPolicy:
        """From ``--webhook-allow`` entries; ValueError names an entry that is neither a CIDR,
        an address nor a host name."""
        networks: list[Network] = []
        hosts: list[str] = []
        for raw in entries:
            entry = raw.strip().lower()
            if not entry:
                continue
            try:
                networks.append(ipaddress.ip_network(entry, strict=False))
                continue
            except ValueError:
                pass
            name = entry.removeprefix("*.")
            labels = name.split(".")
            if not name or not all(_is_label(label) for label in labels):
                raise ValueError(
                    f"webhook allow-list entry {raw!r} is neither a CIDR (10.20.0.0/16), an "
                    "address, a host name (receiver.billing.svc) nor *.suffix"
                )
            hosts.append(entry)
        return cls(tuple(networks), tuple(hosts))

    def allows_host(self, host: str) -> bool:
        host = host.lower().rstrip(".")
        return any(
            host == entry or (entry.startswith("*.") and host.endswith(entry[1:]))
            for entry in self.hosts
        )

    def refusal(self, address: Address) -> str | None:
        """Why ``address`` may not be connected to, or None. An IPv6 address that reaches an
        IPv4 one (IPv4-mapped, NAT64) is judged by both."""
        embedded = _embedded_ipv4(address)
        judged: list[Address] = [address] if embedded is None else [address, embedded]
        if any(a in network for a in judged for network in self.networks):
            return None
        for what, network in _REFUSED:
            if any(a in network for a in judged):
                return what
        return None

    def check(self, host: str, port: int) -> list[Address]:
        """The addresses ``host`` resolves to, each allowed; EgressRefused otherwise (a name
        that does not resolve, or any of its addresses refused). Connect to one of these, not
        to the name again: a second lookup could answer differently."""
        try:
            found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError) as exc:
            raise Unresolvable(f"host {host!r} does not resolve") from exc
        addresses = list(dict.fromkeys(ipaddress.ip_address(info[4][0]) for info in found))
        if self.allows_host(host):
            return addresses
        for address in addresses:
            why = self.refusal(address)
            if why is not None:
                raise EgressRefused(
                    f"host {host!r} resolves to {why}, which push deliveries may not reach; "
                    "a server operator can allow it (orbit server --webhook-allow)"
                )
        return addresses


def _is_label(label: str) -> bool:
    return 0 < len(label) <= 63 and label.replace("-", "").replace("_", "").isalnum()


def _embedded_ipv4(address: Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv4-mapped or NAT64 IPv6 address reaches."""
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return address.ipv4_mapped
        if address in _NAT64:
            return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    return None


@dataclass(frozen=True)
class PinnedTarget:
    """Where one delivery connects: the checked address in the URL, the original host in the
    Host header and (for https) in SNI, so the certificate is verified for the host name."""

    url: httpx.URL
    host_header: str
    extensions: dict[str, str]


def pin(url: str, egress: EgressPolicy) -> PinnedTarget:
    """Resolve ``url``'s host once, check every address (EgressRefused), and aim at the first:
    what is checked is what is connected to. Raises httpx.InvalidURL."""
    parsed = httpx.URL(url)
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise httpx.InvalidURL(url)
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    address = egress.check(parsed.host, port)[0]
    extensions = {"sni_hostname": parsed.host} if parsed.scheme == "https" else {}
    return PinnedTarget(
        parsed.copy_with(host=str(address)), parsed.netloc.decode("ascii"), extensions
    )
