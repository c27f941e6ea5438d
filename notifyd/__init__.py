"""notifyd: turns a product event into messages for a person, and knows when to stop."""

__version__ = "0.1.0"
