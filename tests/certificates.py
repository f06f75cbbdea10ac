"""A throw-away PKI for TLS tests on loopback: a CA and leaves it signs, in PEM."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

Issuer = tuple[x509.Certificate, ec.EllipticCurvePrivateKey]


def new_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def certificate(
    subject: str,
    key: ec.EllipticCurvePrivateKey,
    *,
    issuer: Issuer | None = None,
    alt_names: Sequence[x509.GeneralName] = (),
) -> x509.Certificate:
    """A self-signed CA certificate without `issuer`, else a leaf it signs naming `alt_names`
    (what TLS checks the host against); valid from 5 minutes ago for a day."""
    now = dt.datetime.now(dt.UTC)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    issuer_name, issuer_key = (issuer[0].subject, issuer[1]) if issuer else (name, key)
    builder = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=issuer is None, path_length=None), critical=True)
    )
    if alt_names:
        builder = builder.add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def pem(item: x509.Certificate | ec.EllipticCurvePrivateKey) -> bytes:
    """A certificate, or an unencrypted PKCS#8 private key, in PEM."""
    if isinstance(item, x509.Certificate):
        return item.public_bytes(serialization.Encoding.PEM)
    return item.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
