/*
 * http.c: NORMAL-TIME CODE (never runs in a signal handler). One HTTP POST through libcurl
 * (the library FoundationNetworking itself links).
 *
 * libcurl reports a peer that cuts a response, sends garbage or never answers as an error
 * code; FoundationNetworking turned some of these into a trap. Bounds: the whole exchange by
 * timeout_ms, the body by max_body, the headers by AFT_HTTP_MAX_HEADER_BYTES. No redirect is
 * followed, no signal is used (CURLOPT_NOSIGNAL: sends use MSG_NOSIGNAL, no SIGPIPE), only
 * http and https are allowed. */
#include "aftermath_http.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static CURLcode global_status = CURLE_FAILED_INIT;

static void global_init(void) { global_status = curl_global_init(CURL_GLOBAL_DEFAULT); }

typedef struct transfer {
    aft_http_response *response;
    size_t max_body;
    size_t body_capacity;
    size_t header_bytes;
} transfer;

static void copy_string(char *dst, size_t capacity, const char *src, size_t length) {
    if (capacity == 0) return;
    if (length >= capacity) length = capacity - 1;
    memcpy(dst, src, length);
    dst[length] = 0;
}

/* A header line's value: after the name, without surrounding blanks and the line end. */
static void copy_value(char *dst, size_t capacity, const char *line, size_t start, size_t end) {
    while (start < end && (line[start] == ' ' || line[start] == '\t')) start++;
    while (end > start && (line[end - 1] == '\r' || line[end - 1] == '\n' || line[end - 1] == ' '))
        end--;
    copy_string(dst, capacity, line + start, end - start);
}

static size_t on_body(char *data, size_t size, size_t count, void *context) {
    transfer *t = context;
    aft_http_response *r = t->response;
    size_t n = size * count;
    size_t room = t->max_body - r->body_size;
    size_t take = n < room ? n : room;
    if (r->body_size + take > t->body_capacity) {
        size_t capacity = t->body_capacity ? t->body_capacity : 4096;
        while (capacity < r->body_size + take) capacity *= 2;
        if (capacity > t->max_body) capacity = t->max_body;
        uint8_t *grown = realloc(r->body, capacity);
        if (!grown) return 0;
        r->body = grown;
        t->body_capacity = capacity;
    }
    if (take) memcpy(r->body + r->body_size, data, take);
    r->body_size += take;
    if (take < n) {
        r->body_truncated = 1;
        return 0; /* ends the transfer: CURLE_WRITE_ERROR */
    }
    return n;
}

static size_t on_header(char *data, size_t size, size_t count, void *context) {
    transfer *t = context;
    aft_http_response *r = t->response;
    size_t n = size * count;
    t->header_bytes += n;
    if (t->header_bytes > AFT_HTTP_MAX_HEADER_BYTES) return 0;
    if (n >= 5 && memcmp(data, "HTTP/", 5) == 0) {
        /* A new response (after a 1xx interim one): forget the previous one's headers. */
        r->headers_complete = 0;
        r->content_type[0] = 0;
        r->retry_after[0] = 0;
    } else if ((n == 2 && data[0] == '\r' && data[1] == '\n') || (n == 1 && data[0] == '\n')) {
        r->headers_complete = 1;
    } else if (n > 13 && strncasecmp(data, "content-type:", 13) == 0) {
        copy_value(r->content_type, sizeof r->content_type, data, 13, n);
    } else if (n > 12 && strncasecmp(data, "retry-after:", 12) == 0) {
        copy_value(r->retry_after, sizeof r->retry_after, data, 12, n);
    }
    return n;
}

int aft_http_post(const aft_http_request *request, aft_http_response *response) {
    memset(response, 0, sizeof *response);
    pthread_once(&global_once, global_init);
    if (global_status != CURLE_OK) {
        copy_string(response->error, sizeof response->error, "libcurl could not be initialised",
                    32);
        return -1;
    }
    CURL *curl = curl_easy_init();
    if (!curl) {
        copy_string(response->error, sizeof response->error, "libcurl could not create a handle",
                    33);
        return -1;
    }
    struct curl_slist *headers = NULL;
    int failed = 0;
    for (size_t i = 0; i < request->header_count && !failed; i++) {
        struct curl_slist *next = curl_slist_append(headers, request->headers[i]);
        if (next)
            headers = next;
        else
            failed = 1;
    }
    /* No "Expect: 100-continue" round trip for large bodies. */
    struct curl_slist *next = failed ? NULL : curl_slist_append(headers, "Expect:");
    if (!next) {
        curl_slist_free_all(headers);
        curl_easy_cleanup(curl);
        copy_string(response->error, sizeof response->error,
                    "out of memory for the request headers", 37);
        return -1;
    }
    headers = next;

    transfer t = {.response = response, .max_body = request->max_body};
    char error[CURL_ERROR_SIZE];
    error[0] = 0;
    long timeout = request->timeout_ms < 1 ? 1 : request->timeout_ms;
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error);
    curl_easy_setopt(curl, CURLOPT_URL, request->url);
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
#else
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, timeout);
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, timeout);
    curl_easy_setopt(curl, CURLOPT_POST, 1L);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)request->body_size);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS,
                     request->body_size ? (const char *)request->body : "");
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, &t);
    curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(curl, CURLOPT_HEADERDATA, &t);
    if (request->ca_file) curl_easy_setopt(curl, CURLOPT_CAINFO, request->ca_file);

    CURLcode code = curl_easy_perform(curl);
    long status = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    if (response->headers_complete) response->status = status;
    char *location = NULL;
    if (curl_easy_getinfo(curl, CURLINFO_REDIRECT_URL, &location) == CURLE_OK && location) {
        copy_string(response->location, sizeof response->location, location, strlen(location));
    }
    /* A body longer than max_body: its status and headers stand; only the rest is not read. */
    if (code != CURLE_OK && !(response->body_truncated && response->headers_complete)) {
        response->transport_error = (int)code;
        response->timed_out = code == CURLE_OPERATION_TIMEDOUT;
        const char *text = error[0] ? error : curl_easy_strerror(code);
        copy_string(response->error, sizeof response->error, text, strlen(text));
    }
    curl_slist_free_all(headers);
    curl_easy_cleanup(curl);
    return 0;
}

void aft_http_response_free(aft_http_response *response) {
    free(response->body);
    response->body = NULL;
    response->body_size = 0;
}
