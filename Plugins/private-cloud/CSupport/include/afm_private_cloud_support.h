/* SPDX-License-Identifier: Apache-2.0 */
/* Thin, non-variadic wrappers over libcurl and SQLite for the private-cloud backend (Swift cannot call the
 * variadic curl_easy_setopt/curl_easy_getinfo, nor pass SQLITE_TRANSIENT, which is a cast macro). */
#ifndef AFM_PRIVATE_CLOUD_SUPPORT_H
#define AFM_PRIVATE_CLOUD_SUPPORT_H

#include <curl/curl.h>
#include <sqlite3.h>
#include <stddef.h>

/** libcurl's write/header callback signature. Return `size * nmemb` to go on, anything else to abort. */
typedef size_t (*afm_pc_data_fn)(char *data, size_t size, size_t nmemb, void *context);

/** curl_global_init(CURL_GLOBAL_DEFAULT); returns the CURLcode. Call once per process. */
int afm_pc_curl_global_init(void);

/** Sets up an easy handle for one request.
 *  - `body` NULL: GET; else POST of `body_size` bytes (copied by libcurl).
 *  - `connect_timeout_ms`: TCP + TLS connect limit; `idle_timeout_s`: abort when fewer than 1 byte/s arrives
 *    for that many seconds (the read timeout); `total_timeout_ms`: 0 for none.
 *  - TLS verifies the peer and host against the system's trusted roots (libcurl's defaults).
 *  - No signals (CURLOPT_NOSIGNAL), no redirects, HTTP/1.1, TCP keep-alive.
 *  - An http:// URL never uses a proxy from the environment (CURLOPT_NOPROXY "*"): the request, with its
 *    Authorization header, would reach the proxy in clear. https:// URLs honour https_proxy/ALL_PROXY/NO_PROXY.
 *  Returns CURLE_OK or the first failing option's code. */
int afm_pc_curl_prepare(CURL *easy, const char *url, struct curl_slist *headers, const char *body, long body_size,
                        long connect_timeout_ms, long idle_timeout_s, long total_timeout_ms, afm_pc_data_fn write,
                        void *context, char *error_buffer);

/** The HTTP status of the response so far (0 before the status line). */
long afm_pc_curl_response_code(CURL *easy);

/** The number of the local port of the transfer's connection (0 when unknown). */
long afm_pc_curl_local_port(CURL *easy);

/** sqlite3_bind_text with SQLITE_TRANSIENT (SQLite copies the text). */
int afm_pc_sqlite_bind_text(sqlite3_stmt *statement, int index, const char *text);

#endif
