"""The classic Redis application components as a reusable Django app."""

# The release (pyproject.toml reads it); CHANGELOG.md says what each one changed.
__version__ = "0.2.0"
