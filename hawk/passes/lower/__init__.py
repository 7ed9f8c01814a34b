"""Lowering rules for hawk ops, one module per responsibility, shared by the host and GPU drivers
(hawk/passes/lower_host.py, lower_gpu.py, lower_gpu_tree.py); context.py holds the state and the rule table.
Importing the package registers every rule."""

from hawk.passes.lower import block, planes, reduce_full, scan, scatters  # noqa: F401  (they register their rules)
