# Appended to torch/distributed/__init__.py by dlk8s's PyTorch image
# (tools/images/pytorch/Containerfile). Debian builds PyTorch without
# libuv, while TCPStore asks for libuv unless told not to, and torchrun's
# rendezvous (static and c10d) and its workers' init_process_group() never
# tell it: every torchrun of more than one process would fail with
# "use_libuv was requested but PyTorch was build without libuv support".
# So the default becomes what this build has, in torch.distributed and in
# its modules imported before this point.
import sys as _sys

import torch.distributed as _distributed

if _distributed.is_available():
    _LibuvTCPStore = _distributed.TCPStore

    class TCPStore(_LibuvTCPStore):  # type: ignore[misc,valid-type]
        def __init__(self, *args, **kwargs):
            kwargs.setdefault("use_libuv", False)
            super().__init__(*args, **kwargs)

    for _module in list(_sys.modules.values()):
        inside = getattr(_module, "__name__", "").startswith("torch.distributed")
        if inside and getattr(_module, "TCPStore", None) is _LibuvTCPStore:
            _module.TCPStore = TCPStore
