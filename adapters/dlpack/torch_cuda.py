"""PyTorch on a CUDA device through DLPack (docs/DLPACK.md): a
torch.Tensor in device memory, its __dlpack__ (producer), and
torch.from_dlpack (consumer). Needs a GPU and PyTorch: `just gpu` runs it
where both are.

    arrowcert certify --dlpack --device cuda --producer py:adapters/dlpack/torch_cuda.py --consumer py:adapters/dlpack/torch_cuda.py
"""
import torch

NAME = f"PyTorch {torch.__version__} (CUDA, DLPack)"


def dlpack_load(tensor):
    # Producer side: the harness's tensor (host memory) copied into a
    # tensor of PyTorch's own in device memory; its __dlpack__ is
    # certified.
    t = torch.from_dlpack(tensor).to("cuda", copy=True)
    torch.cuda.synchronize()
    return t


def dlpack_read(tensor):
    # Consumer side: PyTorch's from_dlpack, as its users call it.
    return torch.from_dlpack(tensor)
