"""The PostgreSQL dialect: one database shared by several notifyd processes on several hosts."""
