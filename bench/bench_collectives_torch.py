#!/usr/bin/env python3
"""scatterx.distributed vs torch.distributed (gloo) on the CPU: the collectives of bench/collectives/ (C++).

    OMP_NUM_THREADS=1 mpirun -n 2 python bench/bench_collectives_torch.py [--min-bytes 1K] [--max-bytes 64M]
        [--ops ...] [--markdown FILE] [--json FILE]

The benchmark lives in the package (python_bindings/scatterx/bench/collectives.py: its pairs, method and
checks are described there), so that ``python -m scatterx.bench`` under mpirun runs the same code; this is its
command line. When scatterx cannot be imported, it says so and exits 0.
"""

import os
import sys

if __name__ == "__main__":
    try:
        from scatterx.bench.collectives import main
    except ImportError as e:
        if os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMI_RANK", "0")) == "0":
            print(f"bench_collectives_torch: skipped: scatterx is not importable ({e})")
        sys.exit(0)
    sys.exit(main())
