"""The optimisation chapter: ONNX export and runtimes (:mod:`.inference`),
benchmarks, tuning, reduced precision and int8, profiling, and the C++
example."""
