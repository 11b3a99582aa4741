"""`robot-rl keys generate / add-client` write usable CURVE key files and refuse to overwrite."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from robot_rl.errors import ConfigError
from robot_rl.keys import ClientKeys, ServerKeys
from robot_rl.keys_cli import main


def test_generate_and_add_client(tmp_path: Path) -> None:
    d = tmp_path / "keys"
    assert main(["generate", str(d), "--clients", "arm1", "arm2"]) == 0
    server = ServerKeys.from_dir(d)
    assert len(server.authorized) == 2
    assert stat.S_IMODE((d / "server.key_secret").stat().st_mode) == 0o600
    assert main(["add-client", str(d), "arm3"]) == 0
    assert len(ServerKeys.from_dir(d).authorized) == 3
    client = ClientKeys.from_dir(d, name="arm3")
    assert client.server_public == server.public
    assert client.public in ServerKeys.from_dir(d).authorized
    with pytest.raises(ConfigError, match="exists"):
        main(["generate", str(d)])
