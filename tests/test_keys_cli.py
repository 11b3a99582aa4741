"""`robot-rl keys generate / add-client` write usable CURVE key files and refuse to overwrite."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from robot_rl.cli import main as cli_main
from robot_rl.keys import ClientKeys, ServerKeys


def test_generate_and_add_client(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    d = tmp_path / "keys"
    assert cli_main(["keys", "generate", str(d), "--clients", "arm1", "arm2"]) == 0
    server = ServerKeys.from_dir(d)
    assert len(server.authorized) == 2
    assert stat.S_IMODE((d / "server.key_secret").stat().st_mode) == 0o600
    assert cli_main(["keys", "add-client", str(d), "arm3"]) == 0
    assert len(ServerKeys.from_dir(d).authorized) == 3
    client = ClientKeys.from_dir(d, name="arm3")
    assert client.server_public == server.public
    assert client.public in ServerKeys.from_dir(d).authorized
    assert cli_main(["keys", "generate", str(d)]) == 1  # refused: keys exist (one line on stderr, no traceback)
    err = capsys.readouterr().err
    assert "exists" in err and "Traceback" not in err
