/* SPDX-License-Identifier: Apache-2.0
 * bridge_example.c: a program that embeds AFM agents through libafm-bridge.so and streams one reply.
 *
 *   bridge_example [URL [MODEL [PROMPT]]]     defaults: http://127.0.0.1:11535, on-device, a short question
 *
 * It opens a bridge, creates an agent (`agent.create`), starts a turn (`agent.run`) and prints the answer's text
 * as the `run.event` notifications bring it, then closes the bridge. Exit status: 0 answered, 1 the run failed,
 * 2 the bridge could not open or answered an error. Everything arrives through one callback, on the bridge's
 * delivery thread; the main thread waits on a condition variable for what it needs.
 *
 * Build (see Makefile):
 *
 *   cc -std=c99 $(pkg-config --cflags afm-bridge) bridge_example.c -o bridge_example \
 *      $(pkg-config --libs afm-bridge) -lpthread
 *
 * A real host parses messages with a JSON library; this example only looks for the few fields it needs.
 */
#define _POSIX_C_SOURCE 200809L

#include <afm_bridge.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct host {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    int agent_created;  /* the answer to request 1 came */
    int run_started;    /* the answer to request 2 came */
    int finished;       /* 1 completed, 2 failed or an error answer */
    int deltas;         /* text events received */
    char error[512];
};

/* Copies the JSON string value of the first "key": in json into out (escapes decoded; \u escapes of the Basic
 * Multilingual Plane written as UTF-8). Returns 1 when found. */
static int json_string(const char *json, const char *key, char *out, size_t cap) {
    char pattern[64];
    snprintf(pattern, sizeof pattern, "\"%s\":\"", key);
    const char *p = strstr(json, pattern);
    if (p == NULL || cap == 0) return 0;
    p += strlen(pattern);
    size_t n = 0;
    while (*p != '\0' && *p != '"' && n + 4 < cap) {
        if (*p != '\\') { out[n++] = *p++; continue; }
        p++;
        switch (*p) {
        case 'n': out[n++] = '\n'; p++; break;
        case 't': out[n++] = '\t'; p++; break;
        case 'r': out[n++] = '\r'; p++; break;
        case 'b': out[n++] = '\b'; p++; break;
        case 'f': out[n++] = '\f'; p++; break;
        case 'u': {
            unsigned code = 0;
            if (sscanf(p + 1, "%4x", &code) != 1) return 0;
            p += 5;
            if (code < 0x80) {
                out[n++] = (char)code;
            } else if (code < 0x800) {
                out[n++] = (char)(0xC0 | (code >> 6));
                out[n++] = (char)(0x80 | (code & 0x3F));
            } else {
                out[n++] = (char)(0xE0 | (code >> 12));
                out[n++] = (char)(0x80 | ((code >> 6) & 0x3F));
                out[n++] = (char)(0x80 | (code & 0x3F));
            }
            break;
        }
        case '\0': return 0;
        default: out[n++] = *p++; break; /* \" \\ \/ */
        }
    }
    out[n] = '\0';
    return 1;
}

/* The bridge's callback: runs on its delivery thread, one message at a time. `json` is borrowed for this call. */
static void on_message(void *user_data, const char *json, uint64_t size) {
    struct host *host = user_data;
    (void)size;
    pthread_mutex_lock(&host->lock);
    int response = strncmp(json, "{\"jsonrpc\":\"2.0\",\"id\":", 22) == 0;
    if (response && strstr(json, ",\"error\":{") != NULL) {
        json_string(json, "message", host->error, sizeof host->error);
        host->finished = 2;
    } else if (response && strncmp(json + 22, "1,", 2) == 0) {
        host->agent_created = 1;
    } else if (response && strncmp(json + 22, "2,", 2) == 0) {
        host->run_started = 1;
    } else if (strstr(json, "\"method\":\"run.event\"") != NULL) {
        char text[4096];
        if (strstr(json, "\"event\":{\"type\":\"text\"") != NULL && json_string(json, "delta", text, sizeof text)) {
            fputs(text, stdout);
            fflush(stdout);
            host->deltas++;
        } else if (strstr(json, "\"event\":{\"type\":\"completed\"") != NULL) {
            host->finished = 1;
        } else if (strstr(json, "\"event\":{\"type\":\"failed\"") != NULL) {
            json_string(json, "message", host->error, sizeof host->error);
            host->finished = 2;
        }
    }
    pthread_cond_broadcast(&host->changed);
    pthread_mutex_unlock(&host->lock);
}

