"""The commands that start something: ``demo``, ``node``, ``deploy`` and ``mcp``.

::

    chainfence demo                      # the paused-agent scenario on the embedded chain (chainfence.cli.demo)
    chainfence node                      # local anvil, state on disk, registry deployed (chainfence.cli.node)
    chainfence deploy [--max-ttl S]      # a registry on any node, and the deployment file naming it
    chainfence mcp [--http --port N]     # Model Context Protocol tools for agents (chainfence.integrations.mcp)

Their work is done by the modules named; they are imported when the command runs (the embedded chain,
anvil's helpers and the MCP SDK import web3, pydantic or both).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

from ._common import (
    EPILOG,
    EXIT_ERROR,
    EXIT_OK,
    UsageError,
    add_command,
    connect,
    deployment,
    emit,
    int_at_least,
    metrics_option,
    output_options,
    positive_int,
    rpc_url,
    serve_metrics,
    split_endpoints,
    verbosity_options,
    waiting,
)

_port = int_at_least(1, 65_535)


def register(subparsers: Any, common: argparse.ArgumentParser) -> None:
    """Add ``demo``, ``node``, ``deploy`` and ``mcp``."""
    verbosity = verbosity_options()  # demo and node talk to no registry the options name: -v only
    demo = add_command(
        subparsers,
        "demo",
        parents=[verbosity],
        example="chainfence demo --ttl 10 --pause 25",
        help="run the paused-agent scenario on the embedded chain, with and without a guard",
        description="Agent A pauses past its lease, agent B takes over, A wakes and writes with its old "
        "token: once without fencing (B's write is lost), once behind a Guard (A is rejected).",
    )
    demo.add_argument("--ttl", type=positive_int, default=30, help="lease length in seconds (default 30)")
    demo.add_argument(
        "--pause", type=positive_int, default=45, help="agent A's pause in seconds; must exceed the ttl (default 45)"
    )
    demo.set_defaults(run=_demo)

    node = add_command(
        subparsers,
        "node",
        parents=[verbosity],
        example="chainfence node --port 8545 --dir .chainfence",
        help="run a local anvil node with the registry deployed; state persists across restarts",
        description="Run anvil on 127.0.0.1 with the registry deployed, and write the deployment file "
        "(DIR/deployment.json) that every other command reads: start it, export one of the dev keys it "
        "prints as CHAINFENCE_PRIVATE_KEY, and run `chainfence acquire NAME --ttl 60` in another terminal. "
        "Leases, tokens and the registry survive restarts (state saved every --state-interval seconds and "
        "on Ctrl-C; a SIGKILL loses what came after the last save, and the next start says so). Its port "
        "comes from --port, else from $CHAINFENCE_RPC_URL when that names http://127.0.0.1:PORT or "
        "http://localhost:PORT (so the same variable points every command at it), else 8545. Needs anvil: "
        "--anvil, $CHAINFENCE_ANVIL, the project's node_modules (npm install), or anvil on PATH.",
        epilog=EPILOG,
    )
    node.add_argument(
        "--port",
        type=_port,
        default=None,
        help="loopback port (default: $CHAINFENCE_RPC_URL's when it names this machine, else 8545)",
    )
    node.add_argument("--dir", default=".chainfence", help="state and deployment files (default .chainfence)")
    node.add_argument("--max-ttl", type=positive_int, default=86_400, help="max ttl of a new registry (default 86400)")
    node.add_argument("--anvil", help="anvil binary (default: $CHAINFENCE_ANVIL, node_modules, PATH)")
    output_options(node, json_help="print the node's details as one JSON line")
    node.add_argument(
        "--state-interval",
        type=positive_int,
        default=1,
        help="seconds between state saves (default 1); a crash loses what happened since the last one",
    )
    metrics_option(node)
    node.set_defaults(run=_node)

    deploy = add_command(
        subparsers,
        "deploy",
        parents=[common],
        example="chainfence deploy --rpc-url http://127.0.0.1:8545 --max-ttl 3600",
        help="deploy a new registry and write the deployment file",
    )
    deploy.add_argument("--max-ttl", type=positive_int, default=86_400, help="longest lease, seconds (default 86400)")
    deploy.add_argument("--no-write", action="store_true", help="do not write the deployment file")
    deploy.add_argument(
        "--force",
        action="store_true",
        help="replace a deployment file whose registry is still on this chain (its users would start over at token 1)",
    )
    deploy.set_defaults(run=_deploy)

    mcp = add_command(
        subparsers,
        "mcp",
        parents=[common],
        example="chainfence mcp        # in an MCP client's config: command chainfence, args [mcp]",
        help="serve leases as Model Context Protocol tools for LLM agents (stdio)",
        description="Serve the Model Context Protocol on stdin/stdout (for an MCP client's configuration: "
        "command `chainfence`, args `mcp`, the key in env CHAINFENCE_PRIVATE_KEY), or with --http on "
        "127.0.0.1:PORT/mcp. Tools: acquire, renew, release, complete, claim, verify, status, history, leader. "
        "Without a key only the reading tools work. Needs the extra: pip install '.[mcp]' in a chainfence checkout.",
    )
    mcp.add_argument(
        "--http", action="store_true", help="serve streamable HTTP on 127.0.0.1 (loopback only) instead of stdio"
    )
    mcp.add_argument("--port", type=_port, default=8000, help="port for --http (default 8000)")
    metrics_option(mcp)
    mcp.set_defaults(run=_mcp)


def _demo(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    if args.pause <= args.ttl:
        parser.error(f"--pause ({args.pause}) must be longer than --ttl ({args.ttl})")
    from .demo import run

    result = run(sys.stdout, ttl=args.ttl, pause=args.pause)
    return EXIT_OK if result.fenced.b_write_survived and not result.unfenced.b_write_survived else EXIT_ERROR


#: The hosts ``chainfence node`` can serve a URL of: anvil listens on 127.0.0.1.
_LOOPBACK = ("127.0.0.1", "localhost")


def _node_port(args: argparse.Namespace) -> int:
    """``node``'s port: --port, else $CHAINFENCE_RPC_URL's when it names this machine's anvil
    (``http://127.0.0.1:PORT``, ``http://localhost:PORT``), else 8545. A variable naming something the node
    cannot be (a list, another host, https, a path) is a usage error: the other commands would go there,
    not to this node. With --port given, a variable naming another node only gets a warning."""
    from urllib.parse import urlsplit

    from .._sdk import validate as _validate

    variable = os.environ.get("CHAINFENCE_RPC_URL")
    if not variable:
        return 8545 if args.port is None else int(args.port)
    urls = split_endpoints(variable)
    problem = None
    if len(urls) > 1:
        problem = f"names {len(urls)} endpoints; a node is one"
    else:
        parts = urlsplit(_validate.rpc_url(urls[0], "$CHAINFENCE_RPC_URL"))
        if parts.scheme != "http" or parts.hostname not in _LOOPBACK:
            problem = "names a node that is not this machine's plain http (anvil serves http://127.0.0.1:PORT)"
        elif parts.port is None:
            problem = "names no port"
        elif parts.path not in ("", "/") or parts.query:
            problem = "has a path or a query (anvil serves http://127.0.0.1:PORT/)"
        elif args.port is None or args.port == parts.port:
            return int(parts.port)
        else:
            problem = f"names port {parts.port}"
    if args.port is None:
        raise UsageError(
            f"$CHAINFENCE_RPC_URL {problem}: the commands using it would not reach this node. Pass --port, "
            "or unset CHAINFENCE_RPC_URL (or point it at http://127.0.0.1:PORT)"
        )
    print(
        f"chainfence node: warning: $CHAINFENCE_RPC_URL {problem}: commands using it will not reach this node "
        f"(http://127.0.0.1:{args.port}); export the URL printed below",
        file=sys.stderr,
    )
    return int(args.port)


def _node(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from .node import serve

    port = _node_port(args)
    serve_metrics(args)
    serve(
        directory=Path(args.dir),
        port=port,
        max_ttl=args.max_ttl,
        anvil=args.anvil,
        as_json=args.json,
        out=sys.stdout,
        state_interval=args.state_interval,
    )
    return EXIT_OK


def _deploy(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    from ..deployment import Deployment, default_path, save
    from ..errors import ContractNotFound, WrongChain
    from ..registry import Registry

    path = Path(args.deployment) if args.deployment else default_path()
    chain, _ = connect(args, needs_key=True, needs_registry=False)
    existing = deployment(args, must_exist=False) if not args.no_write else None
    if existing is not None and not args.force:
        try:
            Registry.from_deployment(chain, existing)
        except (WrongChain, ContractNotFound):
            pass  # the file names a registry this chain does not have: replacing it loses nothing
        else:
            raise UsageError(
                f"{path} names registry {existing.registry}, which is on this chain: deploying another would send "
                "its users to a new token space starting at 1. Pass --force to replace the file, or --no-write"
            )
    with waiting(chain, args, "deploy"):
        registry = Registry.deploy(chain, max_ttl=args.max_ttl)
    # The URL this command reached the node at, whichever way it was given.
    record = Deployment.of(registry, rpc_url=rpc_url(args, existing or deployment(args, must_exist=False)))
    written = None if args.no_write else save(record, path)
    lines = [
        f"deployed registry {registry.address} on chain {chain.chain_id} in block {record.block} (max ttl {args.max_ttl} s)"
    ]
    if written:
        lines.append(f"wrote {written}")
    emit(args, {**record.__dict__, "deployment_file": str(written) if written else None}, "\n".join(lines))
    return EXIT_OK


def _mcp(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    try:
        from ..integrations.mcp import serve
    except ModuleNotFoundError as missing:
        if (missing.name or "").split(".")[0] != "mcp":
            raise
        raise UsageError("the MCP server needs the mcp extra: pip install '.[mcp]' in a chainfence checkout") from None
    _chain, registry = connect(args, needs_key=False, wants_key=True)  # without a key it only reads
    # Over HTTP the metrics are the server's own /metrics (with the extra); over stdio, a port of their own.
    if not args.http:
        serve_metrics(args)
    serve(registry, transport="streamable-http" if args.http else "stdio", port=args.port)
    return EXIT_OK
