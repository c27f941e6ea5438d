"""The operator console (/console): server-rendered pages over the same calls as the API and the
command line, for the tenant its operator signed in to."""
