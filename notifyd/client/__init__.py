"""A small typed client of notifyd's HTTP API, for a producer's backend, a script or a test.

`Client` (sync.py) needs only the standard library; `AsyncClient` (aio.py, imported from
there) runs on aiohttp. Both send each call as calls.py writes it once, and raise one error,
`NotifydError`, with the API's code, message and field. `sign_user_token` makes a user token
with the tenant's key, without a call. The client imports nothing of the daemon's: only the
pure token rules (domain/signed.py) and its own modules.
"""

from notifyd.client.calls import Event, NotifydError, sign_user_token
from notifyd.client.sync import Client

__all__ = ["Client", "Event", "NotifydError", "sign_user_token"]
