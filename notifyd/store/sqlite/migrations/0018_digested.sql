-- A held step its digest carried is `digested` (a digest now marks it so as it carries it), dated
-- when its digest was made; those carried before this say so too.
UPDATE steps SET state = 'digested', updated_at = coalesce((
    SELECT n.created_at FROM digest_items d JOIN notifications n ON n.id = d.digest_id
    WHERE d.notification_id = steps.notification_id AND d.step_no = steps.step_no), updated_at)
WHERE state = 'held' AND (notification_id, step_no) IN (
    SELECT notification_id, step_no FROM digest_items WHERE digest_id IS NOT NULL);
