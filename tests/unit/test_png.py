"""The test suite's PNG reader (tests/support/png.py) decodes every row filter right: the browser test's
pixel checks are only as good as it is."""

from __future__ import annotations

import struct
import zlib

import pytest

from tests.support import png


def chunk(kind: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))


def paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    return a if pa <= pb and pa <= pc else b if pb <= pc else c


def encode(rows: list[bytes], width: int, channels: int, colour_type: int) -> bytes:
    """Each row with another filter (0, 1, 2, 3, 4, 0, ...), as a real encoder may choose."""
    raw, previous = bytearray(), bytes(len(rows[0]))
    for y, row in enumerate(rows):
        kind = y % 5
        out = bytearray()
        for i, value in enumerate(row):
            left = row[i - channels] if i >= channels else 0
            up, up_left = previous[i], previous[i - channels] if i >= channels else 0
            predictor = [0, left, up, (left + up) >> 1, paeth(left, up, up_left)][kind]
            out.append((value - predictor) & 0xFF)
        raw += bytes([kind]) + out
        previous = row
    header = struct.pack(">IIBBBBB", width, len(rows), 8, colour_type, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(bytes(raw))) + chunk(b"IEND", b"")
    )


@pytest.mark.parametrize("channels, colour_type", [(3, 2), (4, 6)])
def test_every_filter_decodes_to_the_pixels_encoded(channels, colour_type):
    width, height = 7, 10
    rows = [
        bytes((x * 37 + y * 91 + c * 53) % 256 for x in range(width) for c in range(channels)) for y in range(height)
    ]
    image = png.decode(encode(rows, width, channels, colour_type))
    for y in range(height):
        for x in range(width):
            assert image.rgb(x, y) == tuple(rows[y][x * channels : x * channels + 3])
    assert image.hex(0, 0) == "#00356a"


def test_a_corrupt_file_is_refused():
    good = encode([bytes(6)], 2, 3, 2)
    with pytest.raises(ValueError):
        png.decode(good[:23] + bytes([good[23] ^ 0xFF]) + good[24:])  # the height changed: IHDR's CRC fails
    with pytest.raises(ValueError):
        png.decode(b"GIF89a")
