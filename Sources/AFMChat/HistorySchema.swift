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
        )
    ]
}
