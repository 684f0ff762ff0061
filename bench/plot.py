#!/usr/bin/env python3
"""PNG figures from the benchmarks' JSON results (the --json of scatterx_bench_collectives,
bench_collectives_torch.py, bench_torch.py, gpu_report.py and python -m scatterx.bench):

    python3 bench/plot.py results/*.json -o bench/figures

The code is the package's (python_bindings/scatterx/bench/plot.py: the figures it draws are listed there;
the JSON format is described in python_bindings/scatterx/bench/results.py); it needs scatterx installed
(pip install .) and matplotlib (pip install matplotlib).
"""

import sys

if __name__ == "__main__":
    try:
        from scatterx.bench.plot import main
    except ImportError as e:
        print(f"plot.py: needs the scatterx package (pip install .): {e}", file=sys.stderr)
        sys.exit(1)
    sys.exit(main())
