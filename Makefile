# The two commands of the README's Quick start are `make book` and `make test`.
# Each creates its own virtual environment on first use and reinstalls it when
# the requirements change.
#
# ROCm machines: run `make book-rocm` / `make test-rocm` inside the rocm/pytorch
# container. They build a venv with --system-site-packages on top of the
# container's own ROCm PyTorch (never replaced) and use the `gpu` profile.

PYTHON ?= python3
VENV ?= .venv
REQUIREMENTS ?= requirements.txt
VENV_FLAGS ?=
# ROCm targets: make the container's own packages (its ROCm PyTorch) visible in
# the new venv, whether they sit in the system Python or in a venv of the image
# (some rocm/pytorch images keep PyTorch in /opt/venv). A .pth file appends the
# parent interpreter's site-packages after the venv's own.
INHERIT_SITE ?=
# Packages an environment removes after installing (none today). triton stays:
# the kernels chapter runs it (its interpreter on a CPU). It used to be removed
# because importing it after tensorflow crashed the process; TF_GUARD below fixes
# that at its cause (see README, "Known traps").
REMOVE_AFTER_INSTALL ?=
# TensorFlow 2.20/2.21 wheels ship tensorflow/python/pywrap_dlopen_global_flags.py,
# so TF loads its libraries RTLD_GLOBAL and exports its own LLVM to the process;
# triton's libtriton.so, loaded later, binds to that LLVM and segfaults
# (tensorflow/tensorflow#124205, fixed upstream by #124230, not yet released).
# This line, a .pth file in every venv, makes the helper unimportable, so TF loads
# RTLD_LOCAL as the fixed wheels do. It imports nothing and is a no-op once TF
# ships without the helper. tests/test_device.py checks that it works.
TF_GUARD_PTH := zz-tensorflow-rtld-local.pth
TF_GUARD := import sys; sys.modules.setdefault("tensorflow.python.pywrap_dlopen_global_flags", None)
BOOK_FLAGS ?= -W -n --keep-going
# `make test` installs Chromium first (`make browser`) and runs the browser test.
# The ROCm container targets skip both (Ubuntu's chromium is a snap stub there).
BROWSER_TESTS ?= 1

BIN := $(CURDIR)/$(VENV)/bin
STAMP := $(VENV)/.installed-$(notdir $(REQUIREMENTS))
# Recipes that run the book or tests put the venv first on PATH, so that Jupyter
# kernels and subprocesses use the venv's python.
RUN := PATH="$(BIN):$$PATH"

.PHONY: book book-slow test test-slow check book-rocm test-rocm env lint clean lock browser linkcheck check-sources gpu-check gpu-check-venv wheelhouse

env: $(STAMP)

$(STAMP): $(REQUIREMENTS) requirements-tools.txt pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else "Python 3.10 or newer is needed (3.11 recommended); set PYTHON=...")'
	$(PYTHON) -m venv $(VENV_FLAGS) $(VENV)
	@if [ -n "$(INHERIT_SITE)" ]; then \
	  $(PYTHON) -c 'import site; print("\n".join(site.getsitepackages()))' \
	    > "$$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/zz-parent-site.pth"; \
	fi
	$(BIN)/python -m pip install --quiet --upgrade pip "setuptools>=77"
	$(BIN)/python -m pip install --quiet -r $(REQUIREMENTS)
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	@if [ -n "$(REMOVE_AFTER_INSTALL)" ]; then $(BIN)/python -m pip uninstall --quiet -y $(REMOVE_AFTER_INSTALL) || true; fi
	@printf '%s\n' '$(TF_GUARD)' \
	  > "$$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/$(TF_GUARD_PTH)"
	@touch $@

book: $(STAMP)
	$(RUN) $(BIN)/jupyter-book build . $(BOOK_FLAGS)
	@echo "The book is in _build/html/index.html"

