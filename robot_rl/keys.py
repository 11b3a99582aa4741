"""CURVE key files for the learner <-> actor link (ZeroMQ CURVE + ZAP, via `zmq.auth`).

Layout written by `generate_keys(directory)` (secret files are mode 0600)::

    directory/server.key, server.key_secret          the learner's key pair
    directory/client.key, client.key_secret          an actor's key pair (more with `add_client`)
    directory/authorized_clients/client.key          public keys the learner accepts

Copy `server.key` (public) and one client pair to each actor machine; keep `server.key_secret` on the learner.

Usage::

    generate_keys("keys")                              # robot-rl keys generate keys  (CLI, later)
    server = ServerKeys.from_dir("keys")               # learner: bind_learner(..., keys=server)
    client = ClientKeys.from_dir("keys")               # actor:   connect_actor(..., keys=client)
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from robot_rl.errors import ConfigError

SERVER = "server"
AUTHORIZED_DIR = "authorized_clients"


@dataclasses.dataclass(frozen=True)
class ServerKeys:
    """The learner's CURVE key pair (z85 bytes) and the client public keys it accepts."""

    public: bytes
    secret: bytes
    authorized: frozenset[bytes]

    def __repr__(self) -> str:  # never print a secret
        return f"ServerKeys(public={self.public!r}, authorized={len(self.authorized)} key(s))"

    @classmethod
    def from_dir(cls, directory: str | os.PathLike[str]) -> ServerKeys:
        d = Path(directory)
        public, secret = _load_pair(d / f"{SERVER}.key_secret")
        auth_dir = d / AUTHORIZED_DIR
        if not auth_dir.is_dir():
            raise ConfigError(f"{auth_dir}: no authorized client keys directory (run generate_keys)")
        import zmq.auth

        try:
            authorized = frozenset(zmq.auth.load_certificates(auth_dir))
        except (OSError, ValueError) as err:
            raise ConfigError(f"{auth_dir}: unreadable client key ({err})") from err
        return cls(public, secret, authorized)


@dataclasses.dataclass(frozen=True)
class ClientKeys:
    """An actor's CURVE key pair and the learner's public key (all z85 bytes)."""

    public: bytes
    secret: bytes
    server_public: bytes

    def __repr__(self) -> str:
        return f"ClientKeys(public={self.public!r}, server_public={self.server_public!r})"

    @classmethod
    def from_dir(cls, directory: str | os.PathLike[str], name: str = "client") -> ClientKeys:
        d = Path(directory)
        public, secret = _load_pair(d / f"{name}.key_secret")
        server_public = _load_public(d / f"{SERVER}.key")
        return cls(public, secret, server_public)

    @classmethod
    def generate(cls, server_public: bytes) -> ClientKeys:
        """A fresh in-memory key pair (not authorized anywhere until its public key is added)."""
        import zmq

        public, secret = zmq.curve_keypair()
        return cls(public, secret, server_public)


def _load_pair(secret_file: Path) -> tuple[bytes, bytes]:
    import zmq.auth

    try:
        public, secret = zmq.auth.load_certificate(secret_file)
    except (OSError, ValueError) as err:
        raise ConfigError(f"{secret_file}: cannot read CURVE secret key ({err}); run generate_keys") from err
    if secret is None:
        raise ConfigError(f"{secret_file}: holds no secret key")
    return public, secret


def _load_public(public_file: Path) -> bytes:
    import zmq.auth

    try:
        public, _ = zmq.auth.load_certificate(public_file)
    except (OSError, ValueError) as err:
        raise ConfigError(f"{public_file}: cannot read CURVE public key ({err})") from err
    return public


def add_client(directory: str | os.PathLike[str], name: str, overwrite: bool = False) -> Path:
    """Create key pair `name` in `directory` and authorize its public key; returns the secret file."""
    import zmq.auth

    if not name or "/" in name or name == SERVER or name.startswith("."):
        raise ConfigError(f"name={name!r} must be a plain file name other than '{SERVER}'")
    d = Path(directory)
    secret_file = d / f"{name}.key_secret"
    if secret_file.exists() and not overwrite:
        raise ConfigError(f"{secret_file} exists; pass overwrite=True to replace it")
    (d / AUTHORIZED_DIR).mkdir(parents=True, exist_ok=True)
    public_file, secret_path = zmq.auth.create_certificates(d, name)
    os.chmod(secret_path, 0o600)
    (d / AUTHORIZED_DIR / f"{name}.key").write_bytes(Path(public_file).read_bytes())
    return Path(secret_path)


def generate_keys(directory: str | os.PathLike[str], clients: tuple[str, ...] = ("client",),
                  overwrite: bool = False) -> Path:
    """Write a learner key pair and one authorized key pair per name in `clients`; returns `directory`.

    Refuses (ConfigError) to overwrite existing keys unless `overwrite`.
    """
    import zmq.auth

    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    os.chmod(d, 0o700)
    if (d / f"{SERVER}.key_secret").exists() and not overwrite:
        raise ConfigError(f"{d / (SERVER + '.key_secret')} exists; pass overwrite=True to replace the keys")
    _, secret_path = zmq.auth.create_certificates(d, SERVER)
    os.chmod(secret_path, 0o600)
    for name in clients:
        add_client(d, name, overwrite=overwrite)
    return d
