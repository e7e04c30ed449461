"""Run by every Jupyter kernel of the book build, at its start (``PYTHONSTARTUP``,
which IPython's kernels honour; ``guide_build`` sets it for the build).

When a page is done, the build shuts its kernel down and waits for the process
to end. A kernel that imported PyTorch, torchvision or TensorFlow then spends
about a second in the interpreter's final garbage collections, walking
millions of objects that are about to be freed anyway. Freezing them at exit
(after every other exit handler: the first one registered runs last) takes
that second off every page. It changes nothing a page computes or shows.
"""

import atexit
import gc

atexit.register(gc.freeze)
