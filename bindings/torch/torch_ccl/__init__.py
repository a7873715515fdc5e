"""The former name of oneCCL's PyTorch package (before 1.12), for scripts that still import it:
ccl's backend, the same module as `ccl_torch` (see oneccl_bindings_for_pytorch)."""
import os

from ccl_torch import *  # noqa: F401,F403: registers the backend
from ccl_torch import __all__, __version__  # noqa: F401

cwd = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                   "oneccl_bindings_for_pytorch")
