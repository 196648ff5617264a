"""Drivers: one module per domain that builds a space and a runner and runs a Campaign.

- :mod:`.replay`: a recorded Kernel Tuner space, answered from the cache;
- :mod:`.kernel`: a kernel template compiled and timed on this CPU (gcc) or GPU (nvcc);
- :mod:`.graph`: graph substitutions of an ONNX model, op costs measured by onnxruntime or torch;
- :mod:`.parallel`: parallelization strategies of a model on a cluster, timed by the simulator.
"""
