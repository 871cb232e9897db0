#!/usr/bin/env python3
"""Writes tests/fixtures/quant_blocks.json: GGML blocks and their dequantized values as
computed by the `gguf` Python package (gguf/quants.py), an implementation independent
of KV Scope's kernels/cpu/quant_formats*.cpp.

For the types gguf can quantize (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, BF16; F16 through numpy)
each entry holds the float input, gguf's bytes, and gguf's dequantization of them.
For the K-quants (dequantize only in gguf) the blocks are random bytes with sane fp16
scale fields, and the entry holds the bytes and gguf's dequantization.

    python3 tests/tools/make_quant_fixtures.py [out.json]
"""
import json
import sys
from pathlib import Path

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import quants

QUANTIZABLE = ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "BF16", "F16"]
K_TYPES = {  # name: (block bytes, [(offset of an fp16 scale field)])
    "Q4_K": (144, [0, 2]),
    "Q5_K": (176, [0, 2]),
    "Q6_K": (210, [208]),
}
N_QUANT = 64      # two 32-blocks per entry
N_K_BLOCKS = 2    # two 256-element super-blocks per entry


def floats(a):
    return [float(v) for v in np.asarray(a, dtype=np.float32).reshape(-1)]


def main():
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1] / "fixtures" / "quant_blocks.json"
    rng = np.random.default_rng(1234)
    entries = []
    for name in QUANTIZABLE:
        for case in range(3):
            x = rng.standard_normal(N_QUANT).astype(np.float32) * np.float32(0.1 * (case + 1))
            if case == 2:
                x[5] = 0.0
                x[40] = -1.5  # a block whose extreme value is negative
            if name == "F16":
                raw = x.astype(np.float16).tobytes()
                deq = np.frombuffer(raw, dtype=np.float16).astype(np.float32)
            else:
                qt = T[name]
                raw = quants.quantize(x.reshape(1, -1), qt).tobytes()
                deq = quants.dequantize(np.frombuffer(raw, dtype=np.uint8).reshape(1, -1), qt)
            entries.append({"type": name, "n": N_QUANT, "input": floats(x), "bytes": raw.hex(), "dequant": floats(deq)})
    for name, (block_bytes, half_fields) in K_TYPES.items():
        for case in range(3):
            raw = bytearray(rng.integers(0, 256, size=block_bytes * N_K_BLOCKS, dtype=np.uint8).tobytes())
            for b in range(N_K_BLOCKS):
                for off in half_fields:
                    h = np.float16(rng.uniform(0.001, 0.05) * (1 if case != 1 else -1)).tobytes()
                    raw[b * block_bytes + off: b * block_bytes + off + 2] = h
            deq = quants.dequantize(np.frombuffer(bytes(raw), dtype=np.uint8).reshape(1, -1), T[name])
            entries.append({"type": name, "n": 256 * N_K_BLOCKS, "bytes": bytes(raw).hex(), "dequant": floats(deq)})
    out.write_text(json.dumps({"generator": "tests/tools/make_quant_fixtures.py (gguf " +
                               getattr(__import__("gguf"), "__version__", "?") + ")", "entries": entries}) + "\n")
    print(f"wrote {out} ({out.stat().st_size} bytes, {len(entries)} entries)")


if __name__ == "__main__":
    main()
