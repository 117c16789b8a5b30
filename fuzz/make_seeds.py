#!/usr/bin/env python3
"""Writes the tiny seed corpora of the fuzz targets into fuzz/corpus/<target>/ (see fuzz/README.md
for the input encodings: each input is a sequence of commands decoded by fuzz_write.c / fuzz_read.c /
fuzz_api.c)."""
import os

here = os.path.dirname(os.path.abspath(__file__))

def b(*xs):
    return bytes(x & 0xff for x in xs)

# one float32 1-D CPU tensor of 4 rows: ndim byte, dtype byte (0 = float32), device (0 = CPU),
# flags (0 = compact, no offset), shape byte (4), then the payload bytes (16).
f32x4 = b(1, 0, 0, 0, 4) + bytes(range(16))
write_seeds = {
    # single write of "a" on the full query at ordinal floor+1, UPSERT, plain tensor
    "single": b(3, 0, 0, 0xa0, 0, 0, 0x01, 0, 0) + f32x4 + b(0),
    # batch of two entries, then a floor advance by 1
    "batch": b(0, 2, 0, 0xa0, 0, 0, 0x01, 0, 0) + f32x4 + b(0) + b(1, 0x01, 0, 0) + f32x4 + b(0) + b(6, 1),
    # managed tensor write (entry flags 0x09: one managed tensor), mb byte 0
    "managed": b(3, 0, 0, 0xa1, 0, 1, 0x09, 0, 0, 0) + f32x4 + b(0),
    # masked write of 2 elements with strides (flags 1) and a negative stride
    "masked": b(3, 0, 0, 0xa0, 0, 0, 0x01, 0, 0x62, 0x3, 1, 0, 0, 1, 2, 0x88) + bytes(16) + b(0),
    # max floor, then a rejected write
    "floor": b(7 + 0xf8, 3, 0, 0, 0x40, 0, 0, 0x09, 0, 0, 0) + f32x4 + b(0),
}
read_seeds = {
    # latest read of all attributes (NULL list) on the full query
    "latest_all": b(0, 0, 0x40, 0, 0x20, 0x23),
    # range read [1, 3] of a, b, arr
    "range": b(0, 0, 3, 0, 1, 3, 1, 0x21, 0x23),
    # start > end, huge end, range over the unsealed column
    "bad_range": b(0, 0, 1, 0, 1, 0x29, 0x21) + b(1, 0, 1, 7, 1, 0x40, 0x40),
    # map a new float column "c" with dtype float32 at floor+1, unmap
    "map": b(4, 0, 2, 1, 0, 0xc1, 1),
    # floor advance, bogus handles
    "misc": b(6, 2, 7, 1, 5),
}
# fuzz_api: command bytes (c % 12 = the command, (c >> 5) % 3 = the virtual thread), then the
# command's bytes (fuzz_api.c): write = query, flags, ordinal, mask; seal = flags; read = query,
# attribute flags, ordinal flags, hold flags; map = flags, query, ordinal; clone = flags, ordinal.
W = b(0, 0, 0, 0, 0)          # write "a" (float32) on the first four prims at floor + 1
S = b(4, 3)                   # seal ALL at floor + 1
R = b(6, 0, 1, 0, 0)          # latest read of "a" at the floor
api_seeds = {
    "write_seal_read": W + S + R,
    "map_commit": b(8, 0x40, 0, 0) + S + R,
    "clone": W + S + b(9, 0, 0) + S + b(6, 9, 1, 0, 0),
    "delete_range": W + S + b(3, 0, 0, 0) + S + b(6, 0, 0x41, 0x20, 0),
    "handles": W + b(10, 0x04) + b(10, 0x0c) + b(11, 0) + b(11, 1) + b(0x1b, 0x04, 0),
}
for target, seeds in (("fuzz_write", write_seeds), ("fuzz_read", read_seeds), ("fuzz_api", api_seeds)):
    d = os.path.join(here, "corpus", target)
    os.makedirs(d, exist_ok=True)
    for name, data in seeds.items():
        with open(os.path.join(d, name), "wb") as f:
            f.write(data)
