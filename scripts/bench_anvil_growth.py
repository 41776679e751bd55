#!/usr/bin/env python3
"""How anvil's own time per acquisition grows with its chain, beside etcd's lock, in one run.

    python scripts/bench_anvil_growth.py                    # 900 blocks, reported per 150
    python scripts/bench_anvil_growth.py --blocks 1500 --step 300

The "anvil floor" of ``scripts/bench_vs_etcd.py`` (a pre-signed acquisition:
``eth_sendRawTransaction``, then ``eth_getTransactionReceipt`` until it is
there, on one keep-alive connection, no client work) is measured on fresh
anvils started with different options, one sample of each in turn, each
acquisition a new block (automine), interleaved with one etcd lease + txn lock
(``etcd`` on PATH: ``apt-get install etcd-server``) so that both see the same
machine at the same moment. The median of each window of blocks shows how much
of a chainfence acquisition on a local node is the node's, and how it moves as
the chain grows: the same name is acquired each time (the state does not grow;
the chain does).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_vs_etcd as bench

#: anvil's options measured: as the suite and ``chainfence node`` start it, and keeping only the
#: newest states in memory (``--prune-history``).
OPTIONS = {"default": (), "--prune-history 8": ("--prune-history", "8")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--blocks", type=int, default=900, help="acquisitions (blocks) per anvil (default 900)")
    parser.add_argument("--step", type=int, default=150, help="blocks per reported window (default 150)")
    args = parser.parse_args(argv)
    if args.blocks < args.step or args.step < 1:
        parser.error("--blocks must be at least --step, and --step at least 1")

    from chainfence import Chain, Registry
    from chainfence.testing.anvil import AnvilProcess, dev_keys, find_anvil

    etcd = bench.Etcd()
    nodes = []
    try:
        floors = {}
        for label, options in OPTIONS.items():
            node = AnvilProcess(find_anvil(start=bench.ROOT), accounts=4, extra_args=options).start()
            nodes.append(node)
            client = Chain.connect(node.url, private_key=dev_keys(1)[0])
            registry = Registry.deploy(client, max_ttl=3_600)
            floors[label] = bench.Floor(node.port, dev_keys(3)[2], registry.address, client.chain_id)
        lock = bench.EtcdLock(etcd.port)
        times: dict[str, list[float]] = {label: [] for label in [*floors, "etcd"]}
        for i in range(args.blocks):
            for label, floor in floors.items():
                raw = floor.sign(bench.encode("acquire", ["growth/same", bench.TTL]))
                start = time.perf_counter()
                floor.send(raw)
                times[label].append(time.perf_counter() - start)
            start = time.perf_counter()
            lease = lock.acquire(f"growth/{i}")
            times["etcd"].append(time.perf_counter() - start)
            lock.release(f"growth/{i}", lease)
    finally:
        for node in nodes:
            node.stop()
        etcd.close()

    windows = range(0, args.blocks - args.step + 1, args.step)
    print(f"acquisition p50 (ms) per window of blocks; anvil floor vs etcd {etcd.version} lease+txn, alternating")
    print(f"  {'blocks':<32}" + "".join(f"{f'{w}-{w + args.step}':>11}" for w in windows))
    for label, values in times.items():
        name = "etcd lock" if label == "etcd" else f"anvil floor, {label}"
        print(
            f"  {name:<32}" + "".join(f"{statistics.median(values[w : w + args.step]) * 1e3:>11.2f}" for w in windows)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
