from .feedforward import FeedForward

__all__ = ["FeedForward"]
