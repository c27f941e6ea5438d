-- version = 6
TABLE api_keys (
    key_hash text NOT NULL
    name text NOT NULL
    tenant text NOT NULL
    kinds text NOT NULL
    created_at bigint NOT NULL
    revoked_at bigint
    scopes text NOT NULL DEFAULT 'post,read,resolve,users'::text
    last_used_at bigint
)
TABLE attempts (
    notification_id text NOT NULL
    step_no integer NOT NULL
    attempt_no integer NOT NULL
    claim_token text NOT NULL
    started_at bigint NOT NULL
    ended_at bigint
    outcome text
    reason text
    provider_ref text
)
TABLE console_sign_outs (
    nonce text NOT NULL
    until bigint NOT NULL
)
TABLE devices (
    tenant text NOT NULL
    user_id text NOT NULL
    device_id text NOT NULL
    kind text NOT NULL
    endpoint text NOT NULL
    p256dh text
    auth text
    state text NOT NULL
    reason text
    created_at bigint NOT NULL
    updated_at bigint NOT NULL
)
TABLE digest_items (
    notification_id text NOT NULL
    step_no integer NOT NULL
    tenant text NOT NULL
    user_id text NOT NULL
    digest_kind text NOT NULL
    window_end bigint NOT NULL
    held_at bigint NOT NULL
    digest_id text
)
TABLE erasures (
    tenant text NOT NULL
    user_id text NOT NULL
    erased_at bigint NOT NULL
)
TABLE events (
    id bigint NOT NULL DEFAULT nextval('events_id_seq'::regclass)
    notification_id text NOT NULL
    step_no integer NOT NULL
    at bigint NOT NULL
    what text NOT NULL
)
TABLE fanout_events (
    seq bigint NOT NULL DEFAULT nextval('fanout_events_seq_seq'::regclass)
    tenant text NOT NULL
    event_id text NOT NULL
    type text NOT NULL
    subject text
    params text NOT NULL
    kinds text NOT NULL
    request_hash text NOT NULL
    key_name text NOT NULL
    audience text NOT NULL
    topic text
    version bigint
    cutoff bigint
    users text
    size bigint NOT NULL
    cursor text NOT NULL
    routed bigint NOT NULL
    accepted_at bigint NOT NULL
    routed_at bigint
    send_at bigint
)
TABLE inbox_badges (
    tenant text NOT NULL
    user_id text NOT NULL
    unread bigint NOT NULL
)
TABLE inbox_items (
    seq bigint NOT NULL DEFAULT nextval('inbox_items_seq_seq'::regclass)
    tenant text NOT NULL
    user_id text NOT NULL
    notification_id text NOT NULL
    kind text NOT NULL
    title text NOT NULL
    body text
    created_at bigint NOT NULL
    read_at bigint
    archived_at bigint
)
TABLE notifications (
    id text NOT NULL
    tenant text NOT NULL
    user_id text NOT NULL
    kind text NOT NULL
    dedup_key text
    request_hash text NOT NULL
    params text NOT NULL
    key_name text NOT NULL
    created_at bigint NOT NULL
    expires_at bigint NOT NULL
    resolved_at bigint
    resolution text
    resolved_by text
    pruned_at bigint
    outcome text
    send_at bigint
    event_id text
    sending integer NOT NULL DEFAULT 0
)
TABLE notifyd_migrations (
    version integer NOT NULL
    applied_at timestamp with time zone NOT NULL DEFAULT now()
)
TABLE probe (
    id integer NOT NULL
    at bigint NOT NULL
)
TABLE rate_budgets (
    channel text NOT NULL
    tokens double precision NOT NULL
    at bigint NOT NULL
)
TABLE receipts (
    provider text NOT NULL
    event_id text NOT NULL
    event text NOT NULL
    occurred_at bigint
    received_at bigint NOT NULL
    provider_ref text
    step_key text
    message_id text
    address text
    channel_type text
    detail text
    notification_id text
    step_no integer
    tenant text
)
TABLE recipients (
    tenant text NOT NULL
    user_id text NOT NULL
    timezone text
    locale text
    quiet_start text
    quiet_end text
    contacts text NOT NULL
    updated_at bigint NOT NULL
    preferences text
    pref_version bigint NOT NULL DEFAULT 0
    created_at bigint NOT NULL DEFAULT 0
)
TABLE signing_keys (
    name text NOT NULL
    secret bytea NOT NULL
    created_at bigint NOT NULL
    previous bytea
    previous_until bigint
)
TABLE steps (
    notification_id text NOT NULL
    step_no integer NOT NULL
    channel text NOT NULL
    lane text NOT NULL
    send_after bigint NOT NULL
    state text NOT NULL
    attempts integer NOT NULL DEFAULT 0
    reason text
    note text
    provider_ref text
    destination text
    payload text
    claim_token text
    lease_until bigint
    updated_at bigint NOT NULL
    retry_base integer NOT NULL DEFAULT 0
    planned_at bigint
    cause text
    template text
    evidence text
    pref_version bigint
    plan_note text
)
TABLE suppressions (
    tenant text NOT NULL
    channel_type text NOT NULL
    address text NOT NULL
    reason text NOT NULL
    source text NOT NULL
    evidence text
    created_at bigint NOT NULL
)
TABLE tenants (
    name text NOT NULL
    created_at bigint NOT NULL
)
TABLE topic_members (
    tenant text NOT NULL
    topic text NOT NULL
    user_id text NOT NULL
    added_version bigint NOT NULL
    added_at bigint NOT NULL
    removed_version bigint
    removed_at bigint
)
TABLE topics (
    tenant text NOT NULL
    name text NOT NULL
    version bigint NOT NULL
    members bigint NOT NULL
    self_service boolean NOT NULL
    created_at bigint NOT NULL
    updated_at bigint NOT NULL
    deleted_at bigint
)
TABLE webhook_tokens (
    provider text NOT NULL
    token text NOT NULL
    seen_at bigint NOT NULL
    until bigint NOT NULL
)
CREATE UNIQUE INDEX api_keys_name_key ON api_keys USING btree (name);
CREATE UNIQUE INDEX api_keys_pkey ON api_keys USING btree (key_hash);
CREATE UNIQUE INDEX attempts_pkey ON attempts USING btree (notification_id, step_no, attempt_no);
CREATE UNIQUE INDEX console_sign_outs_pkey ON console_sign_outs USING btree (nonce);
CREATE INDEX console_sign_outs_until ON console_sign_outs USING btree (until);
CREATE UNIQUE INDEX devices_pkey ON devices USING btree (tenant, user_id, device_id);
CREATE INDEX digest_items_due ON digest_items USING btree (window_end) WHERE (digest_id IS NULL);
CREATE UNIQUE INDEX digest_items_pkey ON digest_items USING btree (notification_id, step_no);
CREATE UNIQUE INDEX erasures_pkey ON erasures USING btree (tenant, user_id);
CREATE INDEX events_notification ON events USING btree (notification_id, at);
CREATE UNIQUE INDEX events_pkey ON events USING btree (id);
CREATE UNIQUE INDEX fanout_events_id ON fanout_events USING btree (tenant, event_id);
CREATE INDEX fanout_events_pins ON fanout_events USING btree (tenant, topic, version) WHERE (routed_at IS NULL);
CREATE UNIQUE INDEX fanout_events_pkey ON fanout_events USING btree (seq);
CREATE INDEX fanout_events_routing ON fanout_events USING btree (seq) WHERE (routed_at IS NULL);
CREATE UNIQUE INDEX inbox_badges_pkey ON inbox_badges USING btree (tenant, user_id);
CREATE INDEX inbox_done ON inbox_items USING btree (COALESCE(read_at, archived_at)) WHERE ((read_at IS NOT NULL) OR (archived_at IS NOT NULL));
CREATE UNIQUE INDEX inbox_items_notification_id_key ON inbox_items USING btree (notification_id);
CREATE UNIQUE INDEX inbox_items_pkey ON inbox_items USING btree (seq);
CREATE INDEX inbox_page ON inbox_items USING btree (tenant, user_id, created_at DESC, notification_id DESC);
CREATE INDEX inbox_since ON inbox_items USING btree (tenant, user_id, seq);
CREATE INDEX inbox_unread ON inbox_items USING btree (tenant, user_id) WHERE ((read_at IS NULL) AND (archived_at IS NULL));
CREATE UNIQUE INDEX notifications_dedup ON notifications USING btree (tenant, user_id, dedup_key);
CREATE INDEX notifications_event ON notifications USING btree (tenant, event_id, user_id) WHERE (event_id IS NOT NULL);
CREATE INDEX notifications_live ON notifications USING btree (id) WHERE (pruned_at IS NULL);
CREATE UNIQUE INDEX notifications_pkey ON notifications USING btree (id);
CREATE UNIQUE INDEX notifyd_migrations_pkey ON notifyd_migrations USING btree (version);
CREATE UNIQUE INDEX probe_pkey ON probe USING btree (id);
CREATE UNIQUE INDEX rate_budgets_pkey ON rate_budgets USING btree (channel);
CREATE INDEX receipts_orphans ON receipts USING btree (provider_ref) WHERE (notification_id IS NULL);
CREATE UNIQUE INDEX receipts_pkey ON receipts USING btree (provider, event_id);
CREATE INDEX receipts_received ON receipts USING btree (received_at);
CREATE INDEX receipts_step ON receipts USING btree (notification_id, step_no);
CREATE UNIQUE INDEX recipients_pkey ON recipients USING btree (tenant, user_id);
CREATE UNIQUE INDEX signing_keys_pkey ON signing_keys USING btree (name);
CREATE INDEX steps_dead ON steps USING btree (updated_at) WHERE (state = 'dead'::text);
CREATE INDEX steps_due ON steps USING btree (channel, lane, send_after, notification_id, step_no) WHERE (state = ANY (ARRAY['pending'::text, 'unknown'::text]));
CREATE INDEX steps_inflight ON steps USING btree (lease_until) WHERE (state = 'sending'::text);
CREATE UNIQUE INDEX steps_pkey ON steps USING btree (notification_id, step_no);
CREATE INDEX steps_provider_ref ON steps USING btree (provider_ref) WHERE (provider_ref IS NOT NULL);
CREATE INDEX suppressions_address ON suppressions USING btree (address);
CREATE UNIQUE INDEX suppressions_pkey ON suppressions USING btree (tenant, channel_type, address);
CREATE UNIQUE INDEX tenants_pkey ON tenants USING btree (name);
CREATE INDEX topic_members_closed ON topic_members USING btree (removed_at) WHERE (removed_version IS NOT NULL);
CREATE UNIQUE INDEX topic_members_open ON topic_members USING btree (tenant, topic, user_id) WHERE (removed_version IS NULL);
CREATE UNIQUE INDEX topic_members_pkey ON topic_members USING btree (tenant, topic, user_id, added_version);
CREATE INDEX topic_members_user ON topic_members USING btree (tenant, user_id) WHERE (removed_version IS NULL);
CREATE UNIQUE INDEX topics_pkey ON topics USING btree (tenant, name);
CREATE UNIQUE INDEX webhook_tokens_pkey ON webhook_tokens USING btree (provider, token);
CREATE INDEX webhook_tokens_until ON webhook_tokens USING btree (provider, until);
CREATE TRIGGER steps_sending AFTER UPDATE OF state ON steps FOR EACH ROW WHEN (((old.state = 'sending'::text) IS DISTINCT FROM (new.state = 'sending'::text))) EXECUTE FUNCTION notifyd_steps_sending();