# Both run the tests on every core (pytest-xdist): the book is built by one worker
# while the others run the rest (tests/conftest.py groups them). XDIST= runs serially.
# A crashed worker ends the run (--max-worker-restart=0): with --dist loadgroup,
# pytest-xdist 3.8 re-queues a crashed worker's finished groups and the
# replacement can wait forever (pytest-dev/pytest-xdist#1378, open).
XDIST ?= -n auto --dist loadgroup --max-worker-restart=0
test: $(STAMP) $(if $(filter 1,$(BROWSER_TESTS)),browser)
	$(RUN) $(BIN)/python -m pytest $(XDIST) $(PYTEST_ARGS)

# `make test` as on the CPU that builds the public site, from a faster machine.
# GitHub's hosted runners give 2 cores without AVX-512; this gives the suite's
# two workers (as CI runs them) one core between them (taskset -c $(SLOW_CPUS))
# and caps the instruction set of PyTorch (and Inductor), oneDNN, MKL, OpenBLAS
# and XLA at AVX2; rocm_dl_guide.core.device reads ATEN_CPU_CAPABILITY too, so
# the package's own choices follow. Libraries that ask the CPUID instruction
# themselves (ONNX Runtime's MLAS, NumPy, bitsandbytes) are masked by
# tests/slowcpu/avx2_only.c, preloaded into every python process, where the
# CPU and kernel offer CPUID faulting (`cpuid_fault` in /proc/cpuinfo) and a C
# compiler is at hand; elsewhere the recipe says what stays unmasked. Each
# test's hard limit is its budget x 3 x the speed factor the session measures
# (tests/conftest.py; shown in the header). `make book-slow` builds the book
# with the same instruction set on every core.
SLOW_CPUS ?= 0
SLOW_ISA ?= ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2 MKL_ENABLE_INSTRUCTIONS=AVX2 \
  OPENBLAS_CORETYPE=Haswell XLA_FLAGS=--xla_cpu_max_isa=AVX2
SLOW_MASK := $(CURDIR)/$(VENV)/lib/avx2_only.so
# Shell prefix: builds the CPUID mask if it can, and sets `preload` to it (or to nothing).
SLOW_PRELOAD = preload=; \
  if grep -qw cpuid_fault /proc/cpuinfo 2>/dev/null && command -v $(CC) >/dev/null 2>&1; then \
    $(CC) -O2 -shared -fPIC -o $(SLOW_MASK) tests/slowcpu/avx2_only.c -ldl && preload=$(SLOW_MASK); \
  else \
    echo "No CPUID faulting here (or no C compiler): ONNX Runtime, NumPy and bitsandbytes still use every instruction this CPU has."; \
  fi;
# Inductor's on-disk cache does not key its kernels on ATEN_CPU_CAPABILITY: a
# kernel compiled uncapped and reused under the cap computes wrong values or
# corrupts the heap (PyTorch 2.14, measured here). Capped runs keep their own.
SLOW_INDUCTOR_CACHE ?= $${TMPDIR:-/tmp}/torchinductor_$$(id -un)_avx2
SLOW_RUN = $(RUN) $(SLOW_ISA) TORCHINDUCTOR_CACHE_DIR="$(SLOW_INDUCTOR_CACHE)" \
  LD_PRELOAD="$$preload$${LD_PRELOAD:+ $$LD_PRELOAD}"
test-slow: $(STAMP) $(if $(filter 1,$(BROWSER_TESTS)),browser)
	@command -v taskset >/dev/null 2>&1 || { echo "make test-slow needs taskset (util-linux)"; exit 1; }
	@$(SLOW_PRELOAD) set -x; \
	$(SLOW_RUN) taskset -c $(SLOW_CPUS) $(BIN)/python -m pytest -n 2 --dist loadgroup --max-worker-restart=0 $(PYTEST_ARGS)

book-slow: $(STAMP)
	@$(SLOW_PRELOAD) set -x; \
	$(SLOW_RUN) $(BIN)/jupyter-book build . $(BOOK_FLAGS)

