"""The core every chapter builds on: run profiles, devices, files, data sets and
their fixtures, the case-study registry, runs and provenance, preemption, and
small helpers (tables, plots, timing, progress bars, ports, messages). It
imports nothing above it."""
