"""The API's shape in one place: one msgspec Struct per request and answer body. The handlers
decode and check each request with its Struct (decode.py: in C, refusals told in the API's error
codes), the views answer with theirs, the OpenAPI document is built from their JSON Schema
(http/openapi.py), and the Python client's types are made from them (typed.py). Pure: it loads
nothing of the daemon's.
"""
