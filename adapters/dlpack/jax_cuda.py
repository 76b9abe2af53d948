"""JAX on a CUDA device through DLPack (docs/DLPACK.md): a jax.Array in
device memory, its __dlpack__ (producer), and jax.numpy.from_dlpack
(consumer). Needs a GPU and JAX with its CUDA plugin (`jax[cuda12]`):
`just gpu` runs it where both are, alone and paired with CuPy and
PyTorch. Without a CUDA backend the import fails with JAX's own words.

    arrowcert certify --dlpack --device cuda --producer py:adapters/dlpack/jax_cuda.py --consumer py:adapters/dlpack/jax_cuda.py
"""
import os

# 64-bit dtypes as the harness's tensors carry them; no preallocation of
# most of the device's memory: a certification run, not a training job.
os.environ.setdefault("JAX_ENABLE_X64", "1")
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

NAME = f"JAX {jax.__version__} (CUDA, DLPack)"

# The first CUDA device; raises (RuntimeError: "Unknown backend: 'gpu'
# requested, but no platforms that are instances of gpu are present")
# where JAX has no CUDA backend.
_DEVICE = jax.devices("gpu")[0]


def dlpack_load(tensor):
    # Producer side: the harness's tensor (host memory) copied into an
    # array of JAX's own in device memory; its __dlpack__ is certified.
    x = jax.device_put(np.from_dlpack(tensor).copy(), _DEVICE)
    x.block_until_ready()
    return x


def dlpack_read(tensor):
    # Consumer side: JAX's from_dlpack, as its users call it.
    return jnp.from_dlpack(tensor)