# The fast loop to run after every change: every test except the whole-book
# build, the notebook runs and the browser test (pytest markers; see pyproject.toml).
# Needs no Chromium. `make test` remains the full suite and what CI runs.
CHECK_MARKERS := not book and not notebook and not browser
check: $(STAMP)
	$(RUN) $(BIN)/python -m pytest $(XDIST) -m "$(CHECK_MARKERS)" $(PYTEST_ARGS)

# Headless Chromium for the browser test (tests/test_browser.py), from Debian's
# packages; Playwright (pinned in requirements) drives it. Needs root or sudo.
browser:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	  command -v google-chrome >/dev/null 2>&1 || { \
	  echo "Installing Chromium (Debian package) for the browser test ..."; \
	  SUDO=$$([ "$$(id -u)" = 0 ] || echo sudo); \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq chromium; }

# External links of the whole book (needs network; not part of `make test`).
linkcheck: $(STAMP)
	$(RUN) $(BIN)/jupyter-book build . --builder linkcheck

# The compatibility data's sources (needs network; not part of `make test`):
# do the pages code/rocm_dl_guide/data/compatibility.json cites still hold the
# facts it recorded, and has AMD or PyTorch published anything newer than it
# knows? Exit 0 current, 1 stale, 3 offline. The check uses only the standard
# library, so it runs on the source tree with the venv's python when there is
# one (else $(PYTHON)) and needs no installed environment.
CHECK_SOURCES_PYTHON = $(if $(wildcard $(BIN)/python),$(BIN)/python,$(PYTHON))
check-sources:
	PYTHONPATH="$(CURDIR)/code" $(CHECK_SOURCES_PYTHON) -m rocm_dl_guide check-sources $(CHECK_SOURCES_ARGS)

book-rocm:
	$(MAKE) book VENV=.venv-rocm REQUIREMENTS=requirements-rocm.txt VENV_FLAGS=--system-site-packages INHERIT_SITE=1 REMOVE_AFTER_INSTALL= ROCM_DL_GUIDE_PROFILE=$${ROCM_DL_GUIDE_PROFILE:-gpu}

test-rocm:
	$(MAKE) test VENV=.venv-rocm REQUIREMENTS=requirements-rocm.txt VENV_FLAGS=--system-site-packages INHERIT_SITE=1 REMOVE_AFTER_INSTALL= ROCM_DL_GUIDE_PROFILE=$${ROCM_DL_GUIDE_PROFILE:-gpu} BROWSER_TESTS=0 PYTEST_ARGS='-m "not browser"' 

# `make gpu-check`: the book's PyTorch path on this machine's GPU, offline, in one
# command (python -m rocm_dl_guide selfcheck --gpu; see code/rocm_dl_guide/selfcheck/).
# It needs only a Python that has PyTorch and torchvision (AMD's rocm/pytorch or
# NVIDIA's PyTorch container): the rest comes from $(WHEELHOUSE)/ when it is there
# (no network; `make wheelhouse` prepares it on a machine with the package
# registry), else from the registry. It refuses at once where PyTorch sees no GPU
# (rocm_dl_guide.core.preflight: the standard library and PyTorch only, so a plain Python says so too),
# and writes its report to $(GPU_CHECK_REPORT)/. GPU_CHECK_FLAGS=--record writes
# the verification record the book shows when every check passed. To carry the
# wheels to a machine whose Python you know, build them for it alone (under 60 MB):
# make wheelhouse WHEEL_PYTHONS=3.12
WHEELHOUSE ?= wheelhouse
WHEEL_PYTHONS ?= 3.10 3.11 3.12
WHEEL_PLATFORMS ?= manylinux_2_28_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64
GPU_CHECK_VENV ?= .venv-gpu-check
GPU_CHECK_REPORT ?= gpu-check-report
GPU_CHECK_FLAGS ?=
GPU_CHECK_RUN := PYTHONPATH="$(CURDIR)/code" ROCM_DL_GUIDE_DATA_SOURCE=fixtures
gpu-check:
	@$(GPU_CHECK_RUN) $(PYTHON) -m rocm_dl_guide.core.preflight --gpu
	@$(MAKE) --no-print-directory gpu-check-venv
	@if [ -d "$(WHEELHOUSE)" ]; then \
	  echo "Installing the selfcheck's requirements from $(WHEELHOUSE)/ (offline) ..."; \
	  $(GPU_CHECK_VENV)/bin/python -m pip install --quiet --no-index --find-links "$(WHEELHOUSE)" -r requirements-gpu-check.txt; \
	else \
	  echo "No $(WHEELHOUSE)/ here: installing the selfcheck's requirements from the package registry ..."; \
	  $(GPU_CHECK_VENV)/bin/python -m pip install --quiet -r requirements-gpu-check.txt; \
	fi
	$(GPU_CHECK_RUN) $(GPU_CHECK_VENV)/bin/python -m rocm_dl_guide selfcheck --gpu --report "$(GPU_CHECK_REPORT)" $(GPU_CHECK_FLAGS)

