"""``python -m rocm_dl_guide``: the guide's command line."""

import gc
import sys

from rocm_dl_guide.cli import main

code = main()
# Everything the command wrote is flushed and closed by now. Freezing the objects
# still alive keeps the interpreter's final garbage collections from walking the
# millions that torch, torchvision or TensorFlow created: 0.6 s off every exit
# here, which every torchrun worker and every command a page runs pays.
gc.freeze()
sys.exit(code)
