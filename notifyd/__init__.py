"""notifyd: turns a product event into messages for a person, and knows when to stop."""

# The one place the version is written: pyproject.toml reads it for the distribution's metadata,
# and `notifyd --version` prints that.
__version__ = "0.1.0"
