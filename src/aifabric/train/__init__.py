"""Real training on torch.distributed (seeds' Ch. 14): the zoo's small models in data / tensor / pipeline
parallelism, every collective and send/recv traced, and the trace replayed on a simulated fabric.

Modules that need PyTorch import it themselves; `layout`, `tracer` and `replay` do not, so traces can be
read and replayed without it. See docs/train.md.
"""
