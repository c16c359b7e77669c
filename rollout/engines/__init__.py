"""Inference engines behind one protocol (`base.Engine`: token ids in, token ids and logprobs out).

* `base`: the protocol and its request, result, stats and KV-hint records.
* `sim/`: the in-process simulated continuous-batching engine on a calibrated cost model.

Engines never import the runtime that drives them (checked by `make lint`).
"""
