"""python3 -m dtr_torch SCRIPT [ARGS...]: runs an unmodified PyTorch script with every tensor that torch's
creation functions make checkpointed (dtr_torch.wrap_factories), in dtr's default runtime (DTR_MEMORY_BUDGET,
DTR_HEURISTIC, ...). DTR_TORCH_LIBRARY names the built libdtr_torch.so."""
import runpy
import sys

import dtr_torch


def main(argv):
    if len(argv) < 1 or argv[0] in ("-h", "--help"):
        print(__doc__.strip(), file=sys.stderr)
        return 2 if len(argv) < 1 else 0
    dtr_torch.wrap_factories(True)
    sys.argv = list(argv)
    runpy.run_path(argv[0], run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
