"""oneCCL's PyTorch package name for ccl's backend: `import oneccl_bindings_for_pytorch` then
`dist.init_process_group("ccl")`, as scripts written for Intel's package do (docs/oneccl.md).

The same module as `ccl_torch`. `cwd` is this package's folder, where oneCCL's package keeps
`env/setvars.sh`: sourcing it points CCL_ROOT, CPATH, LIBRARY_PATH and LD_LIBRARY_PATH at the ccl
this backend was built against, as DeepSpeed's CCL op build expects.
"""
import os

from ccl_torch import *  # noqa: F401,F403: registers the backend
from ccl_torch import __all__, __version__  # noqa: F401

cwd = os.path.dirname(os.path.abspath(__file__))
