"""Where frameworks silently differ: the divergence catalogue (`divergences`: one row per divergence,
an `Entry` of `row`, holding its alternatives, the specs they are measured on, its demonstration
and its lesson; the demonstrations' template in `demo`, what they measure beyond it in
`forward_demos` / `family_demos` / `position_demos` / `training_demos` / `precision_demos`; the
alternatives' changes in `transforms` / `family_transforms` / `position_transforms`; the rows read
for `diagnose` in `variants` and for the rung table in `detectability`),
`first_divergence` (the first tensor where a port leaves the reference), `gap_explanation`
(which setting explains a gap), `audit` (framework defaults used instead of spec values),
`user_check` (the verdict on a user's own model, `shared/your_model/`'s run, with diagnose and
trace) and `lessons` / `rosetta` (the ports' own code side by side, read by `port_source`).

May import `shared.your_model`, `shared.runtime`, `shared.core` and the `ports` registry; each
framework's side of the catalogue is its port's `ports/<fw>/defaults.py` (the defaults) and
`demos.py` (the demonstrations), loaded through `ports.load_port_part`; a built model is read by
its `user.py`.
"""
