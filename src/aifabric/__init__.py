"""aifabric: what distributed deep-learning training does to an AI data-center network,
and what the network does to training."""

__version__ = "0.1.0"
