"""scripts/glyphs.py: MapLibre glyph PBFs (signed distance fields) of a font.

    python scripts/glyphs.py FONT.ttf "FONT STACK NAME" OUTDIR

writes OUTDIR/FONT STACK NAME/{start}-{end}.pbf for every range of 256 code
points from 0-255 to 65280-65535: a range the font has no glyph in is a valid
PBF with no glyphs (MapLibre fails a label whose range answers 404).  Each
glyph is rendered by FreeType at 24 px, and its bitmap is a signed distance
field with a 3 px buffer round it: one byte a pixel, 255 - 255 * (d / 8 + 0.25)
where d is the distance in pixels from the pixel to the glyph's outline,
negative inside (MapLibre's convention: the outline at 192).

The PBF (MapLibre's glyphs.proto, written here by hand):
  glyphs { repeated fontstack stacks = 1; }
  fontstack { string name = 1; string range = 2; repeated glyph glyphs = 3; }
  glyph { uint32 id = 1; bytes bitmap = 2; uint32 width = 3; uint32 height = 4;
          sint32 left = 5; sint32 top = 6; uint32 advance = 7; }
top is the bitmap's top above the baseline less the font's ascender at 24 px
(the convention of MapLibre's glyph servers, whose shaping places it so).
"""

from __future__ import annotations

import os
import sys

import freetype
import numpy as np

SIZE = 24
BUFFER = 3
RADIUS = 8
CUTOFF = 0.25


def varint(n: int) -> bytes:
    out = bytearray()
    while True:  # bounded: 7 bits a byte
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def field_varint(num: int, n: int) -> bytes:
    return varint(num << 3) + varint(n)


def field_sint(num: int, n: int) -> bytes:
    return field_varint(num, (n << 1) ^ (n >> 63))


def field_bytes(num: int, b: bytes) -> bytes:
    return varint(num << 3 | 2) + varint(len(b)) + b


def sdf(coverage: np.ndarray) -> np.ndarray:
    """The SDF bytes of a coverage bitmap (0..1, h x w), buffered by BUFFER."""
    h, w = coverage.shape
    c = np.zeros((h + 2 * BUFFER, w + 2 * BUFFER))
    c[BUFFER:BUFFER + h, BUFFER:BUFFER + w] = coverage
    inside = c > 0.5
    ys, xs = np.mgrid[0:c.shape[0], 0:c.shape[1]]
    pts = np.stack([ys.ravel(), xs.ravel()], axis=1).astype(float)
    inn, out = pts[inside.ravel()], pts[~inside.ravel()]
    d = np.zeros(len(pts))
    if len(inn) and len(out):
        flat_in = inside.ravel()
        # to each pixel, the nearest pixel centre of the other side, less half a pixel
        for sel, other, sign in ((flat_in, out, -1.0), (~flat_in, inn, 1.0)):
            p = pts[sel]
            dist = np.sqrt(((p[:, None, :] - other[None, :, :]) ** 2).sum(axis=2)).min(axis=1) - 0.5
            d[sel] = sign * dist
    elif len(inn):
        d[:] = -RADIUS
    else:
        d[:] = RADIUS
    # a pixel on the edge: its coverage places the outline within it
    cov = c.ravel()
    edge = (cov > 0.02) & (cov < 0.98)
    d[edge] = 0.5 - cov[edge]
    v = 255 - 255 * (d / RADIUS + CUTOFF)
    return np.clip(np.round(v), 0, 255).astype(np.uint8)


def glyph(face: freetype.Face, cp: int, ascender: float) -> bytes | None:
    if face.get_char_index(cp) == 0:
        return None
    face.load_char(chr(cp), freetype.FT_LOAD_RENDER | freetype.FT_LOAD_NO_HINTING)
    g = face.glyph
    bm = g.bitmap
    w, h = bm.width, bm.rows
    msg = field_varint(1, cp)
    if w and h:
        a = np.array(bm.buffer, dtype=np.uint8).reshape(h, bm.pitch)[:, :w] / 255.0
        msg += field_bytes(2, sdf(a).tobytes())
    msg += field_varint(3, w) + field_varint(4, h) + field_sint(5, g.bitmap_left)
    msg += field_sint(6, int(g.bitmap_top - ascender)) + field_varint(7, round(g.advance.x / 64))
    return msg


def main(argv: list[str]) -> int:
    if len(argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    font, name, outdir = argv[1:]
    face = freetype.Face(font)
    face.set_pixel_sizes(0, SIZE)
    ascender = face.size.ascender / 64
    d = os.path.join(outdir, name)
    os.makedirs(d, exist_ok=True)
    total = 0
    for start in range(0, 65536, 256):  # bounded: 256 ranges
        rng = f"{start}-{start + 255}"
        stack = field_bytes(1, name.encode()) + field_bytes(2, rng.encode())
        for cp in range(start, start + 256):
            if 0xD800 <= cp <= 0xDFFF:
                continue  # surrogates: no characters
            g = glyph(face, cp, ascender)
            if g is not None:
                stack += field_bytes(3, g)
                total += 1
        with open(os.path.join(d, rng + ".pbf"), "wb") as f:
            f.write(field_bytes(1, stack))
    print(f"glyphs: {name}: {total} glyphs in 256 ranges -> {d}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
