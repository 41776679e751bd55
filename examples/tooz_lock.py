"""tooz's lock API over chainfence leases: change the coordinator URL.

Needs the [tooz] and [tester] extras. The guide docs/howto/tooz.md."""

import tooz.coordination

# chainfence+http://127.0.0.1:8545?registry=0x...&key_env=CHAINFENCE_PRIVATE_KEY against a node
url = "chainfence+embedded://readme?timeout=30"  # an in-process chain, one per name per process
coordinator = tooz.coordination.get_coordinator(url, b"worker-1")
coordinator.start(start_heart=True)  # the heart renews every held lease
lock = coordinator.get_lock(b"reports/daily")
with lock:  # tooz's LockAcquireFailed if it cannot be had
    print(f"worker-1 holds it with fencing token {lock.token}")  # hand the token to the writes
other = tooz.coordination.get_coordinator(url, b"worker-2")
other.start()
print("worker-2 got it:", other.get_lock(b"reports/daily").acquire(blocking=False))
coordinator.stop()
other.stop()  # stop() releases what a coordinator holds
