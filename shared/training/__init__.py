"""Training that means the same thing in every framework, by the recipe `shared.core.train_spec`
pins (optimiser, loss, schedule: in the core because every port's train.py reads it): `schedule`
(the one warm-up / plateau / early-stop controller), `data` (seeded NumPy batches),
`init_schemes` (the initial weights a recipe names), `trainloop` (epochs, checkpoints, resume) and
`parity` (cross-framework job kinds for the parity tests). The quadrant plateau experiment that
trains through this loop lives beside the product, in experiments/plateau/.

May import `shared.runtime` and `shared.core`; imports no framework.
"""
