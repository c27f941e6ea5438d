-- What planning said of a step's time (quiet hours moved it), kept apart from `note`, which a pull
-- forward rewrites: the timeline shows the plan as it was made, from a column rather than by
-- reading the note's words.
ALTER TABLE steps ADD COLUMN plan_note TEXT;
UPDATE steps SET plan_note = note WHERE note IS NOT NULL AND note NOT LIKE 'pulled forward%';