static void send_text(afm_bridge *bridge, const char *json) {
    afm_bridge_send(bridge, json, strlen(json));
}

/* Writes s as a JSON string literal (quotes included) into out. */
static void json_quote(const char *s, char *out, size_t cap) {
    size_t n = 0;
    out[n++] = '"';
    for (; *s != '\0' && n + 8 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') { out[n++] = '\\'; out[n++] = (char)c; }
        else if (c < 0x20) n += (size_t)snprintf(out + n, cap - n, "\\u%04x", c);
        else out[n++] = (char)c;
    }
    out[n++] = '"';
    out[n] = '\0';
}

int main(int argc, char **argv) {
    const char *url = argc > 1 ? argv[1] : "http://127.0.0.1:11535";
    const char *model = argc > 2 ? argv[2] : "on-device";
    const char *prompt = argc > 3 ? argv[3] : "What is the capital of France? Answer in one sentence.";

    struct host host;
    memset(&host, 0, sizeof host);
    pthread_mutex_init(&host.lock, NULL);
    pthread_cond_init(&host.changed, NULL);

    char quoted_url[1024], quoted_model[512], quoted_prompt[4096], buffer[8192];
    json_quote(url, quoted_url, sizeof quoted_url);
    json_quote(model, quoted_model, sizeof quoted_model);
    json_quote(prompt, quoted_prompt, sizeof quoted_prompt);

    snprintf(buffer, sizeof buffer, "{\"url\":%s,\"model\":%s}", quoted_url, quoted_model);
    afm_bridge *bridge = NULL;
    char error[512] = "";
    if (afm_bridge_open(buffer, on_message, &host, &bridge, error, sizeof error) != AFM_BRIDGE_OK) {
        fprintf(stderr, "bridge_example: %s\n", error);
        return 2;
    }
    fprintf(stderr, "bridge_example: libafm-bridge %s\n", afm_bridge_version());

    send_text(bridge, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"agent.create\","
                      "\"params\":{\"instructions\":\"Answer briefly.\",\"policy\":{\"max_output_tokens\":48}}}");
    pthread_mutex_lock(&host.lock);
    while (!host.agent_created && !host.finished) pthread_cond_wait(&host.changed, &host.lock);
    pthread_mutex_unlock(&host.lock);

    /* The first agent of a bridge is agent-1. */
    snprintf(buffer, sizeof buffer,
             "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"agent.run\",\"params\":{\"agent_id\":\"agent-1\",\"prompt\":%s}}",
             quoted_prompt);
    send_text(bridge, buffer);
    pthread_mutex_lock(&host.lock);
    while (!host.finished) pthread_cond_wait(&host.changed, &host.lock);
    int finished = host.finished;
    int deltas = host.deltas;
    pthread_mutex_unlock(&host.lock);
    fputc('\n', stdout);
    fflush(stdout);  /* the reply before the summary, also when both go to one file */
    fprintf(stderr, "bridge_example: streamed %d text deltas\n", deltas);

    afm_bridge_close(bridge);  /* after this, on_message is never called again */
    pthread_cond_destroy(&host.changed);
    pthread_mutex_destroy(&host.lock);
    if (finished != 1) {
        fprintf(stderr, "bridge_example: %s\n", host.error);
        return finished == 2 && !host.run_started ? 2 : 1;
    }
    return 0;
}
