"""Push deliveries from the sender's side (orbit/engines/deliveries.py, egress.py, webhooks.py),
against real local receivers and MariaDB: where a delivery may connect — decided on the address
actually connected to, after resolving the name, at delivery time — what is kept of a refused or
failed one, and whose signing secret it may use."""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from orbit.engines import deliveries
from orbit.engines.egress import EgressPolicy, EgressRefused, pin
from orbit.engines.webhooks import SecretDirectory, SecretUnavailable
from orbit.metrics.server import Metrics
from orbit_store.schema import subscriptions

from ..drivers.delivery_driver import DeliveryDriver
from ..drivers.pulse_driver import PulseDriver

SECRET = "whsec_" + base64.b64encode(b"s" * 32).decode()


@dataclass
class LocalReceiver:
    """A real HTTP(S) receiver on 127.0.0.1 recording each request's Host header."""

    status: int = 204
    body: bytes = b""
    hosts: list[str] = field(default_factory=list)
    server: ThreadingHTTPServer | None = None

    def start(self, tls: ssl.SSLContext | None = None) -> LocalReceiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length", 0)))
                receiver.hosts.append(self.headers["host"])
                self.send_response(receiver.status)
                self.send_header("content-length", str(len(receiver.body)))
                self.end_headers()
                self.wfile.write(receiver.body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if tls is not None:
            self.server.socket = tls.wrap_socket(self.server.socket, server_side=True)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    @property
    def port(self) -> int:
        assert self.server is not None
        return int(self.server.server_address[1])

    def stop(self) -> None:
        assert self.server is not None
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[LocalReceiver]:
    started = LocalReceiver().start()
    yield started
    started.stop()


@pytest.fixture
def secrets_dir(tmp_path: Path, pulse: PulseDriver) -> Path:
    (tmp_path / pulse.namespace).mkdir()
    (tmp_path / pulse.namespace / "hook-secret").write_text(SECRET)
    return tmp_path


def sender_with(
    pulse: PulseDriver, secrets_dir: Path, allow: list[str], **kwargs: object
) -> deliveries.WebhookSender:
    return deliveries.WebhookSender(
        pulse.engine, Metrics(pulse.engine), secrets_dir, egress=EgressPolicy.parse(allow), **kwargs
    )


def push_to(delivery: DeliveryDriver, url: str) -> None:
    """A push subscription to ``url`` (written as the store keeps it: the API's declaration
    check is not what these tests judge) and one event for it."""
    delivery.subscribe("hook", "push", max_attempts=3)
    delivery.pulse.tx(
        lambda c: c.execute(
            subscriptions.update()
            .where(subscriptions.c.namespace == delivery.namespace, subscriptions.c.name == "hook")
            .values(url=url)
        )
    )
    delivery.succeeded_task()


def run(sender: deliveries.WebhookSender, delivery: DeliveryDriver) -> str | None:
    """One pass; the delivery's last_error afterwards (None once delivered)."""
    try:
        sender.run_pass(namespace=delivery.namespace)
    finally:
        sender.close()
    (row,) = delivery.deliveries("hook")
    return None if row.state == "DELIVERED" else str(row.last_error)


def test_a_name_that_resolves_to_loopback_is_refused_at_delivery_and_never_sent(
    delivery: DeliveryDriver, pulse: PulseDriver, secrets_dir: Path, receiver: LocalReceiver
) -> None:
    """The URL names a host, not an address: the sender resolves it, finds loopback and sends
    nothing — the check is on the address, made when delivering, not only when declaring."""
    push_to(delivery, f"http://localhost:{receiver.port}/hook")
    error = run(sender_with(pulse, secrets_dir, []), delivery)
    assert error is not None and "resolves to a loopback address" in error
    assert "--webhook-allow" in error
    assert receiver.hosts == []


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://169.254.169.254/latest/meta-data/", "a link-local address"),
        ("http://[::1]:9/hook", "a loopback address"),
        ("http://[::ffff:127.0.0.1]:9/hook", "a loopback address"),
        ("http://0.0.0.0:9/hook", "an unspecified address"),
        ("http://10.0.0.1/hook", "a private address"),
        ("http://[fd00:ec2::254]/latest", "a cloud metadata address"),
    ],
)
def test_metadata_link_local_unspecified_and_private_addresses_are_refused_by_default(
    delivery: DeliveryDriver, pulse: PulseDriver, secrets_dir: Path, url: str, why: str
) -> None:
    push_to(delivery, url)
    error = run(sender_with(pulse, secrets_dir, []), delivery)
    assert error is not None and f"resolves to {why}" in error


