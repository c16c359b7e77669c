"""What a run leaves behind and how it is read: run directories, metrics, the report.

* `run_dir`, `run_records`: the run-directory layout and its typed JSONL records.
* `recorder`: writes a run directory while the run goes.
* `timeseries`: engine counters and the periodic engine samples.
* `metrics`, `phase_metrics`, `engine_metrics`: pure aggregates of a run's records.
* `run_summary`: the headline numbers of one run, for side-by-side tables.
* `report`, `plots`: metrics.json, report.md and the PNG figures.
"""
