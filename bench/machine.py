"""What the Python benchmarks say about the machine they ran on (imported from bench/, which is on sys.path
when a script there runs)."""
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
