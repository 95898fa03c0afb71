// SPDX-License-Identifier: Apache-2.0
import AFMStore

/// The history database's migrations. Append new versions; never edit a released one.
public enum HistorySchema {
    public static let migrations: [Migration] = [
        Migration(
            version: 1,
            name: "create_history",
            sql: """
                CREATE TABLE conversations(
                    id TEXT PRIMARY KEY,
                    title TEXT NOT NULL,
                    created_at INTEGER NOT NULL,
                    updated_at INTEGER NOT NULL,
                    next_sequence INTEGER NOT NULL DEFAULT 0,
                    message_count INTEGER NOT NULL DEFAULT 0,
                    preview TEXT NOT NULL DEFAULT '',
                    draft TEXT NOT NULL DEFAULT ''
                );
                CREATE INDEX conversations_by_update ON conversations(updated_at DESC, id DESC);
                CREATE TABLE messages(
                    id TEXT PRIMARY KEY,
                    conversation_id TEXT NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
                    sequence INTEGER NOT NULL,
                    author TEXT NOT NULL CHECK (author IN ('user', 'assistant')),
                    state TEXT NOT NULL CHECK (state IN ('complete', 'pending', 'interrupted', 'failed', 'incomplete')),
                    created_at INTEGER NOT NULL,
                    model TEXT,
                    notice TEXT,
                    UNIQUE (conversation_id, sequence)
                );
                CREATE INDEX messages_pending ON messages(state) WHERE state = 'pending';
                CREATE TABLE images(
                    hash TEXT PRIMARY KEY,
                    mime_type TEXT NOT NULL,
                    width INTEGER NOT NULL,
                    height INTEGER NOT NULL,
                    byte_count INTEGER NOT NULL
                );
                CREATE TABLE parts(
                    message_id TEXT NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
                    position INTEGER NOT NULL,
                    kind TEXT NOT NULL CHECK (kind IN ('text', 'image')),
                    text TEXT,
                    image_hash TEXT REFERENCES images(hash),
                    CHECK ((kind = 'text' AND text IS NOT NULL AND image_hash IS NULL)
                        OR (kind = 'image' AND image_hash IS NOT NULL AND text IS NULL)),
                    UNIQUE (message_id, position)
                );
                CREATE INDEX parts_by_image ON parts(image_hash) WHERE image_hash IS NOT NULL;
                CREATE VIRTUAL TABLE parts_fts USING fts5(text, content = 'parts', content_rowid = 'rowid');
                CREATE TRIGGER parts_fts_insert AFTER INSERT ON parts WHEN new.kind = 'text' BEGIN
                    INSERT INTO parts_fts(rowid, text) VALUES (new.rowid, new.text);
                END;
                CREATE TRIGGER parts_fts_delete AFTER DELETE ON parts WHEN old.kind = 'text' BEGIN
                    INSERT INTO parts_fts(parts_fts, rowid, text) VALUES ('delete', old.rowid, old.text);
                END;
                CREATE TRIGGER parts_fts_update AFTER UPDATE OF text ON parts WHEN old.kind = 'text' BEGIN
                    INSERT INTO parts_fts(parts_fts, rowid, text) VALUES ('delete', old.rowid, old.text);
                    INSERT INTO parts_fts(rowid, text) VALUES (new.rowid, new.text);
                END;
                CREATE TABLE app_state(key TEXT PRIMARY KEY, value TEXT NOT NULL);
                CREATE TABLE imports(
                    archive_digest TEXT PRIMARY KEY,
                    source TEXT NOT NULL,
                    imported_at INTEGER NOT NULL,
                    conversation_count INTEGER NOT NULL,
                    message_count INTEGER NOT NULL
                );
                """
        ),
        // Version 1 indexed parts by their implicit rowid, which rebuilding the table (a `.dump` restored into
        // a new file; VACUUM as SQLite documents it) may renumber, pointing search at the wrong parts. `id`
        // keeps today's rowids, and the index is rebuilt from it.
        //
        // The store runs with foreign keys on, but a version-1 file may hold rows a tool left dangling with them
        // off (the sqlite3 shell's default; `.recover`): copying those would fail the migration on every open.
        // They are dropped here — messages of a deleted conversation, parts of a deleted message or naming an
        // image row that does not exist — so `PRAGMA foreign_key_check` is clean afterwards.
        Migration(
            version: 2,
            name: "parts_integer_primary_key",
            sql: """
                DROP TRIGGER parts_fts_insert;
                DROP TRIGGER parts_fts_delete;
                DROP TRIGGER parts_fts_update;
                DROP TABLE parts_fts;
                DELETE FROM messages WHERE conversation_id NOT IN (SELECT id FROM conversations);
                UPDATE conversations SET message_count = (SELECT count(*) FROM messages m WHERE m.conversation_id = conversations.id);
                CREATE TABLE parts_new(
                    id INTEGER PRIMARY KEY,
                    message_id TEXT NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
                    position INTEGER NOT NULL,
                    kind TEXT NOT NULL CHECK (kind IN ('text', 'image')),
                    text TEXT,
                    image_hash TEXT REFERENCES images(hash),
                    CHECK ((kind = 'text' AND text IS NOT NULL AND image_hash IS NULL)
                        OR (kind = 'image' AND image_hash IS NOT NULL AND text IS NULL)),
                    UNIQUE (message_id, position)
                );
                INSERT INTO parts_new(id, message_id, position, kind, text, image_hash)
                    SELECT rowid, message_id, position, kind, text, image_hash FROM parts
                    WHERE message_id IN (SELECT id FROM messages)
                        AND (image_hash IS NULL OR image_hash IN (SELECT hash FROM images));
                DROP TABLE parts;
                ALTER TABLE parts_new RENAME TO parts;
                CREATE INDEX parts_by_image ON parts(image_hash) WHERE image_hash IS NOT NULL;
                CREATE VIRTUAL TABLE parts_fts USING fts5(text, content = 'parts', content_rowid = 'id');
                CREATE TRIGGER parts_fts_insert AFTER INSERT ON parts WHEN new.kind = 'text' BEGIN
                    INSERT INTO parts_fts(rowid, text) VALUES (new.id, new.text);
                END;
                CREATE TRIGGER parts_fts_delete AFTER DELETE ON parts WHEN old.kind = 'text' BEGIN
                    INSERT INTO parts_fts(parts_fts, rowid, text) VALUES ('delete', old.id, old.text);
                END;
                CREATE TRIGGER parts_fts_update AFTER UPDATE OF text ON parts WHEN old.kind = 'text' BEGIN
                    INSERT INTO parts_fts(parts_fts, rowid, text) VALUES ('delete', old.id, old.text);
                    INSERT INTO parts_fts(rowid, text) VALUES (new.id, new.text);
                END;
                INSERT INTO parts_fts(parts_fts) VALUES ('rebuild');
                """
        ),
        // Several `afm chat` processes may share one history. A pending answer names the store streaming it
        // (`owner`), and an image stored for a message not yet sent is held by its store (`image_holds`); the
        // owner's lease, an flock on `leases/OWNER.lock`, tells whether it still runs (see HistoryStore).
        Migration(
            version: 3,
            name: "answer_owners_and_image_holds",
            sql: """
                ALTER TABLE messages ADD COLUMN owner TEXT;
                CREATE TABLE image_holds(
                    hash TEXT NOT NULL REFERENCES images(hash) ON DELETE CASCADE,
                    owner TEXT NOT NULL,
                    PRIMARY KEY (hash, owner)
                ) WITHOUT ROWID;
                """
        ),
        // What was typed at the prompt of `afm chat`, per conversation, for Up/Down and Ctrl-R (NULL: typed with no
        // conversation open). Deleting a conversation deletes its inputs. And the token usage of each answer (from
        // the gateway's `usage`), shown by the web chat.
        Migration(
            version: 4,
            name: "input_history",
            sql: """
                CREATE TABLE input_history(
                    id INTEGER PRIMARY KEY,
                    conversation_id TEXT REFERENCES conversations(id) ON DELETE CASCADE,
                    text TEXT NOT NULL,
                    created_at INTEGER NOT NULL
                );
                CREATE INDEX input_history_by_conversation ON input_history(conversation_id, id);
                ALTER TABLE messages ADD COLUMN input_tokens INTEGER;
                ALTER TABLE messages ADD COLUMN output_tokens INTEGER;
                """
        ),
    ]
}