# The selfcheck's virtual environment on top of $(PYTHON)'s PyTorch. Where
# $(PYTHON) is itself a virtual environment (as in NVIDIA's and some AMD
# images), --system-site-packages reaches only the base interpreter's packages,
# not its PyTorch: then the venv also reads $(PYTHON)'s site-packages.
gpu-check-venv:
	$(PYTHON) -m venv --system-site-packages $(GPU_CHECK_VENV)
	@if ! $(GPU_CHECK_VENV)/bin/python -c 'import torch' 2>/dev/null; then \
	  echo "$(GPU_CHECK_VENV) reads $(PYTHON)'s site-packages (a virtual environment's PyTorch)"; \
	  $(PYTHON) -c 'import site; print("\n".join(site.getsitepackages()))' \
	    > "$$($(GPU_CHECK_VENV)/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/zz-parent-site.pth"; \
	fi

# Wheels of requirements-gpu-check.txt for CPython $(WHEEL_PYTHONS) on x86-64 Linux
# (binary wheels only, no dependencies resolved beyond the list), into $(WHEELHOUSE)/.
# Needs the package registry; carry the folder to an offline GPU machine.
wheelhouse:
	rm -rf "$(WHEELHOUSE).partial" && mkdir -p "$(WHEELHOUSE).partial"
	@for v in $(WHEEL_PYTHONS); do \
	  echo "wheels for CPython $$v ..."; \
	  $(PYTHON) -m pip download --quiet --disable-pip-version-check --only-binary=:all: --no-deps \
	    --python-version $$v --implementation cp $(foreach p,$(WHEEL_PLATFORMS),--platform $(p)) \
	    -r requirements-gpu-check.txt -d "$(WHEELHOUSE).partial" || exit 1; \
	done
	rm -rf "$(WHEELHOUSE)" && mv "$(WHEELHOUSE).partial" "$(WHEELHOUSE)"
	@echo "$(WHEELHOUSE)/: $$(ls "$(WHEELHOUSE)" | wc -l) wheels, $$(du -sh "$(WHEELHOUSE)" | cut -f1)"

lint: $(STAMP)
	$(BIN)/ruff check code tests _ext

# Regenerate the full lock of the CPU default environment from requirements-cpu.in.
lock:
	rm -rf .venv-lock && $(PYTHON) -m venv .venv-lock
	.venv-lock/bin/python -m pip install --quiet -r requirements-cpu.in
	@if [ -n "$(REMOVE_AFTER_INSTALL)" ]; then .venv-lock/bin/python -m pip uninstall --quiet -y $(REMOVE_AFTER_INSTALL); fi
	( echo "# The CPU default environment, fully pinned. Generated by 'make lock' from"; \
	  echo "# requirements-cpu.in; edit that file, not this one."; \
	  .venv-lock/bin/python -m pip freeze --exclude-editable ) > requirements.txt
	rm -rf .venv-lock

clean:
	rm -rf _build .jupyter_cache
