-- An event may start its notifications' ladders later (send_at): each one it routes starts then.
ALTER TABLE fanout_events ADD COLUMN send_at INTEGER;
