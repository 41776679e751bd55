"""A scripted lease history for the timeline's tests: three holders, two resources, one hostile name.

Every kind of mark the picture draws appears at least once: a first lease,
renewals (one with progress), an expiry then a takeover, a revoke, a grant,
a reacquire, a completion with its digest, a live lease, and a guard's
rejections.
"""

from __future__ import annotations

from chainfence.audit.timeline import Rejection, TimelineLease

ALICE = "0xA11CE00000000000000000000000000000000001"
BOB = "0xB0B0000000000000000000000000000000000002"
CAROL = "0xCA401000000000000000000000000000000000C3"
ADMIN = "0xAD31000000000000000000000000000000000A00"
T = 1_795_000_000  # 2026-11-18 11:06:40 UTC
NOW = T + 1_800
DIGEST = "0x" + "ab" * 32

#: Raw name bytes as anyone could publish them: markup, a bidi override, NUL, bytes that are not UTF-8.
HOSTILE = b'evil\xe2\x80\xae<script>alert(1)</script>"&\x00\xff'
#: How the page must show it (``_names.display``), before HTML escaping.
HOSTILE_SHOWN = 'evil\\u202e<script>alert(1)</script>"&\\x00\\xff'


def leases() -> list[TimelineLease]:
    return [
        TimelineLease(
            "reports/daily",
            1,
            ALICE,
            "alice",
            T,
            T + 300,
            "expired",
            "unheld",
            renewals=[(T + 60, None), (T + 120, b"\x05")],
        ),
        TimelineLease(
            "reports/daily",
            2,
            BOB,
            "bob",
            T + 400,
            T + 900,
            "revoked",
            "expired",
            renewals=[(T + 600, "row 5")],
            revoked_by=ADMIN,
        ),
        TimelineLease(
            "reports/daily",
            3,
            ALICE,
            "alice",
            T + 950,
            T + 1300,
            "completed",
            "revoked",
            admin=ADMIN,
            completion_digest=DIGEST,
        ),
        TimelineLease("reports/daily", 4, BOB, "bob", T + 1400, None, "live", "granted", admin=ADMIN),
        TimelineLease(HOSTILE, 1, CAROL, "<b>carol</b>\u202e", T + 100, T + 700, "released", "unheld"),
        TimelineLease(HOSTILE, 2, ALICE, "alice", T + 700, T + 1500, "superseded", "released"),
        TimelineLease(HOSTILE, 3, ALICE, "alice", T + 1500, None, "live", "reacquired"),
    ]


def rejections() -> list[Rejection]:
    return [
        Rejection("reports/daily", T + 500, 1, ALICE, "StaleToken: superseded by 2"),
        Rejection("reports/daily", T + 1000, 2, BOB, "<img src=x onerror=alert(1)>"),
    ]
