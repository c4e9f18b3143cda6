"""Where frameworks silently differ: the divergence catalogue (`divergences`, its reference
variants in `variants`), `tracing` (first divergent tensor), `diagnosis` (which setting explains
a gap), `audit` (framework defaults used instead of spec values) and `lessons` (the ports' own
code side by side).

May import `shared.runtime` and `shared.core`.
"""
