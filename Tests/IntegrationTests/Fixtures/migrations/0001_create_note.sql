-- A table of notes.
CREATE TABLE note (
    id    bigint PRIMARY KEY,
    body  text   NOT NULL
);
