"""What the benchmarks say about the machine they ran on. Standard library only: bench/machine.py loads this
file by its path, so the repository's scripts read the same figure without the package installed."""
import os
import platform


def cpu_model() -> str:
    """The CPU's model name from /proc/cpuinfo (what lscpu calls 'Model name'), else what platform knows."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine_info() -> dict:
    """The "machine" object of a results file (scatterx.bench.results)."""
    return {"cpu": cpu_model(), "logical_cpus": os.cpu_count() or 1}
