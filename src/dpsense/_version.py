"""The package version, in one place (imported by the package root and by release records)."""

__version__ = "0.1.0"
