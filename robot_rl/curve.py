"""ZeroMQ security shared by every server in the project (the learner's transport, the robot server).

Two pieces:
- `check_address(address, keys, insecure)`: loopback (and ipc/inproc) addresses need nothing; any other tcp
  address needs CURVE keys (`robot_rl.keys`) or an explicit `insecure=True`, else `ConfigError`.
- `serve_curve(ctx, sock, keys, on_refused, zap_log)`: make a (not yet bound) socket a CURVE server that
  admits only the client public keys in `keys.authorized`, through a ZAP handler thread
  (`zmq.auth.thread.ThreadAuthenticator`) on the socket's context. Each refused key is reported to
  `on_refused(text)` (called on the ZAP thread) so the caller counts and logs it its own way.

Usage (a server)::

    check_address(bind, keys, insecure)                   # before any socket exists
    ctx = zmq.Context(); sock = ctx.socket(zmq.ROUTER)
    auth = None
    if keys is not None:
        auth = serve_curve(ctx, sock, keys, on_refused=lambda text: counter.add(text), zap_log="myserver.zap")
    sock.bind(bind)
    ...
    sock.close(); auth.stop() if auth else None; ctx.term()  # stop the ZAP thread before ctx.term()

zmq is imported only inside `serve_curve`, so importing this module (and the transport) stays light.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Callable
from typing import Any

from robot_rl.errors import ConfigError
from robot_rl.keys import ServerKeys


def is_local_address(address: str) -> bool:
    """True for ipc://, inproc:// and tcp:// on a loopback host (127.0.0.0/8, ::1, localhost)."""
    scheme, sep, rest = address.partition("://")
    if not sep:
        raise ConfigError(f"address={address!r} must look like tcp://HOST:PORT")
    if scheme in ("ipc", "inproc"):
        return True
    if scheme != "tcp":
        raise ConfigError(f"address={address!r}: transport '{scheme}' is not supported (tcp, ipc, inproc)")
    host = rest.rsplit(":", 1)[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # '*', interface names, host names: not provably loopback


def check_address(address: str, keys: object | None, insecure: bool) -> None:
    """Raise `ConfigError` for a non-loopback address without CURVE keys unless `insecure`."""
    if not is_local_address(address) and keys is None and not insecure:
        raise ConfigError(
            f"address={address!r} is not loopback: pass CURVE keys (robot_rl.keys.generate_keys, later "
            f"'robot-rl keys generate DIR') or insecure=True to send unencrypted, unauthenticated traffic")


def serve_curve(ctx: Any, sock: Any, keys: ServerKeys, on_refused: Callable[[str], None], zap_log: str) -> Any:
    """Make `sock` (a `zmq.Socket` of `ctx`, before `bind`) a CURVE server with the key pair in `keys` that
    accepts only clients whose public key is in `keys.authorized`.

    Starts a ZAP handler thread on `ctx` (logging to the logger named `zap_log`) and returns it (a
    `ThreadAuthenticator`): call its `stop()` before `ctx.term()`. A client with any other key is refused in
    the handshake, and `on_refused(text)` runs on the ZAP thread with a one-line message naming its key.
    If configuring the socket fails, the handler is stopped again before the error propagates.
    """
    from zmq.auth.thread import ThreadAuthenticator

    allowed = keys.authorized

    class _Keys:
        def callback(self, domain: str, key: bytes) -> bool:
            if key in allowed:
                return True
            on_refused(f"refused a client with unknown CURVE key {key.decode(errors='replace')}")
            return False

    auth = ThreadAuthenticator(ctx, log=logging.getLogger(zap_log))
    auth.start()
    try:
        auth.configure_curve_callback(domain="*", credentials_provider=_Keys())
        sock.curve_server = True
        sock.curve_publickey = keys.public
        sock.curve_secretkey = keys.secret
    except BaseException:
        auth.stop()
        raise
    return auth
