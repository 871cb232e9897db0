#!/usr/bin/env python3
"""Every sample of a Prometheus text page as prometheus_client's own parser reads it.

usage: prometheus_samples.py PAGE.txt  ->  JSON list of [name, {labels}, value] on stdout
(values as strings: "NaN", "+Inf" and "-Inf" stay readable). tst_prometheus compares
app/remote's parser with this, sample by sample.
"""
import json
import math
import sys

from prometheus_client.parser import text_string_to_metric_families


def fmt(v):
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "+Inf" if v > 0 else "-Inf"
    return repr(float(v))


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        text = f.read()
    out = []
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out.append([s.name, dict(s.labels), fmt(s.value)])
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
