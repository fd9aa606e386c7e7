"""TLS between scheduler, workers and the coordinator, with the certificates the user supplies (Dask's own
Security settings: mutual authentication, encryption required)."""

from __future__ import annotations

from pathlib import Path

from refbench.errors import UserError


def security(ca_file: str, cert: str, key: str, role: str):
    """A distributed.Security for ``role`` (scheduler | worker | client), or None without TLS settings."""
    from distributed import Security

    if not (ca_file or cert or key):
        return None
    if not (ca_file and cert):
        raise UserError("TLS needs both a CA file (--tls-ca-file) and a certificate (--tls-cert).")
    for label, path in (("CA file", ca_file), ("certificate", cert), ("key", key)):
        if path and not Path(path).is_file():
            raise UserError(f"the TLS {label} {path} does not exist.")
    return Security(require_encryption=True, tls_ca_file=ca_file,
                    **{f"tls_{role}_cert": cert, f"tls_{role}_key": key or None})


def check_address(address: str, tls: bool) -> None:
    from distributed.comm import parse_address, parse_host_port

    try:
        parse_host_port(parse_address(address)[1])
    except ValueError as exc:
        raise UserError(f"{address} is not a scheduler address such as tcp://10.0.0.1:8786 ({exc}).") from None
    if tls and not address.startswith("tls://"):
        raise UserError(f"with TLS settings the scheduler address must start with tls://, not {address}.")
    if not tls and address.startswith("tls://"):
        raise UserError(f"{address} is a TLS address: give --tls-ca-file, --tls-cert and --tls-key.")
