"""Calibration of the simulator's cost model on a GPU (`conductor calibrate gpu | apply`).

* `measure`: torch-only micro-benchmarks (a machine with PyTorch and no SGLang is enough):
  pinned host<->device copies of KV pages, decode and prefill attention, the dense layers'
  GEMMs at the model's shapes. Writes a JSON of raw timings.
* `fit`: pure least-squares fits of the cost model's coefficients from those timings, and
  the model config with them applied.
"""
