#!/usr/bin/env python3
"""Writes tests/fixtures/py_written.gguf.bin with the reference `gguf` Python package
(gguf.GGUFWriter) and tests/fixtures/py_written_expected.json with the tensor values as
gguf-py dequantizes them. tests/tst_gguf.cpp reads the file with KV Scope's reader and
checks exactly the values below (keep the two in sync).

Usage: python3 tests/tools/make_gguf_fixture.py   (needs: pip install gguf numpy)
"""
import json
import os

import numpy as np
import gguf
from gguf import GGUFWriter, GGMLQuantizationType
from gguf.quants import quantize, dequantize

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURES = os.path.join(HERE, "..", "fixtures")


def main():
    path = os.path.join(FIXTURES, "py_written.gguf.bin")
    w = GGUFWriter(path, "llama")           # writes general.architecture = "llama"
    w.add_custom_alignment(64)               # general.alignment = 64 (uint32)
    w.add_uint8("test.u8", 200)
    w.add_int8("test.i8", -100)
    w.add_uint16("test.u16", 60000)
    w.add_int16("test.i16", -30000)
    w.add_uint32("test.u32", 4000000000)
    w.add_int32("test.i32", -2000000000)
    w.add_float32("test.f32", 0.15625)
    w.add_bool("test.bool_true", True)
    w.add_bool("test.bool_false", False)
    w.add_string("test.string", "héllo GGUF ✓")
    w.add_uint64("test.u64", 18000000000000000000)
    w.add_int64("test.i64", -9000000000000000000)
    w.add_float64("test.f64", -2.718281828459045)
    w.add_array("test.arr_i32", [1, -2, 3, 2147483647])          # int32 elements
    w.add_array("test.arr_f32", [0.5, -1.25, 3.0])               # float32 elements
    w.add_array("test.arr_str", ["a", "", "Ġthe", "<|im_end|>"])  # string elements
    w.add_array("test.arr_bool", [True, False, True])
    w.add_array("test.arr_nested", [[1, 2], [3], [4, 5, 6]])      # arrays of int32 arrays

    rng = np.random.default_rng(1234)
    t_f32 = (np.arange(3 * 32, dtype=np.float32).reshape(3, 32) * 0.25 - 5.0)  # ne = [32, 3]
    t_f16 = rng.standard_normal((2, 64)).astype(np.float16)                      # ne = [64, 2]
    t_q80 = rng.standard_normal((4, 64)).astype(np.float32)                      # ne = [64, 4]
    q = quantize(t_q80, GGMLQuantizationType.Q8_0)
    w.add_tensor("t.f32", t_f32)
    w.add_tensor("t.f16", t_f16)
    w.add_tensor("t.q8_0", q, raw_dtype=GGMLQuantizationType.Q8_0)

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()

    expected = {
        "t.f32": {"type": "F32", "ne": [32, 3], "values": t_f32.flatten().tolist()},
        "t.f16": {"type": "F16", "ne": [64, 2], "values": t_f16.astype(np.float32).flatten().tolist()},
        "t.q8_0": {"type": "Q8_0", "ne": [64, 4],
                   "values": dequantize(q, GGMLQuantizationType.Q8_0).flatten().tolist()},
    }
    with open(os.path.join(FIXTURES, "py_written_expected.json"), "w") as f:
        json.dump({"gguf_py_version": getattr(gguf, "__version__", "?"), "tensors": expected}, f)
    print("wrote", path, os.path.getsize(path), "bytes")


if __name__ == "__main__":
    main()