def test_an_allowed_name_is_reached_at_the_checked_address_with_its_own_host_header(
    delivery: DeliveryDriver, pulse: PulseDriver, secrets_dir: Path, receiver: LocalReceiver
) -> None:
    push_to(delivery, f"http://localhost:{receiver.port}/hook")
    assert run(sender_with(pulse, secrets_dir, ["localhost"]), delivery) is None
    assert receiver.hosts == [f"localhost:{receiver.port}"]


def test_an_allowed_range_admits_its_addresses_and_nothing_else() -> None:
    policy = EgressPolicy.parse(["10.20.0.0/16", "*.billing.svc.cluster.local"])
    assert policy.refusal(ipaddress.ip_address("10.20.3.4")) is None
    assert policy.refusal(ipaddress.ip_address("10.21.0.1")) == (
        "a private address (RFC 1918 or unique local)"
    )
    assert policy.allows_host("hooks.billing.svc.cluster.local")
    assert not policy.allows_host("kubernetes.default.svc.cluster.local")
    with pytest.raises(ValueError, match="neither a CIDR"):
        EgressPolicy.parse(["not a host/"])


def test_a_pinned_https_target_keeps_the_host_name_for_sni_and_certificate_checks() -> None:
    target = pin("https://localhost:8443/hook?x=1", EgressPolicy.parse(["localhost"]))
    assert target.url.host in ("127.0.0.1", "::1")
    assert (target.url.port, target.url.path, target.url.query) == (8443, "/hook", b"x=1")
    assert target.host_header == "localhost:8443"
    assert target.extensions == {"sni_hostname": "localhost"}
    with pytest.raises(EgressRefused, match="loopback"):
        pin("https://localhost/hook", EgressPolicy())


def test_https_is_verified_for_the_host_name_while_connecting_to_the_address(
    delivery: DeliveryDriver, pulse: PulseDriver, secrets_dir: Path, tmp_path: Path
) -> None:
    """The receiver's certificate names ``localhost`` only (no IP address): the delivery, sent
    to 127.0.0.1, is accepted because SNI and verification use the host name."""
    cert, key = _self_signed("localhost", tmp_path)
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_tls.load_cert_chain(cert, key)
    tls_receiver = LocalReceiver().start(server_tls)
    try:
        push_to(delivery, f"https://localhost:{tls_receiver.port}/hook")
        trust = ssl.create_default_context(cafile=str(cert))
        sender = sender_with(
            pulse, secrets_dir, ["localhost"], transport=httpx.HTTPTransport(verify=trust)
        )
        assert run(sender, delivery) is None
        assert tls_receiver.hosts == [f"localhost:{tls_receiver.port}"]
    finally:
        tls_receiver.stop()


def test_a_failed_delivery_keeps_a_status_and_our_reason_never_the_receivers_body(
    delivery: DeliveryDriver, pulse: PulseDriver, secrets_dir: Path, receiver: LocalReceiver
) -> None:
    receiver.status, receiver.body = 500, b"stack trace: db password=hunter2"
    push_to(delivery, f"http://127.0.0.1:{receiver.port}/hook")
    error = run(sender_with(pulse, secrets_dir, ["127.0.0.1/32"]), delivery)
    assert error == "HTTP 500"


def test_a_receiver_that_cannot_be_reached_is_described_in_our_words(
    delivery: DeliveryDriver, pulse: PulseDriver, secrets_dir: Path
) -> None:
    push_to(delivery, "http://127.0.0.1:9/hook")  # discard port: nothing listens
    error = run(sender_with(pulse, secrets_dir, ["127.0.0.0/8"]), delivery)
    assert error == "ConnectError: could not connect (refused, unreachable or TLS failed)"


def test_a_namespace_signs_only_with_its_own_folder_and_others_look_absent(
    tmp_path: Path,
) -> None:
    """Seed §11: secrets are scoped to one namespace. ``billing`` names ``shop``'s secret: the
    answer is word for word the one for a name no namespace uses."""
    (tmp_path / "shop").mkdir()
    (tmp_path / "shop" / "hook").write_text(SECRET)
    (tmp_path / "shop" / "only-shop").write_text(SECRET)
    secrets = SecretDirectory(tmp_path)
    assert secrets.key("shop", "hook") == b"s" * 32

    with pytest.raises(SecretUnavailable) as theirs:
        secrets.key("billing", "only-shop")
    (tmp_path / "shop" / "only-shop").unlink()
    with pytest.raises(SecretUnavailable) as nobodys:
        secrets.key("billing", "only-shop")
    assert str(theirs.value) == str(nobodys.value)
    assert "not found for namespace 'billing'" in str(theirs.value)
    with pytest.raises(SecretUnavailable, match="not a plain file name"):
        secrets.key("billing", "../shop/hook")


def _self_signed(name: str, folder: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path
