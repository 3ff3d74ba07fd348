"""The IDX file format of MNIST / Fashion-MNIST (LeCun et al., "THE MNIST DATABASE").

Layout: two zero bytes, one type code, one byte giving the number of
dimensions ``d``, ``d`` big-endian uint32 sizes, then the values in C order,
big-endian.  Files are usually gzip-compressed (``*-ubyte.gz``).  The reader
detects gzip by its magic bytes, checks the header and that the payload has
exactly the announced length, and names the file in every error.
"""

from __future__ import annotations

import gzip
import os
import struct
import tempfile
import zlib
from pathlib import Path

import numpy as np

from priorlab.io import umask_mode

#: IDX type code -> big-endian numpy dtype.
IDX_DTYPES: dict[int, np.dtype] = {
    0x08: np.dtype(np.uint8),
    0x09: np.dtype(np.int8),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}
_GZIP_MAGIC = b"\x1f\x8b"


def read_idx_bytes(path: str | os.PathLike) -> bytes:
    """Return the (decompressed) bytes of an IDX file; gzip is detected by its magic bytes."""
    path = Path(path)
    raw = path.read_bytes()
    if raw[:2] != _GZIP_MAGIC:
        return raw
    try:
        return gzip.decompress(raw)
    except (EOFError, OSError, zlib.error) as exc:
        raise ValueError(
            f"{path}: corrupt or truncated gzip stream ({exc}); delete the file and fetch it again"
        ) from exc


def parse_idx(data: bytes, name: str = "<bytes>") -> np.ndarray:
    """Parse IDX bytes into a native-endian array; ``name`` is used in error messages."""
    if len(data) < 4:
        raise ValueError(f"{name}: too short for an IDX header ({len(data)} bytes)")
    zero0, zero1, code, ndim = data[0], data[1], data[2], data[3]
    if zero0 != 0 or zero1 != 0:
        raise ValueError(
            f"{name}: bad IDX magic {data[:4].hex()} (the first two bytes must be zero); "
            "not an IDX file or a corrupt header"
        )
    if code not in IDX_DTYPES:
        raise ValueError(f"{name}: unknown IDX type code 0x{code:02x} (corrupt header?)")
    if ndim == 0:
        raise ValueError(f"{name}: IDX header announces 0 dimensions (corrupt header?)")
    header_len = 4 + 4 * ndim
    if len(data) < header_len:
        raise ValueError(f"{name}: truncated IDX header ({len(data)} of {header_len} bytes)")
    shape = struct.unpack(f">{ndim}I", data[4:header_len])
    dtype = IDX_DTYPES[code]
    expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    got = len(data) - header_len
    if got < expected:
        raise ValueError(
            f"{name}: truncated IDX payload: header announces shape {shape} ({expected} bytes), "
            f"file holds {got} bytes; delete the file and fetch it again"
        )
    if got > expected:
        raise ValueError(
            f"{name}: {got - expected} unexpected trailing bytes after the IDX payload of shape {shape}"
        )
    arr = np.frombuffer(data, dtype=dtype, offset=header_len).reshape(shape)
    return arr.astype(dtype.newbyteorder("="), copy=True)


def read_idx(path: str | os.PathLike) -> np.ndarray:
    """Read an IDX file (plain or gzip) into a native-endian numpy array."""
    return parse_idx(read_idx_bytes(path), name=str(path))


def idx_bytes(array: np.ndarray) -> bytes:
    """Serialise ``array`` to IDX bytes (header + big-endian payload)."""
    array = np.asarray(array)
    code = next(
        (c for c, dt in IDX_DTYPES.items()
         if dt.kind == array.dtype.kind and dt.itemsize == array.dtype.itemsize),
        None,
    )
    if code is None:
        raise ValueError(
            f"dtype {array.dtype} has no IDX type code "
            "(supported: uint8, int8, int16, int32, float32, float64)"
        )
    if array.ndim == 0 or array.ndim > 255:
        raise ValueError(f"IDX needs 1..255 dimensions, got {array.ndim}")
    if any(s >= 2**32 for s in array.shape):
        raise ValueError(f"IDX sizes must fit in uint32, got shape {array.shape}")
    header = bytes([0, 0, code, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    return header + np.ascontiguousarray(array, dtype=IDX_DTYPES[code]).tobytes()


def write_idx(path: str | os.PathLike, array: np.ndarray, compress: bool | None = None) -> Path:
    """Write ``array`` as an IDX file, atomically; gzip when ``compress`` (default: name ends in .gz).

    The gzip header carries mtime 0, so equal arrays give byte-identical files.
    """
    path = Path(path)
    if compress is None:
        compress = path.suffix == ".gz"
    payload = idx_bytes(array)
    if compress:
        payload = gzip.compress(payload, mtime=0)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".part")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
        os.chmod(tmp, umask_mode())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
