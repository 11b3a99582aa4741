"""`robot-rl keys`: CURVE key management for non-loopback learner/actor links (see robot_rl.keys).

Usage::

    robot-rl keys generate keys/                 # learner pair + one authorized client pair ("client")
    robot-rl keys generate keys/ --clients arm1 arm2
    robot-rl keys add-client keys/ arm3          # another actor, authorized
"""

from __future__ import annotations

import argparse
from pathlib import Path

from robot_rl.keys import add_client, generate_keys


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="robot-rl keys", description="CURVE key files for learner/actor links")
    sub = p.add_subparsers(dest="cmd", required=True)
    gen = sub.add_parser("generate", help="write the learner key pair and authorized client key pairs")
    gen.add_argument("dir", type=Path)
    gen.add_argument("--clients", nargs="+", default=["client"], help="client (actor) key names")
    gen.add_argument("--overwrite", action="store_true", help="replace existing keys")
    add = sub.add_parser("add-client", help="add and authorize one more client key pair")
    add.add_argument("dir", type=Path)
    add.add_argument("name")
    args = p.parse_args(argv)
    if args.cmd == "generate":
        d = generate_keys(args.dir, clients=tuple(args.clients), overwrite=args.overwrite)
        print(f"wrote {d}/server.key(+_secret) and client pairs {', '.join(args.clients)}; copy server.key and "
              "one client pair to each actor machine, keep server.key_secret on the learner")
    else:
        secret = add_client(args.dir, args.name)
        print(f"wrote {secret} (authorized in {args.dir}/authorized_clients)")
    return 0
