"""What the Python benchmarks say about the machine they ran on (imported from bench/, which is on sys.path
when a script there runs). The code lives in the package (python_bindings/scatterx/bench/machine.py, standard
library only); it is loaded from its file so that scripts such as scaling.py run without scatterx installed."""
import importlib.util
import os

_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "python_bindings", "scatterx", "bench",
                     "machine.py")
_spec = importlib.util.spec_from_file_location("_scatterx_bench_machine", _PATH)
_module = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_module)

cpu_model = _module.cpu_model
machine_info = _module.machine_info
