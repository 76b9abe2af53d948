"""JAX on the CPU through DLPack (docs/DLPACK.md): a jax.Array's
__dlpack__ (producer) and jax.numpy.from_dlpack (consumer).

    arrowcert certify --dlpack --producer py:adapters/dlpack/jax.py --consumer py:adapters/dlpack/jax.py
"""
import os

# The CPU only, one device, no preallocation: a certification run, not a
# training job.
os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("JAX_ENABLE_X64", "1")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

NAME = f"JAX {jax.__version__} (CPU, DLPack)"


def dlpack_load(tensor):
    return jnp.asarray(np.from_dlpack(tensor).copy())


def dlpack_read(tensor):
    return jnp.from_dlpack(tensor)
