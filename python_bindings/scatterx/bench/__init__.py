"""scatterx's benchmarks beside torch, runnable from an installed package.

``python -m scatterx.bench [--quick] [--ops ...] [--plot] [--out DIR]`` runs the local ops beside torch (or,
under mpirun, the collectives beside gloo), prints the ratio table and writes the results as JSON (the
format of :mod:`scatterx.bench.results`) and, with ``--plot``, PNG figures (:mod:`scatterx.bench.plot`).

Modules: ``results`` (the JSON format, read and written), ``local`` (the GNN and MoE workloads of
bench/bench_torch.py), ``collectives`` (scatterx.distributed vs gloo, bench/bench_collectives_torch.py),
``timing``, ``progress``, ``data`` (the C++ benchmark's inputs), ``machine``, ``plot`` (matplotlib, imported
only there).
"""
