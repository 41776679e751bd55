"""A proven check in its own process, for attacks that could crash or swell the process that checks.

    python -m tests.support.proven_verifier REGISTRY PROOF_URL CLOCK_URL RESOURCE TOKEN HEADER_URL...

Imports web3 and eth_account first, as any service using the SDK beside them does (py_ecc, which they
load, raises the recursion limit to 100,000: a parser that recurses as deep as a reply nests then
overflows the C stack instead of raising RecursionError). Then asks a :class:`QuorumHeaders` of the
header URLs (k: a majority) and a :class:`ProvenReader` for the token, and prints one JSON line:
``verdict`` ("current", or the error's class), ``vouched_by``, ``dissent``, ``recursion_limit``, the
process's peak resident memory before the check and after it (``maxrss_before``/``maxrss_after``, in
KiB: ``VmHWM`` of /proc/self/status, the high-water mark of this program's own memory; ``ru_maxrss``
would also count the parent's, which a child forked from a test process inherits until its exec), and ``asked``: what each header provider's head, asked alone once more
after the check, came to ("ok", or the error's class and message; a quorum need not have waited for
it). ``--k K`` sets the quorum's k (default: a majority); ``--bare`` imports neither web3 nor
eth_account (a lean verifier, whose peak memory is then the check's own). ``--naive-parse FILE`` instead parses FILE's bytes with plain ``json.loads``
in the same surroundings (the control: a crash is a signal, not a line).
"""

from __future__ import annotations

import json
import resource
import sys


def peak_kib() -> int:
    """This process's peak resident memory so far, in KiB."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def main(argv: list[str]) -> int:
    bare = argv[0] == "--bare"
    if bare:
        argv = argv[1:]
    else:
        import eth_account  # noqa: F401  (what a service beside web3 has imported)
        import web3  # noqa: F401

    limit = sys.getrecursionlimit()
    if argv[0] == "--naive-parse":
        with open(argv[1], "rb") as f:
            json.loads(f.read())
        print(json.dumps({"parsed": True, "recursion_limit": limit}), flush=True)
        return 0
    k = None
    if argv[0] == "--k":
        k, argv = int(argv[1]), argv[2:]
    registry, proof_url, clock_url, name, token, *header_urls = argv
    from chainfence._node.jsonrpc import HttpEndpoint
    from chainfence.errors import ChainfenceError
    from chainfence.proofs import ProvenReader, QuorumHeaders

    clock_node = HttpEndpoint(clock_url)

    def clock() -> int:  # the honest node's pending block time (what Chain.now reads), without a Chain
        return int(clock_node.request("eth_getBlockByNumber", ["pending", False])["timestamp"], 16)

    before = peak_kib()
    headers = QuorumHeaders(header_urls, k=k, clock=clock, max_age=60)
    reader = ProvenReader(registry, headers=headers, provider=proof_url)
    report: dict[str, object] = {"recursion_limit": limit, "maxrss_before": before}
    try:
        header = reader.header()
        reader.check(name, int(token), header=header)
        report.update(verdict="current", vouched_by=list(header.vouched_by), dissent=header.dissent)
    except ChainfenceError as exc:
        report.update(verdict=type(exc).__name__, message=str(exc))
    finally:
        headers.close()
    report["maxrss_after"] = peak_kib()
    asked: dict[str, str] = {}
    for url in header_urls:
        try:
            HttpEndpoint(url).request("eth_getBlockByNumber", ["latest", False])
            asked[url] = "ok"
        except ChainfenceError as exc:
            asked[url] = f"{type(exc).__name__}: {exc}"
    report["asked"] = asked
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
