"""Calibrating the simulator's cost model on a GPU (`conductor calibrate gpu|validate|apply`).

Torch only (a machine with PyTorch and no SGLang is enough); every module that needs torch
imports it when called, so the package imports fast. Its modules, in the order they are used:

* `config`: the calibration config (`configs/calibrate/*.yaml`): shapes, device limits,
  timing, the micro and whole-step grids.
* `timing`: `Timer`, the median of a run with CUDA events, CUDA graphs and an L2 flush.
* `decoder`: a Qwen3-like decoder at the model's shapes: per-layer weights, separate K and V
  caches per layer, one whole forward per call.
* `measure`: the micro-benchmarks, one cost-model term each; `steps`: whole forwards.
* `fit`: pure least-squares fits of the coefficients (micro terms, then whole steps).
* `limits`: what each coefficient implies about the device, against its peak (pure).
* `validate`: predicted vs measured per step, for the configured and the calibrated model.
"""
