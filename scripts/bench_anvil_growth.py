#!/usr/bin/env python3
"""How anvil's own time per acquisition grows with its chain, under the settings `chainfence node` could give
it, beside etcd's lock, in one run.

    python scripts/bench_anvil_growth.py                     # 1,500 blocks per anvil, reported per 250
    python scripts/bench_anvil_growth.py --blocks 3000 --step 500 --same-name

The "anvil floor" of ``scripts/bench_vs_etcd.py`` (a pre-signed acquisition:
``eth_sendRawTransaction``, then ``eth_getTransactionReceipt`` until it is
there, over the node's IPC socket, no client work) is measured on fresh
anvils started with different settings, one sample of each in turn, each
acquisition a new block (automine), interleaved with one etcd lease + txn lock
(``etcd`` on PATH: ``scripts/bench.sh`` installs it) so that all see the same
machine at the same moment. Each acquisition is of a new name (the registry's
state grows, as a registry in use does), or of the same one (``--same-name``:
only the chain grows). Every anvil saves its state to a file every second, as
`chainfence node` has it do. The median of each window of blocks shows how
each setting's time moves as the chain grows; the last column is anvil's
resident memory at the end.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_vs_etcd as bench

#: (hardfork, options) measured. "before": `chainfence node` as it was (the suite's settings and a state
#: file); the others change one thing at a time.
SETTINGS = {
    "prague (before)": ("prague", ()),
    "cancun": ("cancun", ()),
    "cancun --max-persisted-states 0": ("cancun", ("--max-persisted-states", "0")),
    "cancun --prune-history 256": ("cancun", ("--prune-history", "256")),
    "prague --prune-history 256": ("prague", ("--prune-history", "256")),
}
#: `chainfence node`'s settings (Cancun, ``--prune-history 256``) with one more of anvil 1.7.1's options each, or
#: without the state file (``--more``): what might still flatten the growth that new names bring.
#: (``--no-storage-caching`` is not among them: anvil 1.7.1 takes it only with ``--fork-url``.)
NODE = ("--prune-history", "256")
MORE_SETTINGS = {
    "node": ("cancun", NODE),
    "node without a state file": ("cancun", NODE),
    "node --prune-history 1": ("cancun", ("--prune-history", "1")),
    "node --transaction-block-keeper 64": ("cancun", (*NODE, "--transaction-block-keeper", "64")),
    "node --order fifo": ("cancun", (*NODE, "--order", "fifo")),
    "node --disable-block-gas-limit": ("cancun", (*NODE, "--disable-block-gas-limit")),
    "node --slots-in-an-epoch 1": ("cancun", (*NODE, "--slots-in-an-epoch", "1")),
}
#: Settings run without a state file (every other anvil saves its state every second, as `chainfence node`'s does).
STATELESS = {"node without a state file"}


def resident_mib(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--blocks", type=int, default=1500, help="acquisitions (blocks) per anvil (default 1500)")
    parser.add_argument("--step", type=int, default=250, help="blocks per reported window (default 250)")
    parser.add_argument("--same-name", action="store_true", help="acquire one name again and again")
    parser.add_argument("--only", help="comma-separated settings to run (default: all)")
    parser.add_argument(
        "--more", action="store_true", help="chainfence node's settings with one more anvil option each, instead"
    )
    parser.add_argument(
        "--transfer",
        action="store_true",
        help="also time a plain transfer (a 0-value self-transfer, no contract) on the first setting's anvil, in "
        "turn with the rest: whether a block that touches no registry slows as the registry grows",
    )
    args = parser.parse_args(argv)
    if args.blocks < args.step or args.step < 1:
        parser.error("--blocks must be at least --step, and --step at least 1")
    table = MORE_SETTINGS if args.more else SETTINGS
    settings = table
    if args.only:
        settings = {label: table[label] for label in args.only.split(",")}

    from chainfence import Chain, Registry
    from chainfence.testing.anvil import AnvilProcess, dev_keys, find_anvil

    etcd = bench.Etcd()
    nodes = {}
    work = bench.scratch_dir("chainfence-growth-")
    try:
        floors = {}
        for n, (label, (hardfork, options)) in enumerate(settings.items()):
            node = AnvilProcess(
                find_anvil(start=bench.ROOT),
                accounts=4,
                hardfork=hardfork,
                extra_args=options,
                state=None if label in STATELESS else work / f"state-{n}.json",
                ipc=str(work / f"{n}.ipc"),
            ).start()
            nodes[label] = node
            client = Chain.connect(node.url, private_key=dev_keys(1)[0])
            registry = Registry.deploy(client, max_ttl=3_600)
            floors[label] = bench.IpcFloor(node.ipc_path, dev_keys(3)[2], registry.address, client.chain_id)
        lock = bench.EtcdLock(etcd.port)
        first = next(iter(floors))
        transfer = None
        if args.transfer:  # another key on the first setting's anvil, sending to itself
            transfer = bench.IpcFloor(nodes[first].ipc_path, dev_keys(4)[3], "", floors[first].chain_id)
            transfer.registry = transfer.account.address  # the "to" of what it signs: itself, no data
        probe = f"{first}: a plain transfer"
        times: dict[str, list[float]] = {label: [] for label in [*floors, *([probe] if transfer else []), "etcd"]}
        for i in range(args.blocks):
            name = "growth/same" if args.same_name else f"growth/{i}"
            for label, floor in floors.items():
                raw = floor.sign(bench.encode("acquire", [name, bench.TTL]))
                start = time.perf_counter()
                floor.send(raw)
                times[label].append(time.perf_counter() - start)
            if transfer is not None:
                raw = transfer.sign(b"")
                start = time.perf_counter()
                transfer.send(raw)
                times[probe].append(time.perf_counter() - start)
            start = time.perf_counter()
            lease = lock.acquire(f"growth/{i}")
            times["etcd"].append(time.perf_counter() - start)
            lock.release(f"growth/{i}", lease)
        memory = {label: resident_mib(node.process.pid) for label, node in nodes.items()}
    finally:
        for node in nodes.values():
            node.stop()
        etcd.close()

    windows = range(0, args.blocks - args.step + 1, args.step)
    names = "the same name" if args.same_name else "a new name each"
    print(
        f"acquisition p50 (ms) per window of blocks, {names}; anvil floor over IPC vs etcd {etcd.version} "
        "lease+txn, alternating"
    )
    width = max(len(label) for label in times) + 14
    print(f"  {'blocks':<{width}}" + "".join(f"{f'{w}-{w + args.step}':>11}" for w in windows) + "    RSS MiB")
    for label, values in times.items():
        name = "etcd lock" if label == "etcd" else (label if label == probe else f"anvil floor, {label}")
        rss = f"{memory[label]:>11.0f}" if label in memory else ""
        print(
            f"  {name:<{width}}"
            + "".join(f"{statistics.median(values[w : w + args.step]) * 1e3:>11.2f}" for w in windows)
            + rss
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
