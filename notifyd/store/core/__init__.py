"""The store's core: every transaction script written once, against a small transaction contract
(`tx.Tx`) and a dialect's table of named queries (`sql.Queries`). A backend (store/sqlite/)
brings the SQL, the migrations and the lifecycle; `CoreStore` is the `Store` over any backend."""
