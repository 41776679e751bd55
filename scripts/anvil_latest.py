"""Does anvil answer a read at "latest" from an older state than the answer to the read before it?

    python scripts/anvil_latest.py [BLOCKS] [READERS]      # defaults: 1500 blocks, 4 readers

Starts the project's anvil (automine) on a free port. The main process mines BLOCKS value transfers of
1 wei to one address, one block each; READERS processes meanwhile each send ``eth_call`` at
"latest" one after the other on a keep-alive connection (init code that returns that address's
balance: the number of blocks mined so far) and count the answers below one they already had. Each
such answer is followed at once by another read, which shows whether the next read is again as new
as the first. Prints the counts and the first few (highest seen, answer, the read after it).

anvil 1.7.1 resolves "latest" to its head's number first and reads that number's state later: when
it moves its head in between (it is mining), the read gets the stored state of the block before,
though a read before it already saw the new state (see src/chainfence/_sdk/rollback.py). The window is
short; load widens it (two or four ``(while :; do :; done) &`` beside the script).
"""

from __future__ import annotations

import http.client
import json
import multiprocessing
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from chainfence.testing.anvil import find_anvil, free_port

TARGET = "0x000000000000000000000000000000000000bEEF"
#: Init code run by an eth_call without "to": PUSH20 TARGET, BALANCE, store it at 0, return 32 bytes.
CODE = "0x73" + TARGET[2:].lower() + "3160005260206000f3"


def rpc(conn: http.client.HTTPConnection, method: str, params: list) -> object:
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
    conn.request("POST", "/", body, {"Content-Type": "application/json"})
    reply = json.loads(conn.getresponse().read())
    if "error" in reply:
        raise RuntimeError(f"{method}: {reply['error']}")
    return reply["result"]


def balance(conn: http.client.HTTPConnection) -> int:
    return int(str(rpc(conn, "eth_call", [{"data": CODE}, "latest"])), 16)


def reader(port: int, stop, out) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port)
    best, reads, back = 0, 0, []
    while not stop.is_set():
        answer = balance(conn)
        reads += 1
        if answer < best:
            back.append((best, answer, balance(conn)))
        best = max(best, answer)
    out.put((reads, back))


def main(blocks: int, readers: int) -> None:
    port = free_port()
    node = subprocess.Popen([find_anvil(), "--port", str(port), "--silent"], stdout=subprocess.DEVNULL)
    try:
        while True:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port)
                rpc(conn, "eth_chainId", [])
                break
            except OSError:
                time.sleep(0.05)
        version = rpc(conn, "web3_clientVersion", [])
        sender = rpc(conn, "eth_accounts", [])[0]  # type: ignore[index]
        stop, out = multiprocessing.Event(), multiprocessing.Queue()
        started = [multiprocessing.Process(target=reader, args=(port, stop, out)) for _ in range(readers)]
        for process in started:
            process.start()
        for _ in range(blocks):
            rpc(conn, "eth_sendTransaction", [{"from": sender, "to": TARGET, "value": "0x1"}])
        stop.set()
        results = [out.get() for _ in started]
        for process in started:
            process.join()
    finally:
        node.kill()
        node.wait()
    reads = sum(count for count, _ in results)
    back = [case for _, cases in results for case in cases]
    again_below = sum(1 for best, _, again in back if again < best)
    print(f"{version}: {blocks} blocks, {reads} reads at latest by {readers} readers")
    print(f"answers below one the same reader already had: {len(back)}; the read after it still below: {again_below}")
    print("first (highest seen, answer, the read after it):", back[:8])


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 1500, int(sys.argv[2]) if len(sys.argv) > 2 else 4)
