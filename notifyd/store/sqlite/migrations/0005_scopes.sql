-- What a key may do: post, read, resolve, users (comma-separated). Existing keys keep all four.
ALTER TABLE api_keys ADD COLUMN scopes TEXT NOT NULL DEFAULT 'post,read,resolve,users';
