-- Who wrote each note.
ALTER TABLE note ADD COLUMN author text;
