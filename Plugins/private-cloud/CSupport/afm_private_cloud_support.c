/* SPDX-License-Identifier: Apache-2.0 */
#include "afm_private_cloud_support.h"

#include <strings.h>

int afm_pc_curl_global_init(void) { return (int)curl_global_init(CURL_GLOBAL_DEFAULT); }

#define SET(option, value)                                          \
    do {                                                            \
        CURLcode code_ = curl_easy_setopt(easy, option, value);     \
        if (code_ != CURLE_OK) return (int)code_;                   \
    } while (0)

int afm_pc_curl_prepare(CURL *easy, const char *url, struct curl_slist *headers, const char *body, long body_size,
                        long connect_timeout_ms, long idle_timeout_s, long total_timeout_ms, afm_pc_data_fn write,
                        void *context, char *error_buffer) {
    SET(CURLOPT_URL, url);
    SET(CURLOPT_NOSIGNAL, 1L);
    SET(CURLOPT_FOLLOWLOCATION, 0L);
    SET(CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    SET(CURLOPT_TCP_KEEPALIVE, 1L);
    SET(CURLOPT_SSL_VERIFYPEER, 1L);
    SET(CURLOPT_SSL_VERIFYHOST, 2L);
    SET(CURLOPT_PROTOCOLS_STR, "http,https");
    /* A plain http:// request never goes through a proxy: libcurl would take one from http_proxy/ALL_PROXY in the
     * environment and send it the whole request, Authorization header included, in clear. https:// may use an
     * environment proxy (a CONNECT tunnel: the proxy only sees TLS). */
    if (strncasecmp(url, "http://", 7) == 0) SET(CURLOPT_NOPROXY, "*");
    SET(CURLOPT_CONNECTTIMEOUT_MS, connect_timeout_ms);
    if (idle_timeout_s > 0) {
        SET(CURLOPT_LOW_SPEED_LIMIT, 1L);
        SET(CURLOPT_LOW_SPEED_TIME, idle_timeout_s);
    }
    if (total_timeout_ms > 0) SET(CURLOPT_TIMEOUT_MS, total_timeout_ms);
    if (headers) SET(CURLOPT_HTTPHEADER, headers);
    if (body) {
        SET(CURLOPT_POSTFIELDSIZE, body_size);
        SET(CURLOPT_COPYPOSTFIELDS, body);
    } else {
        SET(CURLOPT_HTTPGET, 1L);
    }
    SET(CURLOPT_WRITEFUNCTION, write);
    SET(CURLOPT_WRITEDATA, context);
    if (error_buffer) SET(CURLOPT_ERRORBUFFER, error_buffer);
    return CURLE_OK;
}

long afm_pc_curl_response_code(CURL *easy) {
    long code = 0;
    if (curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &code) != CURLE_OK) return 0;
    return code;
}

long afm_pc_curl_local_port(CURL *easy) {
    long port = 0;
    if (curl_easy_getinfo(easy, CURLINFO_LOCAL_PORT, &port) != CURLE_OK) return 0;
    return port;
}

int afm_pc_sqlite_bind_text(sqlite3_stmt *statement, int index, const char *text) {
    return sqlite3_bind_text(statement, index, text, -1, SQLITE_TRANSIENT);
}
