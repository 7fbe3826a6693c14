"""The classic Redis application components as a reusable Django app."""

__version__ = "0.1.0"
