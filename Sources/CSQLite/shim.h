// SPDX-License-Identifier: Apache-2.0
// SQLite from Debian's libsqlite3-dev. Imported only by AFMStore.
#ifndef AFM_CSQLITE_SHIM_H
#define AFM_CSQLITE_SHIM_H
#include <sqlite3.h>

/// SQLITE_TRANSIENT is a macro casting -1 to a function pointer, which Swift cannot import.
static inline sqlite3_destructor_type afm_sqlite_transient(void) { return SQLITE_TRANSIENT; }
#endif
