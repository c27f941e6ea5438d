"""The API's shape in one place: one msgspec Struct per request and answer body, each field
with its constraints beside it. decode.py decodes a body straight into its Struct (in C) and
tells a refusal in the API's error codes, naming the field, in words made from what the field
declares. Pure: it loads nothing of the daemon's.
"""
