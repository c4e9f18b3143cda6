"""The quadrant plateau experiment's machinery (`compare.py experiment plateau`, started from
experiments/quadrant.py): `bookkeeping` (dwell near ln(2)/2, confusion matrices, the plateau
epoch), `runs` (the worker's `plateau` job kind: one process per framework, the product's training
loop), `experiment` (conditions, the one-setting sweep, cross-port agreement), `report` (the
printed summary and the JSON / CSV / PNG files)."""
