-- Find notes by author.
CREATE INDEX note_author ON note (author);
