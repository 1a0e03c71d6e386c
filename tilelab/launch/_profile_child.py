"""The process Nsight Compute profiles: ``python -m tilelab.launch._profile_child SPEC_DIR``.

Rebuilds the kernel from the prim_func tilelab saved (TVM's own JSON serialisation), compiles it
as the notebook did, loads the saved inputs onto the GPU and launches a few times.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(folder: str) -> int:
    spec_dir = Path(folder)
    spec = json.loads((spec_dir / "spec.json").read_text())
    import torch

    from tilelab import _tilelang
    from tilelab.launch._run import call_kernel, prepare_kernel

    func = _tilelang.kernel_ir_from_text((spec_dir / "prim_func.json").read_text())
    prepared = prepare_kernel(func, backend=spec["backend"], out_idx=spec["out_idx"],
                              pass_configs=spec["pass_configs"] or None)
    args = torch.load(spec_dir / "args.pt")
    args = [a.cuda() if hasattr(a, "cuda") else a for a in args]
    for _ in range(int(spec["launches"])):
        call_kernel(prepared, args)
    torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
