"""Drivers: one module per domain that builds a space and a runner and runs a Campaign.

- :mod:`.replay`: a recorded Kernel Tuner space, answered from the cache;
- :mod:`.kernel`: a kernel template compiled and timed on this CPU (gcc) or GPU (nvcc);
- :mod:`.kernel_tuner`: ``tune_kernel``, the user's own C and CUDA kernels through Kernel Tuner's interface;
- :mod:`.function`: ``minimize``, the user's own Python function;
- :mod:`.command`: ``tune_command``, the user's own program, its cost read from its output;
- :mod:`.graph`: graph substitutions of an ONNX model, op costs measured by onnxruntime or torch (with
  :mod:`.graph_peers`, the optimizers users pick instead, and :mod:`.graph_store`, what a graph campaign keeps);
- :mod:`.parallel`: parallelization strategies of a model on a cluster, timed by the simulator;
- :mod:`.scale`: a campaign made again from its recipe, many campaigns at once, a campaign as a Ray task.
"""
