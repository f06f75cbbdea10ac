"""Server credentials that follow their files: TLS certificates and the bearer token.

Files are polled (content compared at most once per interval) rather than watched with
inotify: Kubernetes updates Secret volumes by swapping a symlink, which content polling always
sees. The check runs on the path that needs the value (a TLS handshake, an authenticated call),
so there is no background task; between checks a call costs one clock read.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import grpc
import structlog
from cryptography import x509
from cryptography.hazmat.primitives import serialization

log = structlog.get_logger("actuator_svc.rpc")
DEFAULT_POLL_SECONDS = 30.0


class CredentialFileError(ValueError):
    """A credential file is missing, unreadable or malformed; the message names the file."""


@dataclass(frozen=True)
class TlsFiles:
    """Server certificate and key; a client CA turns on mutual TLS."""

    cert_file: Path
    key_file: Path
    client_ca_file: Path | None = None


class WatchedFiles:
    """The contents of a few files, re-read when `poll()` finds the interval has passed."""

    def __init__(
        self,
        paths: Sequence[Path],
        *,
        interval_seconds: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.paths = tuple(paths)
        self._interval_seconds = interval_seconds
        self._clock = clock
        # The TLS certificate fetcher runs on grpc's own threads, calls on the event loop.
        self._lock = threading.Lock()
        self.contents = self._read()
        self._checked_at = clock()

    def _read(self) -> tuple[bytes, ...]:
        contents = []
        for path in self.paths:
            try:
                contents.append(path.read_bytes())
            except OSError as exc:
                raise CredentialFileError(f"{path}: {exc.strerror or exc}") from exc
        return tuple(contents)

    def poll(self) -> tuple[bytes, ...] | None:
        """The new contents if the interval has passed and a file changed, else None.

        A file that cannot be read (mid-rotation) leaves the known contents in place."""
        with self._lock:
            now = self._clock()
            if now - self._checked_at < self._interval_seconds:
                return None
            self._checked_at = now
            try:
                contents = self._read()
            except CredentialFileError as exc:
                log.warning("credential_file_unreadable", error=str(exc))
                return None
            if contents == self.contents:
                return None
            self.contents = contents
            return contents


def _certificate_configuration(
    files: TlsFiles, contents: tuple[bytes, ...]
) -> grpc.ServerCertificateConfiguration:
    """grpc's configuration from PEM contents, checked first: grpc itself would only fail the
    handshakes. Raises CredentialFileError naming the file at fault."""
    cert, key = contents[0], contents[1]
    try:
        chain = x509.load_pem_x509_certificates(cert)
    except ValueError as exc:
        raise CredentialFileError(f"{files.cert_file}: not a PEM certificate") from exc
    try:
        private_key = serialization.load_pem_private_key(key, password=None)
    except (ValueError, TypeError) as exc:
        raise CredentialFileError(f"{files.key_file}: not an unencrypted PEM key") from exc
    raw = serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    if chain[0].public_key().public_bytes(*raw) != private_key.public_key().public_bytes(*raw):
        raise CredentialFileError(
            f"{files.key_file}: does not match the certificate in {files.cert_file}"
        )
    client_ca = contents[2] if files.client_ca_file is not None else None
    if client_ca is not None:
        try:
            x509.load_pem_x509_certificates(client_ca)
        except ValueError as exc:
            raise CredentialFileError(f"{files.client_ca_file}: not a PEM certificate") from exc
    return grpc.ssl_server_certificate_configuration([(key, cert)], root_certificates=client_ca)


class ReloadingCertificates:
    """TLS server credentials whose certificate, key and client CA follow their files.

    grpc asks the fetcher before each handshake; a changed, valid set is handed over and only
    new connections use it. An invalid set is logged and the previous one kept."""

    def __init__(
        self,
        files: TlsFiles,
        *,
        poll_seconds: float = DEFAULT_POLL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._files = files
        paths = [files.cert_file, files.key_file]
        if files.client_ca_file is not None:
            paths.append(files.client_ca_file)
        self._watched = WatchedFiles(paths, interval_seconds=poll_seconds, clock=clock)
        self._initial = _certificate_configuration(files, self._watched.contents)

    def _fetch(self) -> grpc.ServerCertificateConfiguration | None:
        contents = self._watched.poll()
        if contents is None:
            return None
        try:
            configuration = _certificate_configuration(self._files, contents)
        except CredentialFileError as exc:
            log.warning("tls_certificates_rejected", error=str(exc))
            return None
        log.info("tls_certificates_reloaded", cert_file=str(self._files.cert_file))
        return configuration

    def server_credentials(self) -> grpc.ServerCredentials:
        """Credentials for `add_secure_port`; mutual TLS when a client CA is configured."""
        return grpc.dynamic_ssl_server_credentials(
            self._initial,
            # grpc documents None as "no change"; the stubs do not allow it.
            self._fetch,  # type: ignore[arg-type]
            require_client_authentication=self._files.client_ca_file is not None,
        )


class BearerToken:
    """The token callers must send: fixed, or read from a file and re-read when it changes."""

    def __init__(
        self,
        *,
        token: str = "",
        token_file: Path | None = None,
        poll_seconds: float = DEFAULT_POLL_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._watched = (
            WatchedFiles([token_file], interval_seconds=poll_seconds, clock=clock)
            if token_file is not None
            else None
        )
        self._token = token
        if self._watched is not None:
            self._token = self._parse(self._watched.contents[0])
            if not self._token:
                raise CredentialFileError(f"{token_file}: the token file is empty")

    @staticmethod
    def _parse(content: bytes) -> str:
        return content.decode("utf-8", errors="replace").strip()

    def current(self) -> str:
        """The token now in force (an emptied file keeps the previous token)."""
        if self._watched is not None:
            contents = self._watched.poll()
            if contents is not None:
                token = self._parse(contents[0])
                if token:
                    self._token = token
                    log.info("auth_token_reloaded", token_file=str(self._watched.paths[0]))
                else:
                    log.warning("auth_token_file_empty", token_file=str(self._watched.paths[0]))
        return self._token
