"""PyTorch's CUDA tensors through __cuda_array_interface__ (docs/CAI.md).
Needs PyTorch with CUDA and a device: without a driver every case is SKIPPED
with the reason. An exception in cai_object (a dtype PyTorch cannot hold)
is a limitation of that case.

cai_object returns the torch.Tensor itself, which also offers its DLPack
(__dlpack__, __dlpack_device__): the cai.agree.* rules compare that DLTensor
with the dict (metadata only, no device read)."""

NAME = "PyTorch (CUDA tensors, CUDA Array Interface)"
CAI_DEVICE = "cuda"


def cai_object(spec):
    import torch
    t = torch.tensor(spec["values"], dtype=getattr(torch, spec["dtype"])).reshape(spec["shape"])
    if spec.get("pending"):
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            t = t.to("cuda", non_blocking=True)
    else:
        t = t.to("cuda")
    if spec.get("view") == "step":
        t = t[::2]
    return t


def cai_consume(obj):
    """PyTorch as a consumer: torch.as_tensor of the harness's object on
    CUDA, copied to the host (flat, C order)."""
    import torch
    return torch.as_tensor(obj, device="cuda").cpu().flatten().tolist()
