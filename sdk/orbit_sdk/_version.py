"""The SDK's version, in its own module so any module can import it without cycles."""

__version__ = "0.1.0"
