"""Reads a safetensors checkpoint directory into numpy arrays by tensor name.

Independent of the C++ reader on purpose (docs/model.md "Checkpoint files"): a shard is an 8-byte little-endian
header length N, N bytes of JSON, then raw data; every entry's data_offsets are relative to the
data start (absolute = 8 + N + begin). Dtypes:
  BF16 -> float32 exactly (the 16 bits become the high half of the float32, i.e. `<< 16`)
  F16  -> float32 (exact widening)
  F32  -> float32
  U8   -> uint8 (MXFP4 packed nibbles and E8M0 scales stay raw; the model decodes them)
When model.safetensors.index.json exists, its weight_map must agree with the shard headers.
Any inconsistency raises CheckpointError naming the file and tensor.
"""

import json
import os
import struct

import numpy as np


class CheckpointError(Exception):
    pass


_ELEMENT_SIZE = {"BF16": 2, "F16": 2, "F32": 4, "U8": 1}


def _widen(raw, dtype, shape):
    """Turns the raw bytes of one tensor into a numpy array of its logical dtype."""
    if dtype == "BF16":
        bits = np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16
        return bits.view(np.float32).reshape(shape)
    if dtype == "F16":
        return np.frombuffer(raw, dtype="<f2").astype(np.float32).reshape(shape)
    if dtype == "F32":
        return np.frombuffer(raw, dtype="<f4").astype(np.float32).reshape(shape)
    if dtype == "U8":
        return np.frombuffer(raw, dtype=np.uint8).reshape(shape).copy()
    raise AssertionError(dtype)


def read_shard(path):
    """Returns {name: (dtype, shape, array)} for one .safetensors file."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise CheckpointError(f"{path}: shorter than the 8-byte header length")
    (header_len,) = struct.unpack("<Q", data[:8])
    if 8 + header_len > len(data):
        raise CheckpointError(f"{path}: header length {header_len} runs past the end of the file ({len(data)} bytes)")
    try:
        header = json.loads(data[8 : 8 + header_len].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CheckpointError(f"{path}: malformed header JSON: {e}") from None
    data_start = 8 + header_len
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        dtype = entry["dtype"]
        shape = tuple(int(d) for d in entry["shape"])
        begin, end = (int(o) for o in entry["data_offsets"])
        if dtype not in _ELEMENT_SIZE:
            raise CheckpointError(f"{path}: tensor {name}: unsupported dtype {dtype}")
        numel = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if end - begin != numel * _ELEMENT_SIZE[dtype]:
            raise CheckpointError(
                f"{path}: tensor {name}: {end - begin} bytes but shape {list(shape)} {dtype} needs "
                f"{numel * _ELEMENT_SIZE[dtype]}")
        if data_start + end > len(data):
            raise CheckpointError(f"{path}: tensor {name}: data ends at {data_start + end}, file has {len(data)} bytes")
        tensors[name] = (dtype, shape, _widen(data[data_start + begin : data_start + end], dtype, shape))
    return tensors


def load_checkpoint(model_dir):
    """Returns (arrays, dtypes): {name: np.ndarray} and {name: safetensors dtype string}."""
    shard_names = sorted(n for n in os.listdir(model_dir) if n.endswith(".safetensors"))
    if not shard_names:
        raise CheckpointError(f"{model_dir}: no *.safetensors files")
    arrays, dtypes, shard_of = {}, {}, {}
    for shard in shard_names:
        for name, (dtype, _, array) in read_shard(os.path.join(model_dir, shard)).items():
            if name in arrays:
                raise CheckpointError(f"{model_dir}: tensor {name} appears in both {shard_of[name]} and {shard}")
            arrays[name], dtypes[name], shard_of[name] = array, dtype, shard

    index_path = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(index_path):
        with open(index_path) as f:
            weight_map = json.load(f).get("weight_map", {})
        for name, shard in weight_map.items():
            if name not in shard_of:
                raise CheckpointError(f"{index_path}: weight_map names {name}, which no shard holds")
            if shard_of[name] != shard:
                raise CheckpointError(f"{index_path}: weight_map puts {name} in {shard}, but it is in {shard_of[name]}")
        for name in shard_of:
            if name not in weight_map:
                raise CheckpointError(f"{index_path}: tensor {name} (in {shard_of[name]}) is missing from weight_map")
    return arrays, dtypes
