"""Several hosts at once, on Dask distributed: ``refbench scheduler`` and ``refbench worker`` make the cluster,
``refbench run --hosts 1,2,4`` runs a plan on that many nodes per step, each node measuring its own host, all
starting together, and brings every node's run back into one run directory.

Where things are: security.py turns the TLS settings into Dask's; node.py is what runs on a worker;
coordinator.py picks the nodes, starts them together, watches for dead workers and collects the results;
summary.py makes the per-node, total, uniformity and scaling tables and charts.
"""
