#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Seed inputs for the weight-file fuzz targets (spec/fuzz/corpus/fuzz_npy,
fuzz_npz, fuzz_safetensors): small valid files of every dtype, byte order,
memory order and format version the readers accept, plus archives that use
the zip features the npz reader understands (deflate, ZIP64 extra fields,
data descriptors, comments).  Files are written with numpy and zipfile;
safetensors byte by byte (json + struct, as the format specifies).

    /usr/bin/python3 spec/fuzz/gen_seeds.py

Seeds are named seed-*; other files in those directories (inputs the
fuzzer found, crash reproducers) are left alone."""
import io
import json
import os
import struct
import zipfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
rng = np.random.default_rng(8)


def out(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "seed-" + name), "wb") as f:
        f.write(data)


def npy_bytes(a, version=None):
    buf = io.BytesIO()
    if version is None:
        np.save(buf, a)
    else:
        np.lib.format.write_array(buf, a, version=version)
    return buf.getvalue()


# ---------------------------------------------------------------- .npy
small = rng.standard_normal((2, 3)).astype(np.float32)
arrays = {
    "f4": small,
    "f4_be": small.astype(">f4"),
    "f4_fortran": np.asfortranarray(small),
    "f8": small.astype(np.float64),
    "f8_fortran3d": np.asfortranarray(rng.standard_normal((2, 2, 2))),
    "f2": small.astype(np.float16),
    "i1": np.array([-128, 0, 127], np.int8),
    "u1": np.array([0, 1, 255], np.uint8),
    "i2": np.array([-3, 7], np.int16),
    "u2_be": np.array([1, 65535], ">u2"),
    "i4": np.array([[1, -2], [3, 4]], np.int32),
    "u4": np.array([4294967295], np.uint32),
    "i8": np.array([-(2 ** 40), 5], np.int64),
    "u8_be": np.array([2 ** 63], ">u8"),
    "b1": np.array([True, False, True]),
    "scalar": np.array(1.5, np.float32),
    "empty": np.zeros((0, 3), np.float32),
    "special": np.array([np.nan, np.inf, -np.inf, -0.0, 1e-45], np.float32),
    "dims8": np.zeros((1, 1, 1, 1, 1, 1, 1, 2), np.float32),
}
for name, a in arrays.items():
    out("fuzz_npy", name + ".npy", npy_bytes(a))
out("fuzz_npy", "v2.npy", npy_bytes(small, (2, 0)))
out("fuzz_npy", "v3.npy", npy_bytes(small, (3, 0)))

# ---------------------------------------------------------------- .npz
def savez(compressed, **kw):
    buf = io.BytesIO()
    (np.savez_compressed if compressed else np.savez)(buf, **kw)
    return buf.getvalue()


out("fuzz_npz", "stored.npz", savez(False, a=small, b=arrays["i2"]))
out("fuzz_npz", "deflated.npz", savez(True, w=small, mask=arrays["b1"]))
out("fuzz_npz", "one.npz", savez(False, x=arrays["scalar"]))
out("fuzz_npz", "empty_archive.npz", savez(False))


class Unseekable(io.RawIOBase):
    """A write-only stream without seek: zipfile then writes data descriptors."""

    def __init__(self):
        self.buf = bytearray()

    def writable(self):
        return True

    def write(self, b):
        self.buf += b
        return len(b)


def zip_bytes(members, compression, force_zip64=False, comment=b"", unseekable=False):
    sink = Unseekable() if unseekable else io.BytesIO()
    with zipfile.ZipFile(sink, "w", compression=compression) as z:
        for name, a in members:
            with z.open(name, "w", force_zip64=force_zip64) as f:
                f.write(npy_bytes(a))
        z.comment = comment
    return bytes(sink.buf) if unseekable else sink.getvalue()


out("fuzz_npz", "zip64.npz", zip_bytes([("a.npy", small), ("f.npy", arrays["f4_fortran"])], zipfile.ZIP_STORED, True))
out("fuzz_npz", "descriptor.npz", zip_bytes([("d.npy", arrays["f8"])], zipfile.ZIP_DEFLATED, unseekable=True))
out("fuzz_npz", "comment.npz", zip_bytes([("c.npy", arrays["u1"])], zipfile.ZIP_STORED, comment=b"a comment"))
out("fuzz_npz", "noext.npz", zip_bytes([("plain", arrays["i4"]), ("dir/x.npy", arrays["f2"])], zipfile.ZIP_STORED))

# ---------------------------------------------------------------- safetensors
DT = {"F32": "<f4", "F16": "<f2", "F64": "<f8", "I64": "<i8", "I32": "<i4", "I16": "<i2", "I8": "i1",
      "U64": "<u8", "U32": "<u4", "U16": "<u2", "U8": "u1", "BOOL": "?"}


def safetensors(tensors, metadata=None, pad=True, order=None):
    """tensors: list of (name, dtype, array or raw bytes + shape)."""
    header, chunks, off = {}, [], 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, a in tensors:
        if dtype == "BF16":
            raw = (np.asarray(a, np.float32).view(np.uint32) >> 16).astype("<u2").tobytes()
        else:
            raw = np.asarray(a).astype(DT[dtype]).tobytes()
        header[name] = {"dtype": dtype, "shape": list(np.shape(a)), "data_offsets": [off, off + len(raw)]}
        chunks.append(raw)
        off += len(raw)
    js = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode()
    if pad:
        js += b" " * ((8 - len(js) % 8) % 8)
    return struct.pack("<Q", len(js)) + js + b"".join(chunks)


out("fuzz_safetensors", "f32.safetensors", safetensors([("w", "F32", small), ("b", "F32", small[0])],
                                                          {"format": "pt"}))
out("fuzz_safetensors", "mixed.safetensors", safetensors(
    [(dt.lower(), dt, np.array([1, 0, 2], np.float32) if dt != "BOOL" else np.array([True, False]))
     for dt in ["F64", "I64", "F32", "I32", "BF16", "F16", "I16", "I8", "U8", "BOOL", "U16", "U32", "U64"]]))
out("fuzz_safetensors", "empty.safetensors", safetensors([]))
out("fuzz_safetensors", "meta_only.safetensors", safetensors([], {"k": "v", "\u00e9": "x"}))
out("fuzz_safetensors", "scalar_and_zero.safetensors", safetensors(
    [("s", "F32", np.array(3.0, np.float32)), ("z", "F32", np.zeros((0, 2), np.float32))]))
out("fuzz_safetensors", "unicode.safetensors", safetensors(
    [("layer.0.\u00fcber", "BF16", small), ("\u4e2d", "F16", small[:, :1])], pad=False))
out("fuzz_safetensors", "null_meta.safetensors", safetensors([("n", "U8", np.arange(4))], None))
