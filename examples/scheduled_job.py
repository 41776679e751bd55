"""A scheduled job fired from two machines runs once: a claim with completion refuses the rerun.

The nightly report for a day is an item of the workset ``nightly-report``. The first firing claims it,
runs, and completes it: done for good. The second firing, a second later on another machine (after the
first has finished and let go), finds nothing to claim and does not run. A lease alone would not stop
it: the second firing would acquire a new token and run the job again.
"""

from chainfence import Chain, Registry

chain = Chain.embedded()  # in a deployment: Chain.connect(url, private_key=...) on each machine
registry = Registry.deploy(chain)
machine_a = registry.connect(chain.accounts[1])
machine_b = registry.connect(chain.accounts[2])


def nightly_report(agent: Registry, machine: str, day: str) -> None:
    job = agent.workset("nightly-report").claim([day], ttl=600)  # None: the day's run is done, or running elsewhere
    if job is None:
        print(f"{machine}: the report for {day} is done or running elsewhere: not run again")
        return
    with job, job.keep():
        print(f"{machine}: writing the report for {day} with token {job.token}")
        job.complete(b"report written")  # marks the item done: no claim hands it out again


nightly_report(machine_a, "machine-a", "2026-11-28")
nightly_report(machine_b, "machine-b", "2026-11-28")  # fired a second after machine-a finished
