-- RedDot schema, part 26: push badges (issue 28). `reddot push run` follows the change feed and
-- keeps each registered device's app-icon number equal to its user's root total. New tables
-- only: online.

-- Devices, registered by their user (PUT /v1/users/{user}/devices/{device}). `wanted_*` is the
-- latest root total the feed carried for the user (and its own version), `sent_*` the last one
-- the provider accepted: a device is due while wanted_version > sent_version, so a burst of
-- versions sends the latest number once. A try holds the device until `next_attempt_at`.
CREATE TABLE push_device (
    user_id          text        NOT NULL,
    device_id        text        NOT NULL CHECK (device_id ~ '^[A-Za-z0-9_.:-]{1,128}$'),
    platform         text        NOT NULL CHECK (platform IN ('apns', 'fcm')),
    token            text        NOT NULL CHECK (token ~ '^[A-Za-z0-9_:.-]+$' AND length(token) <= 4096),
    app_id           text        NOT NULL CHECK (app_id ~ '^[A-Za-z0-9_.-]{1,255}$'),
    wanted_badge     bigint      NOT NULL DEFAULT 0 CHECK (wanted_badge >= 0),
    wanted_version   bigint      NOT NULL DEFAULT 0 CHECK (wanted_version >= 0),
    sent_badge       bigint,
    sent_version     bigint      NOT NULL DEFAULT 0 CHECK (sent_version >= 0),
    attempts         integer     NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    next_attempt_at  timestamptz NOT NULL DEFAULT now(),
    last_error       text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (user_id, device_id)
);
CREATE INDEX push_device_due ON push_device (next_attempt_at) WHERE wanted_version > sent_version;

-- Per user: the last feed version read and its root total (a record at or below it is
-- dropped; a device registered later starts from it).
CREATE TABLE push_user (
    user_id      text   PRIMARY KEY,
    own_version  bigint NOT NULL CHECK (own_version >= 0),
    root_count   bigint NOT NULL CHECK (root_count >= 0)
);
