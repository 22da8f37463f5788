#!/usr/bin/env python3
"""Cuts a GGUF written by `stave export-gguf` down to a fuzzing seed: every metadata entry is
kept with its type, arrays cut to their first ARRAY elements, and the first TENSORS tensors of at
most MAX_BYTES bytes each are kept with their data (offsets and alignment recomputed). The rest
of the file's structure is what the exporter wrote. Usage:
  trim_gguf.py IN.gguf OUT.gguf [ARRAY=48] [TENSORS=6] [MAX_BYTES=2048]"""
import struct
import sys

src, dst = sys.argv[1], sys.argv[2]
keep_array = int(sys.argv[3]) if len(sys.argv) > 3 else 48
keep_tensors = int(sys.argv[4]) if len(sys.argv) > 4 else 6
max_bytes = int(sys.argv[5]) if len(sys.argv) > 5 else 2048
data = open(src, "rb").read()
pos = 0
SCALAR = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "B", 10: "Q", 11: "q", 12: "d"}


def take(fmt):
    global pos
    v = struct.unpack_from("<" + fmt, data, pos)
    pos += struct.calcsize("<" + fmt)
    return v[0]


def raw_string():
    global pos
    n = take("Q")
    s = data[pos:pos + n]
    pos += n
    return struct.pack("<Q", n) + s


def raw_value(t):
    global pos
    if t == 8:
        return raw_string()
    fmt = SCALAR[t]
    start = pos
    take(fmt)
    return data[start:pos]


assert data[:4] == b"GGUF", "not a GGUF file"
pos = 4
version, n_tensors, n_kv = take("I"), take("Q"), take("Q")
out_kv = []
alignment = 32
for _ in range(n_kv):
    key = raw_string()
    t = take("I")
    if t == 9:
        at, n = take("I"), take("Q")
        items = [raw_value(at) for _ in range(n)]
        out_kv.append(key + struct.pack("<IIQ", 9, at, min(n, keep_array)) + b"".join(items[:keep_array]))
    else:
        v = raw_value(t)
        if key[8:] == b"general.alignment":
            alignment = struct.unpack("<I", v)[0]
        out_kv.append(key + struct.pack("<I", t) + v)
infos = []
for _ in range(n_tensors):
    name = raw_string()
    nd = take("I")
    ne = [take("Q") for _ in range(nd)]
    typ, off = take("I"), take("Q")
    infos.append((name, ne, typ, off))
data_start = (pos + alignment - 1) // alignment * alignment
ends = sorted(off for _, _, _, off in infos) + [len(data) - data_start]
kept = []
for name, ne, typ, off in infos:
    size = min(e for e in ends if e > off) - off  # up to the next tensor: includes padding
    if size <= max_bytes and len(kept) < keep_tensors:
        kept.append((name, ne, typ, data[data_start + off:data_start + off + size]))
head = b"GGUF" + struct.pack("<IQQ", version, len(kept), len(out_kv)) + b"".join(out_kv)
blobs, offset, tinfo = [], 0, b""
for name, ne, typ, blob in kept:
    tinfo += name + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne) + struct.pack("<IQ", typ, offset)
    blob += b"\0" * ((-len(blob)) % alignment)
    blobs.append(blob)
    offset += len(blob)
head += tinfo
head += b"\0" * ((-len(head)) % alignment)
open(dst, "wb").write(head + b"".join(blobs))
print(f"{dst}: {len(out_kv)} metadata entries, {len(kept)} of {n_tensors} tensors, {len(head) + offset} bytes")
