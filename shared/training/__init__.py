"""Training that means the same thing in every framework: `train_spec` (the pinned optimiser,
loss and schedule), `schedule` (the one warm-up / plateau / early-stop controller), `data`
(seeded NumPy batches), `init_schemes` (the initial weights a recipe names), `trainloop` (epochs,
checkpoints, resume) and `parity` (cross-framework job kinds for the parity tests). The quadrant
plateau experiment that trains through this loop lives beside the product, in experiments/plateau/.

May import `shared.runtime` and `shared.core`; imports no framework.
"""
