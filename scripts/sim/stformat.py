"""The safetensors file format, written and mapped without the safetensors package.

Debian 12 has no python3-safetensors. The format is small and documented: an
8-byte little-endian header length, a JSON header mapping each tensor name to
{"dtype", "shape", "data_offsets": [begin, end]} (offsets relative to the end of
the header) plus an optional "__metadata__" map of strings, then the raw
little-endian tensor bytes.
"""
import json
import mmap
import struct

import numpy as np

# safetensors dtype names <-> numpy dtypes (the ones the simulator uses).
_DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32, "U8": np.uint8}
_NAMES = {np.dtype(v): k for k, v in _DTYPES.items()}

# The data section starts 8-byte aligned, as the reference writer pads the
# header with spaces; mmapped tensors are then aligned for their dtype.
_ALIGN = 8


def write(path, tensors, metadata=None):
    """Write {name: numpy array} to path in safetensors format."""
    header = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    offset = 0
    arrays = []
    for name, arr in tensors.items():
        arr = np.ascontiguousarray(arr)
        if arr.dtype not in _NAMES:
            raise ValueError(f"unsupported dtype {arr.dtype} for tensor {name}")
        header[name] = {"dtype": _NAMES[arr.dtype], "shape": list(arr.shape),
                        "data_offsets": [offset, offset + arr.nbytes]}
        offset += arr.nbytes
        arrays.append(arr)
    raw = json.dumps(header, separators=(",", ":")).encode()
    raw += b" " * (-(8 + len(raw)) % _ALIGN)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        for arr in arrays:
            f.write(arr.tobytes())


def read_header(f):
    """Return (header dict, offset of the data section) of an open file."""
    f.seek(0)
    (n,) = struct.unpack("<Q", f.read(8))
    if n > 100 * 1024 * 1024:
        raise ValueError(f"{f.name}: header length {n} is not plausible")
    return json.loads(f.read(n)), 8 + n


def mmap_tensors(path):
    """Map a safetensors file; return ({name: torch tensor}, metadata).

    The tensors are views on a private (copy-on-write) mapping, like
    safetensors' safe_open: nothing is read until a page is touched, so page
    faults happen when the model first uses the weights. ACCESS_COPY rather than
    ACCESS_READ because torch.frombuffer warns about read-only buffers.
    """
    import torch

    with open(path, "rb") as f:
        header, base = read_header(f)
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_COPY)
    metadata = header.pop("__metadata__", {})
    out = {}
    for name, info in header.items():
        begin, end = info["data_offsets"]
        dtype = torch.from_numpy(np.empty(0, _DTYPES[info["dtype"]])).dtype
        count = (end - begin) // np.dtype(_DTYPES[info["dtype"]]).itemsize
        t = torch.frombuffer(mm, dtype=dtype, count=count, offset=base + begin) if count else \
            torch.empty(0, dtype=dtype)
        out[name] = t.reshape(info["shape"])
    return out, metadata
