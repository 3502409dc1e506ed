"""What a cluster costs to buy and to run: power per component, energy per iteration and per training run,
capital from a price table (docs: the book *Deep Learning for Network Engineers*, Chapter 8)."""

from .energy import EnergyCost, energy

__all__ = ["EnergyCost", "energy"]
